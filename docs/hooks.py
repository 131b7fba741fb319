"""MkDocs hooks of the documentation site: the Reference pages generated from the code (every command and option,
every config model's fields) and the research notes that live beside their experiments (``experiments/**/README.md``,
with the images they show), added to the site as pages when it is built."""

import os
import re
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

from podium.cli.reference import command_page, config_page

ROOT = Path(__file__).resolve().parent.parent
NOTES = {
    "experiments/claim/README.md": "research/claim.md",
    "experiments/README.md": "research/ablations.md",
    "experiments/flywheel/README.md": "research/flywheel.md",
}
"""Research notes (repository path → page of the site)."""
_IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]+)\)")
_LINK = re.compile(r"(?<!!)(\[[^\]]*\]\()([^)\s#]+)")


def on_files(files: Files, config: MkDocsConfig) -> Files:
    files.append(File.generated(config, "reference/cli.md", content=command_page()))
    files.append(File.generated(config, "reference/config.md", content=config_page()))
    for source, page in NOTES.items():
        notes = ROOT / source
        text = notes.read_text(encoding="utf-8")
        files.append(File.generated(config, page, content=site_links(text, source, page)))
        for shown in _IMAGE.findall(text):  # images, at the same place relative to the page as to the notes
            target = Path(page).parent / shown
            files.append(File.generated(config, target.as_posix(), abs_src_path=str(notes.parent / shown)))
    return files


def site_links(text: str, source: str, page: str) -> str:
    """The notes' links to documentation pages and to other notes, as links between the site's pages (on GitHub
    the notes link to the files)."""

    def rewrite(match: re.Match[str]) -> str:
        target = os.path.normpath(Path(source).parent / match.group(2))
        site = NOTES.get(target) or (target.removeprefix("docs/") if target.startswith("docs/") else None)
        return match.group(1) + os.path.relpath(site, Path(page).parent) if site else match.group(0)

    return _LINK.sub(rewrite, text)

"""The code blocks of the README, the documentation site and the research notes, as the tests that run them read
them.

A block's language says what a test does with it: ``console`` and ``bash`` blocks are commands (the lines starting
with ``$ `` in a console block, every line in a bash block without them), ``python`` blocks are programs, ``yaml``
blocks are config files; ``text`` (output, listings) and ``mermaid`` (diagrams) blocks are not code. A block that no
test can run as written says why in an HTML comment on the line before it: ``<!-- not run here: REASON -->``.
"""

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = sorted(
    [ROOT / "README.md", *(ROOT / "docs").rglob("*.md"), *(ROOT / "experiments").rglob("README.md")],
    key=lambda path: path.relative_to(ROOT).as_posix(),
)
"""Every Markdown file whose blocks the tests run."""
CODE = {"console", "bash", "python", "yaml"}
"""Languages of blocks that are run or checked."""
NOT_CODE = {"", "text", "mermaid"}
"""Languages of blocks that show output, listings or diagrams."""
_FENCE = re.compile(r"^```(\S*)\s*$")
_NOT_RUN = re.compile(r"^<!-- not run here: (.+?) -->$")


@dataclass(frozen=True)
class Block:
    """One fenced block of a document."""

    document: Path
    line: int
    """Line of the opening fence (1-based)."""
    language: str
    text: str
    not_run: str | None
    """Why no test runs it as written, when its marker says so."""
    printed: str | None
    """The text block after it when the paragraph between says it ``prints`` that: its expected output."""

    @property
    def where(self) -> str:
        return f"{self.document.relative_to(ROOT).as_posix()}:{self.line}"


def blocks(document: Path) -> list[Block]:
    """The fenced blocks of ``document``, in order."""
    lines = document.read_text(encoding="utf-8").splitlines()
    found: list[tuple[int, str, str, str | None, str]] = []  # line, language, text, marker, text before it
    start, language, since = None, "", 0
    for number, line in enumerate(lines, 1):
        fence = _FENCE.match(line)
        if fence is None:
            continue
        if start is None:
            start, language = number, fence.group(1)
        else:
            before = [text for text in lines[since : start - 1] if text.strip()]
            marker = _NOT_RUN.match(before[-1]) if before else None
            text = "\n".join(lines[start:number - 1]) + "\n"  # fmt: skip
            found.append((start, language, text, marker.group(1) if marker else None, " ".join(before).strip()))
            start, since = None, number
    result = []
    for index, (line, language, text, marker, _) in enumerate(found):
        following = found[index + 1] if index + 1 < len(found) else None
        printed = None
        if following is not None and following[1] == "text" and following[4] == "prints":
            printed = following[2]
        result.append(Block(document, line, language, text, marker, printed))
    return result


def every_block() -> list[Block]:
    return [block for document in DOCUMENTS for block in blocks(document)]


def commands(block: Block) -> list[str]:
    """The commands of a console or bash block: ``$ `` lines (continued by a trailing backslash), or every line of
    a bash block that has none; several commands on a line are split at `` ; ``, trailing comments dropped."""
    lines = block.text.splitlines()
    prompted = any(line.startswith("$ ") for line in lines)
    joined: list[str] = []
    continuing = False
    for line in lines:
        if continuing:
            joined[-1] += " " + line.strip()
        elif line.startswith("$ ") or (not prompted and line.strip() and not line.startswith("#")):
            joined.append(line.removeprefix("$ "))
        continuing = joined != [] and joined[-1].endswith("\\")
        if continuing:
            joined[-1] = joined[-1][:-1].rstrip()
    without_comments = [re.sub(r"\s+# .*$", "", line) for line in joined]
    return [command.strip() for line in without_comments for command in line.split(" ; ")]

"""``podium index``: build, inspect and search local passage indexes.

Importing this module needs no optional dependency; each command loads the search extra when it runs.
Without the main CLI: ``python -m podium.cli.index hotpot``.
"""

from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.text import Text

from podium.cli.common import ConfigFileOption, JsonOption, fail
from podium.cli.fields import Flags, config_options, load_config
from podium.cli.output import make_console, print_json_line, shown
from podium.core.printable import printable
from podium.errors import PodiumError
from podium.retrieval.config import HotpotIndexConfig, IndexBuildConfig, IndexConfig, IndexSearchConfig

if TYPE_CHECKING:  # needs the search extra; commands import it when they run
    from podium.retrieval.index import BuildReport

app = typer.Typer(help="Build and search local passage indexes (FAISS) for local_search.", no_args_is_help=True)

console = make_console()


INDEX = tuple(f"index.{name}" for name in IndexConfig.model_fields)
"""Every field of how an index is built, each a flag (``--model``, ``--chunk-words``, …)."""


@app.command("build")
@config_options(IndexBuildConfig, ("out", *INDEX), arguments=("corpus",))
def build(config: ConfigFileOption = None, *, flags: Flags) -> None:
    """Chunk, embed and index a JSONL corpus into a directory."""
    try:
        settings = load_config(IndexBuildConfig, config, flags)
        from podium.retrieval.index import build_index

        report = build_index(Path(settings.corpus), Path(settings.out), settings.index)
    except PodiumError as error:
        raise fail(error) from error
    _built(report, "passages", Path(settings.out))


def _built(report: "BuildReport", passages: str, target: Path) -> None:
    console.print(
        f"indexed {report.passages} {passages} as {report.chunks} chunks ({report.index_type}) into {shown(target)} "
        f"in {report.seconds:.1f} s",
        highlight=False,
    )


@app.command("search")
@config_options(IndexSearchConfig, (("k", "-k"),), arguments=("directory", "query"))
def search(config: ConfigFileOption = None, as_json: JsonOption = False, *, flags: Flags) -> None:
    """Print the top-k passages of an index for a query, with ids, titles and scores."""
    try:
        settings = load_config(IndexSearchConfig, config, flags)
        from podium.retrieval.index import PassageIndex

        hits = PassageIndex.load(Path(settings.directory), query_cache_size=0).search([settings.query], settings.k)[0]
    except PodiumError as error:
        raise fail(error) from error
    if as_json:
        for rank, hit in enumerate(hits, start=1):
            print_json_line({"rank": rank, **hit.to_dict()})
        return
    for rank, hit in enumerate(hits, start=1):
        title = (f"{rank}. {printable(hit.title)}", "bold")
        console.print(Text.assemble(title, printable(f"  (id {hit.id!r}, score {hit.score:.4f})")))
        console.print(printable(hit.text), markup=False, highlight=False)


@app.command("hotpot")
@config_options(HotpotIndexConfig, ("source", "out", "force", *INDEX))
def hotpot(config: ConfigFileOption = None, *, flags: Flags) -> None:
    """Build the offline demo index from the HotpotQA passages (CC-BY-SA-4.0): local_search's default corpus."""
    from podium.retrieval.hotpot import build_hotpot_index, default_hotpot_source
    from podium.retrieval.paths import default_index_dir

    try:
        settings = load_config(HotpotIndexConfig, config, flags)
        target = Path(settings.out) if settings.out else default_index_dir()
        source = Path(settings.source) if settings.source else default_hotpot_source()
        report = build_hotpot_index(source, target, settings.index, force=settings.force)
    except PodiumError as error:
        raise fail(error) from error
    if report is None:
        console.print(f"index at {shown(target)} is up to date", highlight=False)
    else:
        _built(report, "HotpotQA passages", target)


if __name__ == "__main__":
    app()

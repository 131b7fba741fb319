"""``podium index``: build, inspect and search local passage indexes.

Importing this module needs no optional dependency; each command loads the search extra when it runs.
Without the main CLI: ``python -m podium.cli.index hotpot``.
"""

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.text import Text

from podium.cli.common import fail
from podium.cli.output import make_console, print_json_line, shown
from podium.core.printable import printable
from podium.errors import PodiumError

if TYPE_CHECKING:  # needs the search extra; commands import it when they run
    from podium.retrieval.index import IndexConfig

app = typer.Typer(help="Build and search local passage indexes (FAISS) for local_search.", no_args_is_help=True)

console = make_console()


ModelOption = Annotated[
    str,
    typer.Option(
        "--model", help="all-MiniLM-L6-v2 (shipped in a wheel), a local sentence-transformers directory or a hub id."
    ),
]
ChunkOption = Annotated[int, typer.Option("--chunk-words", min=1, help="Words per chunk.")]
OverlapOption = Annotated[int, typer.Option("--overlap-words", min=0, help="Words shared by consecutive chunks.")]
IndexTypeOption = Annotated[
    str,
    typer.Option("--index-type", help="flat (exact), hnsw (approximate) or auto (flat up to 20,000 chunks)."),
]


def _config(model: str, chunk_words: int, overlap_words: int, index_type: str) -> "IndexConfig":
    from podium.retrieval.index import IndexConfig

    return IndexConfig.from_dict(
        {"model": model, "chunk_words": chunk_words, "overlap_words": overlap_words, "index_type": index_type},
        source="options",
    )


@app.command("build")
def build(
    corpus: Annotated[Path, typer.Argument(help="JSONL corpus: one object per line with id, title and text.")],
    out: Annotated[Path, typer.Option("--out", help="Index directory to write (replaced if it exists).")],
    model: ModelOption = "all-MiniLM-L6-v2",
    chunk_words: ChunkOption = 160,
    overlap_words: OverlapOption = 32,
    index_type: IndexTypeOption = "auto",
) -> None:
    """Chunk, embed and index a JSONL corpus into a directory."""
    try:
        from podium.retrieval.index import build_index

        report = build_index(corpus, out, _config(model, chunk_words, overlap_words, index_type))
    except PodiumError as error:
        raise fail(error) from error
    console.print(
        f"indexed {report.passages} passages as {report.chunks} chunks ({report.index_type}) "
        f"into {shown(report.directory)} in {report.seconds:.1f} s",
        highlight=False,
    )


@app.command("search")
def search(
    directory: Annotated[Path, typer.Argument(help="Index directory written by `podium index build`.")],
    query: Annotated[str, typer.Argument(help="The search query.")],
    k: Annotated[int, typer.Option("-k", "--k", min=1, help="Number of passages to return.")] = 5,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON Lines: one passage per line.")] = False,
) -> None:
    """Print the top-k passages of an index for a query, with ids, titles and scores."""
    try:
        from podium.retrieval.index import PassageIndex

        hits = PassageIndex.load(directory, query_cache_size=0).search([query], k)[0]
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
def hotpot(
    source: Annotated[
        Path | None,
        typer.Option("--source", help="HotpotQA JSON file (default: $PODIUM_DATA_DIR or ../shared/data, qa/...)."),
    ] = None,
    out: Annotated[
        Path | None, typer.Option("--out", help="Index directory (default: $PODIUM_CACHE/indexes/hotpot).")
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Rebuild even if the index is up to date.")] = False,
) -> None:
    """Build the offline demo index from the HotpotQA passages (CC-BY-SA-4.0): local_search's default corpus."""
    from podium.retrieval.hotpot import build_hotpot_index, default_hotpot_source
    from podium.retrieval.paths import default_index_dir

    target = out or default_index_dir()
    try:
        report = build_hotpot_index(source or default_hotpot_source(), target, force=force)
    except PodiumError as error:
        raise fail(error) from error
    if report is None:
        console.print(f"index at {shown(target)} is up to date", highlight=False)
    else:
        console.print(
            f"indexed {report.passages} HotpotQA passages as {report.chunks} chunks into {shown(target)} "
            f"in {report.seconds:.1f} s",
            highlight=False,
        )


if __name__ == "__main__":
    app()

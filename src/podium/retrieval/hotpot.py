"""The offline demo corpus: the ~1,000 Wikipedia paragraphs behind 100 HotpotQA questions.

The source is ``qa/hotpot_distractor_100.json`` in the shared benchmark data: the first 100 questions of the
HotpotQA dev set, distractor setting (Yang et al., 2018), each with its 10 context paragraphs (2 supporting, 8
distractors). HotpotQA is licensed CC-BY-SA-4.0 (its paragraphs come from Wikipedia); an index built from it
records that licence in its meta.json. Every paragraph becomes one passage whose id is its Wikipedia title.
The index built from it is the embedded pool's default ``local_search`` corpus.
"""

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from podium.retrieval.corpus import Passage, write_corpus
from podium.retrieval.errors import CorpusError, IndexLoadError, read_json_file
from podium.retrieval.paths import default_index_dir, shared_data_dir

if TYPE_CHECKING:  # these modules need the search extra, so they are imported where used
    from podium.retrieval.embedding import Embedder
    from podium.retrieval.index import BuildReport, IndexConfig, PassageIndex

HOTPOT_FILE = Path("qa") / "hotpot_distractor_100.json"
"""The HotpotQA file, relative to the shared data directory."""
LICENSE = "CC-BY-SA-4.0"


@dataclass(frozen=True)
class HotpotQuestion:
    """A question with the titles of the passages that support its answer."""

    question: str
    answer: str
    supporting_titles: tuple[str, ...]
    """Distinct titles of the supporting facts, in order of first mention."""


def default_hotpot_source() -> Path:
    """The HotpotQA file in the shared data directory (see :func:`podium.retrieval.paths.shared_data_dir`)."""
    return shared_data_dir() / HOTPOT_FILE


def _records(source: Path | None) -> list[dict[str, Any]]:
    source = source or default_hotpot_source()
    records = read_json_file(
        source,
        CorpusError,
        missing=f"HotpotQA file not found: {source} (set PODIUM_DATA_DIR to the shared data)",
        unreadable=f"cannot read HotpotQA file {source}",
    )
    if not isinstance(records, list):
        raise CorpusError(f"{source}: expected a JSON list of questions")
    return records


def hotpot_passages(source: Path | None = None) -> list[Passage]:
    """The distinct context paragraphs of the HotpotQA file, in order of first appearance; id = title."""
    passages: dict[str, Passage] = {}
    for number, record in enumerate(_records(source)):
        try:
            context = record["context"]
            pairs = zip(context["title"], context["sentences"], strict=True)
            for title, sentences in pairs:
                # Sentences carry their own leading spaces, so joining with "" restores the paragraph.
                passages.setdefault(title, Passage(id=title, title=title, text="".join(sentences).strip()))
        except (KeyError, TypeError, ValueError) as error:
            raise CorpusError(f"HotpotQA question {number}: malformed context: {error}") from error
    return list(passages.values())


def hotpot_questions(source: Path | None = None) -> list[HotpotQuestion]:
    """The questions with their answers and supporting titles."""
    questions = []
    for number, record in enumerate(_records(source)):
        try:
            titles = tuple(dict.fromkeys(record["supporting_facts"]["title"]))
            questions.append(HotpotQuestion(record["question"], record["answer"], titles))
        except (KeyError, TypeError) as error:
            raise CorpusError(f"HotpotQA question {number}: malformed record: {error}") from error
    return questions


def write_hotpot_corpus(out: Path, source: Path | None = None) -> int:
    """Convert the HotpotQA file into a JSONL corpus (id, title, text); returns the passage count."""
    return write_corpus(hotpot_passages(source), out)


def build_hotpot_index(
    source: Path | None = None,
    out: Path | None = None,
    config: "IndexConfig | None" = None,
    *,
    force: bool = False,
    embedder: "Embedder | None" = None,
) -> "BuildReport | None":
    """Build the demo index (default: into :func:`podium.retrieval.paths.default_index_dir`).

    The corpus is written beside the index directory first (``<out>.jsonl``). Returns ``None`` without building when
    ``out`` already holds an index of the same corpus built with the same config, unless ``force``.
    """
    from podium.retrieval.index import IndexConfig, build_index, file_sha256, read_meta

    source = source or default_hotpot_source()
    out = out or default_index_dir()
    config = config or IndexConfig()
    corpus = out.with_name(f"{out.name}.jsonl")
    write_hotpot_corpus(corpus, source)
    if not force and (out / "meta.json").is_file():
        try:
            meta = read_meta(out)
        except IndexLoadError:
            meta = {}
        if meta.get("corpus_sha256") == file_sha256(corpus) and meta.get("config") == config.model_dump(mode="json"):
            return None
    provenance = {"source": str(source), "dataset": "HotpotQA dev distractor, first 100 questions", "license": LICENSE}
    return build_index(corpus, out, config, embedder=embedder, provenance=provenance)


def load_default_index(directory: Path | None = None, **load_options: Any) -> "PassageIndex":
    """Load the demo index, explaining how to build it when it is missing.

    Args:
        directory: the index directory (default: :func:`podium.retrieval.paths.default_index_dir`).
        load_options: passed to :meth:`PassageIndex.load`.
    """
    from podium.retrieval.index import PassageIndex

    directory = directory or default_index_dir()
    if not (directory / "meta.json").is_file():
        raise IndexLoadError(
            f"no search index at {directory}: build it with `podium index hotpot` "
            "(or `python -m podium.cli.index hotpot`)"
        )
    return PassageIndex.load(directory, **load_options)

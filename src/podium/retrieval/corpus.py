"""Corpora: JSONL files of passages (``id``, ``title``, ``text``), and their chunking into overlapping windows."""

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from podium.core.files import replaced_atomically
from podium.retrieval.errors import CorpusError

_WORD = re.compile(r"\S+")


@dataclass(frozen=True)
class Passage:
    """One document of a corpus."""

    id: str
    """Unique within the corpus."""
    title: str
    """Shown with the passage; embedded with it when the index says so."""
    text: str
    """The body."""


@dataclass(frozen=True)
class Chunk:
    """A window of a passage's words: the unit that is embedded and indexed."""

    passage_id: str
    """The passage it comes from."""
    title: str
    """That passage's title."""
    index: int
    """Position of the window within the passage, from 0."""
    text: str
    """The window, cut from the passage text with its original spacing."""


def read_corpus(path: str | Path) -> list[Passage]:
    """Read a JSONL corpus; every line is an object with string fields ``id``, ``title`` and ``text``.

    Raises :class:`CorpusError` naming the file and line for unreadable files, bad JSON, missing or non-string
    fields, empty text and duplicate ids.
    """
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as error:
        raise CorpusError(f"cannot read corpus {path}: {error.strerror}") from error
    passages: list[Passage] = []
    seen: set[str] = set()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise CorpusError(f"{where}: not JSON: {error}") from error
        if not isinstance(record, dict):
            raise CorpusError(f"{where}: expected an object with id, title and text")
        fields = {}
        for name in ("id", "title", "text"):
            value = record.get(name)
            if not isinstance(value, str):
                raise CorpusError(f"{where}: field '{name}' must be a string, got {value!r}")
            fields[name] = value
        if not fields["text"].strip():
            raise CorpusError(f"{where}: passage '{fields['id']}' has empty text")
        if fields["id"] in seen:
            raise CorpusError(f"{where}: duplicate id '{fields['id']}'")
        seen.add(fields["id"])
        passages.append(Passage(**fields))
    if not passages:
        raise CorpusError(f"corpus {path} has no passages")
    return passages


def write_corpus(passages: Iterable[Passage], path: str | Path) -> int:
    """Write passages as JSONL; returns how many were written. The file is replaced whole, so that a process
    reading the corpus while another rewrites it (the HotpotQA corpus is rewritten at each index check) never sees
    half."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with replaced_atomically(path) as handle:
        for passage in passages:
            handle.write(json.dumps(asdict(passage), ensure_ascii=False) + "\n")
            count += 1
    return count


def chunk_passage(passage: Passage, words: int, overlap: int) -> list[Chunk]:
    """Cut a passage into windows of ``words`` words, each sharing ``overlap`` words with the previous one.

    A passage no longer than one window is one chunk. The last window ends at the passage's last word and is
    never shorter than needed: a tail shorter than the overlap is not repeated as a window of its own.
    """
    if words < 1:
        raise ValueError("words must be at least 1")
    if not 0 <= overlap < words:
        raise ValueError("overlap must be at least 0 and less than words")
    spans = [match.span() for match in _WORD.finditer(passage.text)]
    chunks: list[Chunk] = []
    # A window starting at or after len(spans) - overlap would hold no word that the previous one lacks.
    for number, start in enumerate(range(0, max(len(spans) - overlap, 1), words - overlap)):
        if not spans:
            break
        first, last = spans[start], spans[min(start + words, len(spans)) - 1]
        chunks.append(Chunk(passage.id, passage.title, number, passage.text[first[0] : last[1]]))
    return chunks


def chunk_corpus(passages: Iterable[Passage], words: int, overlap: int) -> Iterator[Chunk]:
    """The chunks of every passage, in corpus order."""
    for passage in passages:
        yield from chunk_passage(passage, words, overlap)

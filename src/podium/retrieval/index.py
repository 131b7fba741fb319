"""Dense passage indexes: build from a JSONL corpus, persist to a directory, load, search.

An index directory holds ``index.faiss`` (the vectors), ``chunks.jsonl`` (one record per vector: passage id,
title, chunk number, text) and ``meta.json`` (format, the :class:`IndexConfig` it was built with, counts and
provenance). Vectors are L2-normalised, so inner product is cosine similarity. ``flat`` search is exact;
``hnsw`` is approximate and stays fast at hundreds of thousands of chunks.
"""

import hashlib
import json
import shutil
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from podium.extras import require_extra
from podium.retrieval.config import IndexConfig
from podium.retrieval.corpus import Chunk, chunk_corpus, read_corpus
from podium.retrieval.embedding import Embedder
from podium.retrieval.errors import IndexLoadError, read_json_file

if TYPE_CHECKING:
    import faiss
    import numpy as np
else:
    faiss = require_extra("search", "faiss")
    np = require_extra("search", "numpy")

FORMAT = "podium-passage-index/1"
INDEX_FILE = "index.faiss"
CHUNKS_FILE = "chunks.jsonl"
META_FILE = "meta.json"
# Candidates fetched per wanted passage before merging chunks of one passage; grows if too few distinct.
_OVERSAMPLE = 4


@dataclass(frozen=True)
class Hit:
    """One retrieved passage: its best-matching chunk and the cosine similarity to the query."""

    id: str
    """Passage id."""
    title: str
    """Passage title."""
    text: str
    """Text of the best-matching chunk."""
    score: float
    """Cosine similarity of that chunk to the query."""
    chunk: int
    """Number of that chunk within the passage."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class BuildReport:
    """What :func:`build_index` did."""

    directory: Path
    passages: int
    chunks: int
    index_type: str
    seconds: float


def new_faiss_index(dimension: int, index_type: Literal["flat", "hnsw"], config: IndexConfig) -> "faiss.Index":
    """An empty inner-product index of the given kind."""
    if index_type == "flat":
        return faiss.IndexFlatIP(dimension)
    index = faiss.IndexHNSWFlat(dimension, config.hnsw_m, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = config.hnsw_ef_construction
    return index


def build_index(
    corpus: str | Path,
    out: str | Path,
    config: IndexConfig | None = None,
    *,
    embedder: Embedder | None = None,
    provenance: dict[str, str] | None = None,
) -> BuildReport:
    """Chunk, embed and index a JSONL corpus into the directory ``out`` (replaced as a whole if it exists).

    Args:
        corpus: JSONL file of passages with id, title and text.
        out: the index directory.
        config: chunking, model and index settings.
        embedder: an already loaded model; must be ``config.model``.
        provenance: extra facts recorded in meta.json (e.g. the corpus source and licence).
    """
    started = time.perf_counter()
    config = config or IndexConfig()
    corpus = Path(corpus)
    passages = read_corpus(corpus)
    chunks = list(chunk_corpus(passages, config.chunk_words, config.overlap_words))
    embedder = _embedder_for(config, embedder)
    vectors = embedder.encode([config.passage_text(chunk) for chunk in chunks])
    index_type = config.resolved_index_type(len(chunks))
    index = new_faiss_index(embedder.dimension, index_type, config)
    index.add(vectors)
    meta = {
        "format": FORMAT,
        "config": config.model_dump(mode="json"),
        "index_type": index_type,
        "dimension": embedder.dimension,
        "passages": len(passages),
        "chunks": len(chunks),
        "corpus_sha256": file_sha256(corpus),
        "provenance": provenance or {},
    }
    _write_directory(Path(out), index, chunks, meta)
    return BuildReport(Path(out), len(passages), len(chunks), index_type, time.perf_counter() - started)


def file_sha256(path: Path) -> str:
    """Hex SHA-256 of a file's bytes."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_meta(directory: str | Path) -> dict[str, Any]:
    """The meta.json of an index directory."""
    path = Path(directory) / META_FILE
    missing = f"no index at {directory}: {META_FILE} is missing"
    meta = read_json_file(path, IndexLoadError, missing=missing, unreadable=f"cannot read {path}")
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise IndexLoadError(f"{path} is not a {FORMAT} index")
    return meta


def _embedder_for(config: IndexConfig, embedder: Embedder | None) -> Embedder:
    if embedder is None:
        return Embedder(config.model, batch_size=config.batch_size)
    if embedder.model_name != config.model:
        raise IndexLoadError(f"the index uses model '{config.model}' but the embedder is '{embedder.model_name}'")
    return embedder


def _write_directory(out: Path, index: "faiss.Index", chunks: list[Chunk], meta: dict[str, Any]) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    # Written beside the target, then swapped in: readers never see a half-written index.
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    try:
        faiss.write_index(index, str(staging / INDEX_FILE))
        with (staging / CHUNKS_FILE).open("w", encoding="utf-8") as handle:
            for chunk in chunks:
                handle.write(json.dumps(asdict(chunk), ensure_ascii=False) + "\n")
        (staging / META_FILE).write_text(json.dumps(meta, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        if out.exists():
            retired = Path(tempfile.mkdtemp(prefix=f".{out.name}-old-", dir=out.parent))
            out.rename(retired / out.name)
            staging.rename(out)
            shutil.rmtree(retired, ignore_errors=True)
        else:
            staging.rename(out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


class PassageIndex:
    """A loaded index: embeds queries and returns the top-k passages.

    Each query is embedded alone and searched alone, so its hits depend on its text only, never on which
    other queries are searched with it or at the same time. Safe to share between threads.
    """

    def __init__(
        self,
        index: "faiss.Index",
        chunks: Sequence[Chunk],
        config: IndexConfig,
        embedder: Embedder,
        *,
        query_cache_size: int = 1024,
        meta: dict[str, Any] | None = None,
        directory: Path | None = None,
    ) -> None:
        if index.ntotal != len(chunks):
            raise IndexLoadError(f"the index has {index.ntotal} vectors but {len(chunks)} chunks")
        if index.d != embedder.dimension:
            raise IndexLoadError(f"the index has dimension {index.d} but the model embeds in {embedder.dimension}")
        self.index = index
        self.chunks = list(chunks)
        self.config = config
        self.embedder = embedder
        self.meta = meta or {}
        self.directory = directory
        """Where the index was loaded from, if it was."""
        self.query_cache_size = query_cache_size
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._cache_lock = threading.Lock()

    @classmethod
    def load(
        cls, directory: str | Path, *, embedder: Embedder | None = None, query_cache_size: int = 1024
    ) -> "PassageIndex":
        """Load an index directory written by :func:`build_index`.

        Args:
            directory: the index directory.
            embedder: an already loaded model (must be the one the index was built with); loaded if absent.
            query_cache_size: query embeddings kept for repeated queries (0: none).
        """
        directory = Path(directory)
        meta = read_meta(directory)
        config = IndexConfig.from_dict(meta.get("config"), source=str(directory / META_FILE))
        try:
            index = faiss.read_index(str(directory / INDEX_FILE))
        except RuntimeError as error:
            raise IndexLoadError(f"cannot read {directory / INDEX_FILE}: {error}") from error
        try:
            with (directory / CHUNKS_FILE).open(encoding="utf-8") as handle:
                chunks = [Chunk(**json.loads(line)) for line in handle if line.strip()]
        except (OSError, json.JSONDecodeError, TypeError) as error:
            raise IndexLoadError(f"cannot read {directory / CHUNKS_FILE}: {error}") from error
        embedder = _embedder_for(config, embedder)
        return cls(index, chunks, config, embedder, query_cache_size=query_cache_size, meta=meta, directory=directory)

    def __len__(self) -> int:
        """Number of indexed chunks."""
        return len(self.chunks)

    def search(self, queries: Sequence[str], k: int = 5) -> list[list[Hit]]:
        """The top-``k`` distinct passages for each query, best first."""
        if k < 1:
            raise ValueError("k must be at least 1")
        return [self.search_vector(self.query_vector(query), k) for query in queries]

    def query_vector(self, query: str) -> "np.ndarray":
        """The embedding of a query (shape (1, dimension)), cached."""
        with self._cache_lock:
            cached = self._cache.get(query)
            if cached is not None:
                self._cache.move_to_end(query)
                return cached
        vector = self.embedder.encode_one(self.config.query_prefix + query)
        if self.query_cache_size:
            with self._cache_lock:
                self._cache[query] = vector
                while len(self._cache) > self.query_cache_size:
                    self._cache.popitem(last=False)
        return vector

    def search_vector(self, vector: "np.ndarray", k: int) -> list[Hit]:
        """The top-``k`` distinct passages for one query embedding of shape (1, dimension)."""
        total = self.index.ntotal
        wanted = min(total, k * _OVERSAMPLE)
        while True:
            scores, rows = self._search(vector, wanted)
            hits = self._distinct_passages(scores[0], rows[0], k)
            if len(hits) >= k or wanted >= total:
                return hits
            wanted = min(total, wanted * _OVERSAMPLE)

    def _search(self, vector: "np.ndarray", wanted: int) -> tuple["np.ndarray", "np.ndarray"]:
        if isinstance(self.index, faiss.IndexHNSW):
            # Per-call parameters rather than index.hnsw.efSearch: concurrent searches share the index.
            parameters = faiss.SearchParametersHNSW(efSearch=max(self.config.hnsw_ef_search, wanted))
            return self.index.search(vector, wanted, params=parameters)
        return self.index.search(vector, wanted)

    def _distinct_passages(self, scores: "np.ndarray", rows: "np.ndarray", k: int) -> list[Hit]:
        hits: list[Hit] = []
        seen: set[str] = set()
        for score, row in zip(scores.tolist(), rows.tolist(), strict=True):
            if row < 0:  # fewer results than asked for
                break
            chunk = self.chunks[row]
            if chunk.passage_id in seen:
                continue
            seen.add(chunk.passage_id)
            hits.append(Hit(chunk.passage_id, chunk.title, chunk.text, score, chunk.index))
            if len(hits) == k:
                break
        return hits

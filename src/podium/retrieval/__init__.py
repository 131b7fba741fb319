"""Local retrieval for ``local_search``: corpora, sentence embeddings, FAISS passage indexes.

This package imports without the ``search`` extra; :mod:`podium.retrieval.embedding` and
:mod:`podium.retrieval.index` need it (``pip install 'podium[search]'``) and say so when it is missing.
"""

from podium.retrieval.corpus import Chunk, Passage, chunk_passage, read_corpus, write_corpus
from podium.retrieval.errors import CorpusError, IndexLoadError
from podium.retrieval.paths import default_index_dir, shared_data_dir

__all__ = [
    "Chunk",
    "CorpusError",
    "IndexLoadError",
    "Passage",
    "chunk_passage",
    "default_index_dir",
    "read_corpus",
    "shared_data_dir",
    "write_corpus",
]

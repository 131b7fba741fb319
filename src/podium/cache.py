"""Where Podium keeps converted models and built indexes."""

import os
from pathlib import Path


def cache_dir(*parts: str) -> Path:
    """``$PODIUM_CACHE`` (default ``~/.cache/podium``) joined with ``parts``, created if missing."""
    root = Path(os.environ.get("PODIUM_CACHE") or Path.home() / ".cache" / "podium")
    path = root.joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path

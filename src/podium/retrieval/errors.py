"""Errors of local retrieval: a corpus that cannot be read, an index that cannot be loaded."""

import json
from pathlib import Path
from typing import Any

from podium.errors import PodiumError


class CorpusError(PodiumError, ValueError):
    """A corpus file is missing, malformed, or has a passage without an id, title or text; the message names
    the file and line."""


class IndexLoadError(PodiumError, ValueError):
    """An index directory is missing, incomplete, of an unknown format, or built with another model."""


def read_json_file(path: Path, error: type[PodiumError], *, missing: str, unreadable: str) -> Any:
    """The JSON value in ``path``; else ``error`` saying ``missing`` (no such file) or ``unreadable`` and why."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as cause:
        raise error(missing) from cause
    except (OSError, json.JSONDecodeError) as cause:
        raise error(f"{unreadable}: {cause}") from cause

"""Replacing a file whole: written beside it, synced, then swapped in, so that a crash or a reader at the same
moment sees the old content or the new, never half."""

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, TextIO, cast


@contextmanager
def replaced_atomically(path: Path) -> Iterator[TextIO]:
    """A text handle whose content replaces ``path`` when the block ends; if the block raises, ``path`` is left as
    it was. The temporary file's name is this process's and thread's, so concurrent writers never share one."""
    with _replaced(path, "w") as handle:
        yield cast(TextIO, handle)


def write_atomically(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` (see :func:`replaced_atomically`)."""
    with replaced_atomically(path) as handle:
        handle.write(text)


def write_bytes_atomically(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` (see :func:`replaced_atomically`)."""
    with _replaced(path, "wb") as handle:
        handle.write(data)


@contextmanager
def _replaced(path: Path, mode: str) -> Iterator[IO[Any]]:
    temporary = path.with_name(f".{path.name}.{os.getpid()}-{threading.get_ident()}.tmp")
    try:
        with temporary.open(mode, encoding=None if "b" in mode else "utf-8") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)

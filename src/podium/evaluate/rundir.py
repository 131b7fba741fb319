"""Safety of a run directory: one ``podium eval`` at a time, files replaced atomically, nothing dropped unseen.

**Lock.** A run holds an exclusive ``flock`` on ``OUT/eval.lock`` for as long as it runs, and writes its pid,
host and start time into it. A second ``podium eval`` on the same directory does not wait and does not join: it
stops at once with :class:`RunLocked`, which names the holder. The kernel releases the lock when the holder
exits, however it exits (``kill -9`` included), so a stale lock file never blocks a resume; the file is left in
place (removing it would let two processes lock two different files). ``flock`` is advisory and local: two
hosts sharing the directory over NFS are not kept apart.

**Repairs.** Files are replaced through a temporary file, fsync and rename, so a kill leaves the old or the new
version. Lines of ``results.jsonl`` that cannot be read are moved to ``results.rejected.jsonl`` rather than
deleted, so a repair never destroys data silently (:class:`~podium.solve.jsonl.JsonlLog`).
"""

import fcntl
import json
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from podium.errors import PodiumError

LOCK_FILE = "eval.lock"


class RunLocked(PodiumError):
    """Another process is evaluating into the same directory."""


@contextmanager
def hold_run_directory(out: Path) -> Iterator[None]:
    """Hold ``out``'s lock for the duration of the block; raises :class:`RunLocked` naming the holder if another
    process has it."""
    handle = (out / LOCK_FILE).open("a+", encoding="utf-8")
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            raise RunLocked(
                f"{out} is in use by another podium eval ({_holder(handle.read())}); wait for it to finish, "
                "or use another --out"
            ) from None
        handle.seek(0)
        handle.truncate()
        started = datetime.now(tz=UTC).isoformat(timespec="seconds")
        handle.write(json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "started": started}) + "\n")
        handle.flush()
        yield
        handle.seek(0)
        handle.truncate()  # the lock's content describes a live holder only
    finally:
        handle.close()  # closing releases the lock


def _holder(text: str) -> str:
    try:
        holder = json.loads(text)
        return f"pid {holder['pid']} on {holder['host']}, started {holder['started']}"
    except (ValueError, TypeError, KeyError):
        return "its holder has not written its name yet"

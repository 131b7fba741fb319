"""Finding the processes of sandboxes by their tag (``SandboxConfig.tag``), e.g. to check that none is left."""

import contextlib
import os
from pathlib import Path

from podium.sandbox.factory import TAG_VARIABLE


def tagged_processes(tag: str) -> list[int]:
    """Processes carrying ``tag``: on their command line (bubblewrap, the launcher and its forks) or in their
    environment (programs the sandboxed code executed). Only processes this user may inspect are seen."""
    if not tag:
        raise ValueError("an empty tag would match every sandbox")
    found = []
    marker = f"{TAG_VARIABLE}={tag}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            if tag.encode() in (entry / "cmdline").read_bytes().split(b"\0") or marker in (
                entry / "environ"
            ).read_bytes().split(b"\0"):
                found.append(int(entry.name))
    return found

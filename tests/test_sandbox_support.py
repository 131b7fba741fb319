"""Helpers for the sandbox tests: each test's sandbox carries a tag of its own, so that a test finds exactly the
processes its own sandboxes started (bubblewrap, the launcher, the program and whatever the program ran), never
those of another Podium on the machine."""

import asyncio
import contextlib
import os
import textwrap
import time
import uuid
from collections.abc import Iterator

from podium.sandbox import Sandbox, SandboxConfig, SandboxRun, tagged_processes

SHORT_LIMITS = {"cpu_time_s": 2, "wall_time_s": 6, "memory_mb": 512, "max_processes": 32}
GRACE_S = 5.0  # a killed sandbox's last processes are reaped asynchronously, within milliseconds


def unique_tag() -> str:
    """A tag no other test or Podium process uses."""
    return f"test-{os.getpid()}-{uuid.uuid4().hex[:12]}"


def runs(tag: str, program: str) -> bool:
    """Whether one of the tagged processes is ``program`` (its command line's first word)."""
    for pid in tagged_processes(tag):
        with contextlib.suppress(OSError), open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            if cmdline.read().split(b"\0")[0] == program.encode():
                return True
    return False


def wait_until_gone(tag: str) -> list[int]:
    """The tagged processes still there after a grace period (they are being killed: give them time)."""
    deadline = time.monotonic() + GRACE_S
    while (left := tagged_processes(tag)) and time.monotonic() < deadline:
        time.sleep(0.02)
    return left


@contextlib.contextmanager
def own_sandbox(**settings: object) -> Iterator[Sandbox]:
    """A sandbox with short limits and a fresh tag; on exit it is closed and none of its processes may be left."""
    sandbox = Sandbox(SandboxConfig(**{**SHORT_LIMITS, "tag": unique_tag(), **settings}))
    try:
        yield sandbox
    finally:
        sandbox.close()
    assert wait_until_gone(sandbox.config.tag) == []


def run(sandbox: Sandbox, code: str, **files: str) -> SandboxRun:
    """Run dedented ``code`` in ``sandbox`` with ``files`` in its working directory."""
    return asyncio.run(sandbox.run_python(textwrap.dedent(code), files=files))

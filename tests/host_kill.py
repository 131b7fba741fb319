"""Kill a host process with SIGKILL while its warm pool is busy starting sandboxes, then look for what it left.

The host (a separate Python process this module starts) keeps a warm pool of sandboxes and runs short calls
back to back, several at once, so that at any moment some sandboxes are starting (bubblewrap setting up),
some wait warm, some run a call and some are being torn down while the pool replaces them.
:func:`kill_busy_host` SIGKILLs the host at a random moment and returns the processes of its sandboxes (found
by their tag) still alive after a grace period; it then kills those leftovers itself, so that a failed round
leaves nothing behind. The sandbox tests run a few rounds, ``benchmarks/bench_sandbox.py`` many.
"""

import contextlib
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass

from podium.sandbox import tagged_processes

GRACE_S = 5.0
"""How long the sandboxes of a killed host may take to go (they go within milliseconds when nothing is stuck)."""
START_WAIT_S = 60.0


@dataclass(frozen=True)
class KillRound:
    """What one round found."""

    leftovers: list[str]
    """``pid command line`` of each tagged process still alive after the grace period."""
    seconds_to_gone: float
    """From the kill to the last tagged process gone (the grace period when some were left)."""
    delay_s: float
    """How long after its pool began filling the host was killed."""


def _host_script(tag: str, warm: int, concurrent: int) -> str:
    return textwrap.dedent(
        f"""
        import asyncio, sys
        from podium.sandbox import Sandbox, SandboxConfig
        sandbox = Sandbox(SandboxConfig(tag={tag!r}, warm_sandboxes={warm}, max_concurrent={concurrent},
                                        wall_time_s=30, cpu_time_s=5, memory_mb=512, max_processes=16))

        async def calls():
            while True:
                await asyncio.gather(*(sandbox.run_python("print(1)") for _ in range({concurrent})))

        sandbox.isolation()  # probes bubblewrap, then starts filling the warm pool
        print("filling", flush=True)
        asyncio.run(calls())
        """
    )


def kill_busy_host(
    tag: str, *, rng: random.Random, warm: int = 4, concurrent: int = 3, max_delay_s: float = 0.5
) -> KillRound:
    """One round: start a host, SIGKILL it at a random moment once its pool is filling, report what was left."""
    host = subprocess.Popen(
        [sys.executable, "-c", _host_script(tag, warm, concurrent)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert host.stdout is not None
        deadline = time.monotonic() + START_WAIT_S
        while host.stdout.readline() != b"filling\n":
            if host.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the host did not start its sandboxes (exit code {host.poll()})")
        delay = rng.uniform(0, max_delay_s)
        time.sleep(delay)
    finally:
        host.send_signal(signal.SIGKILL)  # this module's own child
        host.wait()
        if host.stdout is not None:
            host.stdout.close()
    killed = time.monotonic()
    while (left := tagged_processes(tag)) and time.monotonic() - killed < GRACE_S:
        time.sleep(0.01)
    gone_after = time.monotonic() - killed
    leftovers = [_describe(pid) for pid in left]
    for pid in left:  # this round's own sandboxes: end them so that nothing outlives the round
        _kill(pid)
    return KillRound(leftovers=[item for item in leftovers if item], seconds_to_gone=gone_after, delay_s=delay)


def _describe(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            words = cmdline.read().split(b"\0")
    except OSError:
        return ""
    return f"{pid} {b' '.join(words[:1] + words[-6:]).decode(errors='replace')}"


def _kill(pid: int) -> None:
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGKILL)

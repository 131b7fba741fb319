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
from pathlib import Path

from podium.sandbox import tagged_processes

GRACE_S = 5.0
"""How long the sandboxes of a killed host may take to go (they go within milliseconds when nothing is stuck)."""
START_WAIT_S = 60.0
SETTLE_S = 0.3
"""How long none of a round's processes must be seen before the round counts as clean."""


DETACHING_PROGRAMS = {
    # a grandchild in a session of its own: out of the reach of any signal to the program's process group
    "setsid": textwrap.dedent(
        """
        import os, time
        if os.fork() == 0:
            os.setsid()
            os.execv('/bin/sleep', ['sleep', '3600'])
        time.sleep(3600)
        """
    ),
    # a program that disarms what the kernel would signal it with when its parent or the host goes: the
    # parent-death signal, and the asynchronous signal of every descriptor it holds
    "disarmed": textwrap.dedent(
        """
        import ctypes, fcntl, os
        ctypes.CDLL(None).prctl(1, 0, 0, 0, 0)  # PR_SET_PDEATHSIG 0
        for fd in map(int, os.listdir('/proc/self/fd')):
            try:
                fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_ASYNC)
                fcntl.fcntl(fd, fcntl.F_SETOWN, 0)
            except OSError:
                pass
        os.execv('/bin/sleep', ['sleep', '3600'])
        """
    ),
}
"""Sandboxed programs that leave the reach of a signal to their process group or of their parent's death (each
ends up running ``sleep``): each must still die with its sandbox when the host is killed."""


@dataclass(frozen=True)
class KillRound:
    """What one round found."""

    leftovers: list[str]
    """``pid command line`` of each tagged process still alive after the grace period."""
    seconds_to_gone: float
    """From the kill to the last tagged process gone (the grace period when some were left)."""
    delay_s: float
    """How long after its pool began filling (or its first item was done) the host was killed."""


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
    return _leftovers(tag, delay)


EVAL_SYSTEM = """kind: orchestrator
policy: serial
max_turns: 3
pool:
  workers:
    - name: boss
      backend: scripted
      model: m
      replies: ['<tool_call>{{"name": "python", "arguments": {{"code": "print(1)"}}}}</tool_call>']
      price: {{input_per_mtok: 0, output_per_mtok: 0}}
  tools: [python]
  sandbox: {{tag: {tag}, warm_sandboxes: 2}}
"""
"""A scripted orchestrator that calls the python tool in each of its three turns: every item uses sandboxes."""


def kill_eval(tag: str, directory: Path, *, rng: random.Random, max_delay_s: float = 1.0) -> KillRound:
    """One round of ``podium eval`` (GSM8K items, two at a time, each calling the sandboxed python tool): SIGKILL
    it at a random moment once its first item is done, report what its sandboxes left."""
    system = directory / f"{tag}.yaml"  # the tag on its command line marks copies forked before an exec
    system.write_text(EVAL_SYSTEM.format(tag=tag))
    out = directory / "run"
    command = [sys.executable, "-m", "podium", "eval", "--benchmark", "gsm8k", "--system", str(system)]
    command += ["--limit", "200", "--concurrency", "2", "--out", str(out), "--quiet"]
    evaluation = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + START_WAIT_S
        while not (out / "results.jsonl").exists() or not (out / "results.jsonl").stat().st_size:
            if evaluation.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"podium eval did not finish an item (exit code {evaluation.poll()})")
            time.sleep(0.01)
        delay = rng.uniform(0, max_delay_s)
        time.sleep(delay)
    finally:
        evaluation.send_signal(signal.SIGKILL)  # this module's own child
        evaluation.wait()
    return _leftovers(tag, delay)


def _leftovers(tag: str, delay: float) -> KillRound:
    """Wait up to the grace period for the round's processes to go (and stay gone for a moment: a copy of the host
    forked just before the kill may still become bubblewrap); kill and describe those that did not."""
    killed = time.monotonic()
    gone_since = None
    while time.monotonic() - killed < GRACE_S:
        if _round_processes(tag):
            gone_since = None
        elif gone_since is None:
            gone_since = time.monotonic()
        elif time.monotonic() - gone_since >= SETTLE_S:
            break
        time.sleep(0.01)
    left = _round_processes(tag)
    gone_after = (gone_since or time.monotonic()) - killed
    leftovers = [_describe(pid) for pid in left]
    for pid in left:  # this round's own processes: end them so that nothing outlives the round
        _kill(pid)
    return KillRound(leftovers=[item for item in leftovers if item], seconds_to_gone=gone_after, delay_s=delay)


def _round_processes(tag: str) -> set[int]:
    """The tagged processes, and copies of the host forked to start a sandbox that have not become bubblewrap yet
    (their command line is still the host's, which holds the tag)."""
    found = set(tagged_processes(tag))
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            with contextlib.suppress(OSError):
                if tag.encode() in (entry / "cmdline").read_bytes():
                    found.add(int(entry.name))
    return found


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

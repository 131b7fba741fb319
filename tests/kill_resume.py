"""Kill a resumable command with SIGKILL at random moments while it appends lines to a file it writes."""

import os
import random
import signal
import subprocess
import time
from pathlib import Path


def line_count(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


def kill_while_writing(
    command: list[str], cwd: Path, lines: Path, *, rounds: int, lines_before: int, rng: random.Random, wait_s: float
) -> int:
    """Start ``command`` ``rounds`` times; each time, once ``lines`` has ``lines_before`` new lines (or ``wait_s``
    passed), wait a random 0–50 ms and SIGKILL the child this started, by its pid. Returns how many were killed
    while still running."""
    killed = 0
    for _ in range(rounds):
        target = line_count(lines) + lines_before
        child = subprocess.Popen(command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.monotonic() + wait_s
        while line_count(lines) < target and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.002)
        time.sleep(rng.uniform(0.0, 0.05))
        if child.poll() is None:
            os.kill(child.pid, signal.SIGKILL)
            killed += 1
        child.communicate(timeout=30)
    return killed

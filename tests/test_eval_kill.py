"""Kill ``podium eval`` with SIGKILL at random moments, resume each time, and lose or duplicate nothing."""

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from podium.benchmarks.loaders import shared_data_dir
from podium.evaluate.runner import RESULTS_FILE

from .eval_runner import oracle_knows

pytestmark = pytest.mark.skipif(not shared_data_dir().is_dir(), reason="shared benchmark data not present")
REPO = Path(__file__).resolve().parents[1]
ITEMS, SAMPLES = 50, 2
KILLS = 4
LINES_BEFORE_KILL = 8
"""New lines to wait for before each kill: 4 kills × (8 + a few) stay well below the 100 samples, so every kill
lands mid-run."""


def _line_count(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


def _command(system: Path, out: Path) -> list[str]:
    return [
        sys.executable, "-m", "tests.eval_runner", "eval", "--benchmark", "gsm8k", "--system", str(system),
        "--limit", str(ITEMS), "--samples", str(SAMPLES), "--concurrency", "4", "--out", str(out), "--quiet",
    ]  # fmt: skip


def test_sigkill_at_random_points_then_resume_loses_and_duplicates_nothing(tmp_path):
    system = tmp_path / "oracle.yaml"
    system.write_text("kind: oracle\ndelay_s: 0.04\nusd_per_attempt: 0.001\n")
    out = tmp_path / "run"
    results = out / RESULTS_FILE
    rng = random.Random(7)
    killed = 0
    for _ in range(KILLS):
        target = _line_count(results) + LINES_BEFORE_KILL
        child = subprocess.Popen(_command(system, out), cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 60
        while _line_count(results) < target and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.002)
        time.sleep(rng.uniform(0.0, 0.05))
        if child.poll() is None:
            os.kill(child.pid, signal.SIGKILL)
            killed += 1
        child.communicate(timeout=30)
    assert killed >= 3, "the run finished before it could be interrupted; slow the oracle down"

    final = subprocess.run(_command(system, out), cwd=REPO, capture_output=True, text=True, timeout=120)
    assert final.returncode == 0, final.stderr
    lines = results.read_text(encoding="utf-8").splitlines()
    keys = [(json.loads(line)["item_id"], json.loads(line)["sample"]) for line in lines]
    expected = {(f"gsm8k-{i}", s) for i in range(ITEMS) for s in range(SAMPLES)}
    assert len(keys) == len(set(keys)), "duplicated samples"
    assert set(keys) == expected, "lost samples"
    correct = sum(json.loads(line)["verdict"]["correct"] for line in lines)
    assert correct == SAMPLES * sum(oracle_knows(f"gsm8k-{i}") for i in range(ITEMS))
    assert f"{len(expected)}/{len(expected)} done" in final.stdout

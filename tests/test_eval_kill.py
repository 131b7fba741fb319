"""Kill ``podium eval`` with SIGKILL at random moments, resume each time, and lose or duplicate nothing."""

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from podium.datasets.loaders import shared_data_dir
from podium.evaluate.runner import RESULTS_FILE

from .eval_runner import oracle_knows
from .kill_resume import kill_while_writing

pytestmark = pytest.mark.skipif(not shared_data_dir().is_dir(), reason="shared benchmark data not present")
REPO = Path(__file__).resolve().parents[1]
ITEMS, SAMPLES = 50, 2
KILLS = 4
LINES_BEFORE_KILL = 8
"""New lines to wait for before each kill: 4 kills × (8 + a few) stay well below the 100 samples, so every kill
lands mid-run."""


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
    killed = kill_while_writing(
        _command(system, out), REPO, results, rounds=KILLS, lines_before=LINES_BEFORE_KILL, rng=rng, wait_s=60
    )
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

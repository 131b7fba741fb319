"""Evaluation safety: one process per run directory, and broken manifests or results repaired without losing
finished results."""

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from podium.datasets.loaders import get_benchmark, shared_data_dir
from podium.evaluate.rundir import LOCK_FILE, RunLocked, hold_run_directory
from podium.evaluate.runner import MANIFEST_FILE, RESULTS_FILE, EvalError, read_results, run_eval

from .eval_runner import OracleSystem

pytestmark = pytest.mark.skipif(not shared_data_dir().is_dir(), reason="shared benchmark data not present")
REPO = Path(__file__).resolve().parents[1]
GSM8K = get_benchmark("gsm8k")


def _run(out: Path, system: OracleSystem | None = None, **options: object):
    system = system or OracleSystem("oracle", delay_s=0.0, usd_per_attempt=0.001)
    return asyncio.run(run_eval(GSM8K, system, out=out, progress=False, **options))  # type: ignore[arg-type]


def _command(system: Path, out: Path, limit: int) -> list[str]:
    return [
        sys.executable, "-m", "tests.eval_runner", "eval", "--benchmark", "gsm8k", "--system", str(system),
        "--limit", str(limit), "--out", str(out), "--quiet",
    ]  # fmt: skip


HOLDER = """
import sys, time
from pathlib import Path
from podium.evaluate.rundir import hold_run_directory
with hold_run_directory(Path(sys.argv[1])):
    print("held", flush=True)
    time.sleep(120)
"""


def test_podium_eval_on_a_directory_in_use_exits_naming_the_holder(tmp_path: Path) -> None:
    system = tmp_path / "oracle.yaml"
    system.write_text("kind: oracle\ndelay_s: 0.0\nusd_per_attempt: 0.001\n")
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        refused = subprocess.run(_command(system, tmp_path, 3), cwd=REPO, capture_output=True, text=True, timeout=120)
    finally:
        holder.kill()  # the process this test started, by its handle
        holder.wait(timeout=30)
    assert refused.returncode != 0
    message = " ".join(refused.stderr.split())
    assert "in use by another podium eval" in message and f"pid {holder.pid}" in message, refused.stderr
    assert not (tmp_path / RESULTS_FILE).exists(), "the refused run wrote nothing"
    assert _run(tmp_path, limit=2).done == 2, "a holder killed with SIGKILL leaves no stale lock"


def test_two_concurrent_runs_in_one_process_the_second_is_refused(tmp_path: Path) -> None:
    slow = OracleSystem("oracle", delay_s=0.05, usd_per_attempt=0.001)

    async def both():
        first = asyncio.create_task(run_eval(GSM8K, slow, out=tmp_path, limit=6, progress=False))
        await asyncio.sleep(0)  # the first takes the lock before its first await
        second = run_eval(GSM8K, slow, out=tmp_path, limit=6, progress=False)
        return await asyncio.gather(first, second, return_exceptions=True)

    done, refused = asyncio.run(both())
    assert done.done == 6 and isinstance(refused, RunLocked) and f"pid {os.getpid()}" in str(refused)
    assert len(read_results(tmp_path / RESULTS_FILE)[0]) == 6


def test_the_lock_is_released_when_its_holder_ends(tmp_path: Path) -> None:
    with hold_run_directory(tmp_path), pytest.raises(RunLocked, match=f"pid {os.getpid()}"):
        _run(tmp_path, limit=2)
    assert _run(tmp_path, limit=2).done == 2
    assert (tmp_path / LOCK_FILE).read_text() == "", "a released lock names no holder"


def test_a_zero_byte_manifest_is_repaired_and_the_results_kept(tmp_path: Path) -> None:
    _run(tmp_path, limit=3)
    (tmp_path / MANIFEST_FILE).write_bytes(b"")
    summary = _run(tmp_path, limit=4)
    assert (summary.resumed, summary.done) == (3, 4)
    assert any("could not be read (it is empty)" in note for note in summary.repairs)
    assert json.loads((tmp_path / MANIFEST_FILE).read_text())["system"] == "oracle"


def test_a_truncated_manifest_of_other_results_is_refused(tmp_path: Path) -> None:
    _run(tmp_path, limit=2)
    manifest = tmp_path / MANIFEST_FILE
    manifest.write_bytes(manifest.read_bytes()[:25])
    with pytest.raises(EvalError, match="results of other settings"):
        _run(tmp_path, OracleSystem("another", delay_s=0.0, usd_per_attempt=0.0), limit=2)
    assert _run(tmp_path, limit=2).resumed == 2


REJECTED_FILE = "results.rejected.jsonl"


def test_torn_and_corrupt_result_lines_are_set_aside_not_lost(tmp_path: Path) -> None:
    _run(tmp_path, limit=4)
    results = tmp_path / RESULTS_FILE
    lines = results.read_bytes().splitlines(keepends=True)
    results.write_bytes(lines[0] + b'{"not": "a record"}\n' + b"".join(lines[1:-1]) + lines[-1][:40])
    summary = _run(tmp_path, limit=4)
    assert (summary.resumed, summary.done, summary.dropped_lines) == (3, 4, 2)
    assert any(REJECTED_FILE in note for note in summary.repairs)
    rejected = (tmp_path / REJECTED_FILE).read_bytes().splitlines()
    assert rejected == [b'{"not": "a record"}', lines[-1][:40]]
    assert read_results(results) == (read_results(results)[0], 0) and len(read_results(results)[0]) == 4


def test_an_empty_results_file_is_a_fresh_start(tmp_path: Path) -> None:
    _run(tmp_path, limit=2)
    (tmp_path / RESULTS_FILE).write_bytes(b"")
    summary = _run(tmp_path, limit=2)
    assert (summary.resumed, summary.done, summary.repairs) == (0, 2, [])

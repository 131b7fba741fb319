"""Empty is not success, and validation writes nothing: an evaluation whose every sample failed, or a data stage
that kept nothing, exits non-zero saying why; a run directory appears only once the inputs are good, and one left
by a run that failed before its first unit can be used again."""

import json

import pytest
import yaml
from typer.testing import CliRunner

from podium.cli import app
from podium.core.calls import CallUsage
from podium.core.trajectory import Trajectory
from podium.data.funnel import why_empty
from podium.data.store import STAGE_FILE, DataError, check_stage
from podium.datasets.loaders import shared_data_dir
from podium.evaluate.runner import EvalError, RunManifest, check_manifest
from podium.graders.verdict import Verdict
from podium.solve.records import FunnelStep, GradedTrajectory

runner = CliRunner()
needs_data = pytest.mark.skipif(not shared_data_dir().is_dir(), reason="shared benchmark data not present")
DOWN = {"name": "o", "backend": "http", "model": "m", "base_url": "http://127.0.0.1:9/v1", "max_retries": 0,
        "price": {"input_per_mtok": 0, "output_per_mtok": 0}}  # fmt: skip


@needs_data
def test_eval_exits_1_naming_the_most_common_reason_when_every_sample_failed(tmp_path):
    system = tmp_path / "down.yaml"
    system.write_text(yaml.safe_dump({"kind": "orchestrator", "name": "down", "pool": {"workers": [DOWN]}}))
    command = ["eval", "--benchmark", "gsm8k", "--system", str(system), "--limit", "2", "--out", str(tmp_path / "r")]
    result = runner.invoke(app, [*command, "--quiet"])
    assert result.exit_code == 1, result.output
    assert "0/2 correct" in result.stdout and "2 errors" in result.stdout
    reason = result.stderr.replace("\n", " ")
    assert "every sample failed; the most common reason:" in reason and "127.0.0.1:9" in reason
    assert "(2 of 2 samples)" in reason and "item gsm8k-" not in reason


def test_why_empty_names_the_filter_that_removed_everything():
    steps = [
        FunnelStep(name="attempted", unit="questions", entered=4, kept=4),
        FunnelStep(name="verifier", unit="trajectories", entered=4, kept=0, left={"wrong answer": 3, "no answer": 1}),
        FunnelStep(name="per question", unit="trajectories", entered=0, kept=0),
    ]
    assert why_empty(steps, ["sft.jsonl"]) == (
        "nothing reached sft.jsonl: 'verifier' removed all 4 trajectories (wrong answer: 3; no answer: 1)"
    )
    assert why_empty([FunnelStep(name="attempted", unit="items", entered=0, kept=0)], ["a", "b"]) == (
        "nothing reached a and b: no items reached 'attempted'"
    )


def test_a_preferences_stage_that_keeps_no_pair_fails_naming_the_filter(tmp_path):
    # Issue 25: with a model that writes no JSON, `podium data preferences --pairs 2` made 0 pairs and exited 0.
    pool = tmp_path / "pool.yaml"
    prose = ["Sure! Here are some preferences you might like."]
    pool.write_text(yaml.safe_dump({"workers": [{"name": "w", "backend": "scripted", "model": "w", "replies": prose}]}))
    out = tmp_path / "out"
    result = runner.invoke(app, ["data", "preferences", "--pool", str(pool), "--pairs", "2", "--out", str(out)])
    assert result.exit_code == 1, result.output
    assert "nothing reached train.jsonl and eval.jsonl: 'proposal requests' removed all 1 requests (gave no pairs" in (
        result.stderr.replace("\n", " ")
    )
    assert json.loads((out / "funnel.json").read_text())["empty"].startswith("nothing reached train.jsonl")


def test_a_failed_data_command_leaves_no_directory_and_the_corrected_one_runs(tmp_path):
    out = tmp_path / "d"
    failed = runner.invoke(app, ["data", "collect", "--tasks", str(tmp_path / "none.jsonl"), "--out", str(out)])
    assert failed.exit_code == 2 and not out.exists()


def test_a_stage_directory_holding_only_its_manifest_is_taken_over(tmp_path):
    check_stage(tmp_path, "collect", {"tasks": "/nonexistent.jsonl"})
    check_stage(tmp_path, "collect", {"tasks": "tasks.jsonl"})  # nothing was done under the first settings
    assert json.loads((tmp_path / STAGE_FILE).read_text())["settings"] == {"tasks": "tasks.jsonl"}
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "attempts.jsonl").write_text('{"item_id": "1"}\n')
    with pytest.raises(DataError, match="holds a run with other settings"):
        check_stage(tmp_path, "collect", {"tasks": "other.jsonl"})


def test_a_run_directory_without_results_is_taken_over(tmp_path):
    first = RunManifest(benchmark="gsm8k", system="a", samples=1)
    second = RunManifest(benchmark="gsm8k", system="b", samples=1)
    check_manifest(tmp_path, first, [])
    assert check_manifest(tmp_path, second, []) is None
    assert RunManifest.model_validate_json((tmp_path / "manifest.json").read_text()).system == "b"
    record = _record("b")
    with pytest.raises(EvalError, match="system: was 'b', now 'a'"):
        check_manifest(tmp_path, first, [record])


def _record(system: str) -> GradedTrajectory:
    return GradedTrajectory(
        benchmark="gsm8k", system=system, item_id="gsm8k-0", sample=0, answer=None, gold="1", wall_s=0.0,
        verdict=Verdict.binary(False), usage=CallUsage(), trajectory=Trajectory(question="?"),
    )  # fmt: skip

"""Ablations as configs: every experiment file resolves at both scales, bad files say what is wrong, a tiny
experiment runs end to end into a summary and a side-by-side report, and the ablation switches do what they say.
(The small-scale experiments themselves run by command: `podium experiment run experiments/X.yaml`.)"""

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from podium.cli import app
from podium.core import CallUsage, Status, ToolCall, ToolResult, Trajectory, Turn
from podium.errors import ConfigError
from podium.experiments import load_experiment, run_experiment
from podium.experiments.config import merged
from podium.experiments.runner import splits
from podium.experiments.training import TRAINED_WORKER, teach, trained_system
from podium.train.config import RewardConfig

EXPERIMENTS = sorted((Path(__file__).resolve().parents[1] / "experiments").glob("*.yaml"))
runner = CliRunner()


def test_the_papers_ablations_are_all_there_and_valid_at_both_scales():
    names = {load_experiment(path, "small").name for path in EXPERIMENTS}
    assert names == {
        "sft-before-rl", "diversity-reward", "serial-vs-parallel",
        "single-vs-mixed-pool", "lazy-vs-forced", "ctar-sweep",
    }  # fmt: skip
    result = runner.invoke(app, ["experiment", "check", *map(str, EXPERIMENTS)])
    assert result.exit_code == 0, result.output
    assert result.stdout.count("[small]") == result.stdout.count("[full]") == len(EXPERIMENTS)
    sweep = load_experiment(EXPERIMENTS[0].parent / "ctar_sweep.yaml", "full")
    targets = [arm.training.grpo["reward"]["paramanager_target_cost_units"] for arm in sweep.arms]
    assert targets == [4, 8, 12, 16] and all(arm.training.grpo["group_size"] == 8 for arm in sweep.arms)
    forced = load_experiment(EXPERIMENTS[0].parent / "lazy_vs_forced.yaml", "small")
    assert [arm.system["policy"]["lazy"] for arm in forced.arms] == [True, False]
    assert forced.arms[0].system["pool"].endswith("experiments/pools/small.yaml")


def write(tmp_path, experiment, name="exp.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(experiment))
    return path


def scripted_pool(tmp_path, reply):
    workers = [{"name": "orch", "backend": "scripted", "model": "orch-m", "replies": [reply]}]
    path = tmp_path / "pool.yaml"
    path.write_text(yaml.safe_dump({"workers": workers, "tools": []}))
    return "pool.yaml"


def experiment(pool, **fields):
    return {
        "name": "tiny",
        "about": "two prompted policies on two items",
        "benchmark": "gsm8k",
        "system": {"kind": "orchestrator", "pool": pool, "max_turns": 2},
        "arms": [
            {"name": "serial", "system": {"policy": "serial"}},
            {"name": "dag", "system": {"policy": "dag"}},
        ],
        "scales": {"small": {"limit": 2}, "full": {"limit": 100, "patch": {"system": {"max_turns": 8}}}},
        **fields,
    }


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"scales": {"small": {"limit": 2}}}, "give both small and full"),
        ({"arms": [{"name": "a"}, {"name": "a"}]}, "names must be unique"),
        ({"arms": [{"name": "a", "training": {"sft": {}}}, {"name": "b"}]}, "sft needs a teacher"),
        ({"arms": [{"name": "a", "system": {"policy": "zigzag"}}, {"name": "b"}]}, "policy"),
        ({"system": {"kind": "orchestrator", "pool": "missing.yaml"}}, "missing.yaml"),
        ({"scales": {"small": {"patch": {"arms": {"nobody": {}}}}, "full": {}}}, "unknown arms"),
    ],
)
def test_a_bad_experiment_file_says_what_is_wrong(tmp_path, change, problem):
    path = write(tmp_path, {**experiment(scripted_pool(tmp_path, "<answer>1</answer>")), **change})
    with pytest.raises(ConfigError, match=problem):
        load_experiment(path, "small")


def test_scales_patch_the_experiment_and_paths_are_relative_to_the_file(tmp_path):
    path = write(tmp_path, experiment(scripted_pool(tmp_path, "<answer>1</answer>")))
    small, full = load_experiment(path, "small"), load_experiment(path, "full")
    assert small.arms[0].system["max_turns"] == 2 and full.arms[1].system["max_turns"] == 8
    assert small.arms[1].system == {**small.arms[1].system, "policy": "dag", "name": "dag"}
    assert small.arms[0].system["pool"] == str(tmp_path / "pool.yaml")
    assert merged({"a": {"b": 1, "c": 2}, "d": [1]}, {"a": {"b": 3}, "d": [2]}) == {"a": {"b": 3, "c": 2}, "d": [2]}


def test_a_tiny_experiment_runs_end_to_end_into_a_summary_and_a_report(tmp_path):
    path = write(tmp_path, experiment(scripted_pool(tmp_path, "<final_answer>18</final_answer><answer>18</answer>")))
    lines = []
    results = run_experiment(load_experiment(path, "small"), tmp_path / "out", say=lines.append, progress=False)
    assert [r.arm for r in results] == ["serial", "dag"]
    assert all(r.metrics["items"] == 2 and r.metrics["errors"] == 0 for r in results)
    assert results[0].metrics["mean_at_k"] == 0.5, "gsm8k's first item's answer is 18, the second's is not"
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert [row["arm"] for row in summary] == ["serial", "dag"]
    report = (tmp_path / "out" / "report" / "index.html").read_text()
    assert "serial" in report and "dag" in report and report.count("<tr>") >= 3
    assert any(line.startswith("report:") for line in lines)
    again = run_experiment(load_experiment(path, "small"), tmp_path / "out", arms=["dag"], say=lines.append)
    assert [r.arm for r in again] == ["dag"] and again[0].metrics["queries"] == 2, "resumed, nothing run twice"
    with pytest.raises(ConfigError, match="no arm"):
        run_experiment(load_experiment(path, "small"), tmp_path / "out", arms=["nope"], say=lines.append)


def test_training_items_follow_the_evaluation_items(tmp_path):
    trains = experiment(
        scripted_pool(tmp_path, "<answer>1</answer>"), training={"grpo": {"group_size": 2, "batch_size": 2}}
    )
    trains["arms"][0]["training"] = {}
    trains["scales"]["small"] = {"limit": 2, "train_items": 3}
    evaluation, train, items = splits(load_experiment(write(tmp_path, trains), "small"), None)
    evaluated = [item.id for item in evaluation.items()]
    assert len(evaluated) == 2 and [item.id for item in train.items()] == [item.id for item in items]
    assert len(items) == 3 and not set(evaluated) & {item.id for item in items} and train.name == "gsm8k-train"
    trains["scales"]["small"] = {}
    with pytest.raises(ConfigError, match="limit"):
        splits(load_experiment(write(tmp_path, trains), "small"), None)


def test_the_teacher_keeps_the_trajectories_asked_for(tmp_path):
    trains = experiment(scripted_pool(tmp_path, "<answer>3</answer>"))  # gsm8k-1's answer; gsm8k-2's is 70000
    trains["arms"][0]["training"] = {"teacher": {"keep": "correct"}, "sft": {"max_steps": 1}}
    trains["scales"]["small"] = {"limit": 1, "train_items": 2}
    loaded = load_experiment(write(tmp_path, trains), "small")
    _, train, _ = splits(loaded, None)
    arm = loaded.arms[0]
    data = teach(loaded, arm.training, {**arm.system, "name": "teacher"}, train, tmp_path / "t", lambda line: None)
    kept = [json.loads(line) for line in data.read_text().splitlines()]
    assert [row["answer"] for row in kept] == ["3"]
    assert len((tmp_path / "t" / "teacher" / "results.jsonl").read_text().splitlines()) == 2
    answered = arm.training.model_copy(update={"teacher": arm.training.teacher.model_copy(update={"keep": "all"})})
    data = teach(loaded, answered, {**arm.system, "name": "teacher"}, train, tmp_path / "t", lambda line: None)
    assert len(data.read_text().splitlines()) == 2, "resumed teacher run, every trajectory kept"


def teacher_arm(tmp_path):
    """An experiment whose first arm runs a teacher that keeps every trajectory: (experiment, arm, train items)."""
    trains = experiment(scripted_pool(tmp_path, "<answer>3</answer>"))
    trains["arms"][0]["training"] = {"teacher": {"keep": "all"}, "sft": {"max_steps": 1}}
    trains["scales"]["small"] = {"limit": 1, "train_items": 2}
    loaded = load_experiment(write(tmp_path, trains), "small")
    _, train, _ = splits(loaded, None)
    arm = loaded.arms[0]
    return loaded, arm, train


def test_a_teacher_that_fails_on_every_item_says_why(tmp_path):
    loaded, arm, train = teacher_arm(tmp_path)
    # Nothing listens on the orchestrator's port, so every teacher episode fails at its first turn.
    down = {"name": "orch", "backend": "http", "model": "m", "base_url": "http://127.0.0.1:9/v1", "max_retries": 0}
    pool = {"workers": [{**down, "price": {"input_per_mtok": 0, "output_per_mtok": 0}}], "tools": []}
    teacher = {**arm.system, "name": "teacher", "pool": pool}
    with pytest.raises(ConfigError, match=r"the teacher failed on every training item .*127\.0\.0\.1:9"):
        teach(loaded, arm.training, teacher, train, tmp_path / "t", lambda line: None)


def test_a_teacher_that_cannot_produce_an_action_stops_before_it_runs(tmp_path):
    loaded, arm, train = teacher_arm(tmp_path)
    # The scripted orchestrator takes no grammar: with constrained 'always' it cannot produce an action.
    teacher = {**arm.system, "name": "teacher", "constrained": "always"}
    with pytest.raises(ConfigError, match=r"cannot run:\n  constrained: 'always'"):
        teach(loaded, arm.training, teacher, train, tmp_path / "t", lambda line: None)
    assert not (tmp_path / "t").exists()


def test_a_trained_checkpoint_takes_the_orchestrators_seat_and_is_not_a_tool(tmp_path):
    system = {"kind": "orchestrator", "pool": None, "deny": ["python"], "name": "arm"}
    evaluated = trained_system(system, "/checkpoints/arm", "arm")
    first = evaluated["pool"]["workers"][0]
    assert (first["name"], first["backend"], first["path"]) == (TRAINED_WORKER, "local", "/checkpoints/arm")
    assert evaluated["orchestrator"] == TRAINED_WORKER and evaluated["deny"] == ["python", TRAINED_WORKER]
    assert evaluated["pool"]["role_worker"] == "smollm2", "roles keep the pool's worker"


def diverse() -> Trajectory:
    calls = [ToolResult(call=ToolCall(name=n), status=Status.OK, usage=CallUsage()) for n in ("a", "b", "c")]
    output = "<reasoning>fan out</reasoning>" + "<tool_call>{}</tool_call>" * 3
    return Trajectory(question="q", turns=[Turn(index=0, output=output, results=calls)])


def test_the_diversity_switch_removes_exactly_the_diversity_reward():
    with_div = RewardConfig(design="paramanager").reward_function([])([diverse()], [True])[0]
    without = RewardConfig(design="paramanager", paramanager_diversity=False).reward_function([])([diverse()], [True])[
        0
    ]
    assert with_div - without == pytest.approx(1.0), "1.5+ calls per round and 3 tools: R_div = 1"


def test_a_finished_training_stage_is_reused_only_with_the_same_config(tmp_path):
    from podium.experiments.training import _stage
    from podium.train.sft import TrainResult

    def train():
        return TrainResult(tmp_path / "sft", 3, [{"loss": 0.5, "epoch": 1.0}, {"train_runtime": 9.0}])

    def never():
        raise AssertionError("a finished stage must not train again")

    said = []
    first = _stage("sft", tmp_path, said.append, {"learning_rate": 1e-5}, train)
    assert (first.steps, first.last) == (3, {"loss": 0.5, "epoch": 1.0})
    again = _stage("sft", tmp_path, said.append, {"learning_rate": 1e-5}, never)
    assert again == first and "done earlier" in said[-1]
    with pytest.raises(ConfigError, match="another sft config"):
        _stage("sft", tmp_path, said.append, {"learning_rate": 2e-5}, never)

"""Runtime systems for `podium eval`: a model with basic tools, the prompted orchestrator, trained checkpoints."""

import asyncio
import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from podium.backends.embedded import embedded_model_dir
from podium.backends.local import LocalBackend
from podium.backends.scripted import ScriptedBackend
from podium.cli import app
from podium.core.answers import ANSWER_INSTRUCTIONS
from podium.core.budget import StopReason
from podium.datasets.items import BenchmarkItem
from podium.datasets.loaders import Benchmark, get_benchmark
from podium.envs import data_dir, load_domain
from podium.errors import ConfigError
from podium.evaluate.runner import EvalError, attempt, load_run, run_eval
from podium.evaluate.system_config import build_system, load_system_config, system_config_from_dict
from podium.evaluate.systems import SingleModelSystem
from podium.graders.grader import Grader
from podium.pool.pool import blind_labels
from podium.solve.system import System, sample_seed
from tests.test_envs_runtime import USER_LINES, gold_script

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "systems"
FREE = {"input_per_mtok": 0, "output_per_mtok": 0}
PYTHON_CALL = '<tool_call>{"name": "python", "arguments": {"code": "print(6 * 7)"}}</tool_call>'
ANSWER = "<answer>\\boxed{42}</answer>"


def scripted_pool(replies: list[str], **extra: object) -> dict:
    """An inline pool: a scripted orchestrator, a scripted helper, python and one role."""
    return {
        "workers": [
            {"name": "orch", "backend": "scripted", "model": "orch-model", "replies": replies, "price": FREE},
            {
                "name": "helper",
                "backend": "scripted",
                "model": "helper-model",
                "replies": ["\\boxed{1}"],
                "price": FREE,
            },
        ],
        "tools": ["python", "symbolic_math"],
        "roles": ["standard_reasoner"],
        **extra,
    }


def build(data: dict) -> System:
    system = build_system(system_config_from_dict(data))
    assert isinstance(system, System)
    return system


def test_example_system_files_build_without_loading_a_model():
    built = {path.name: build_system(load_system_config(path)) for path in sorted(EXAMPLES.glob("*.yaml"))}
    assert set(built) >= {"embedded-orchestrator.yaml", "embedded-tools-model.yaml", "http-orchestrator.yaml"}
    orchestrator = built["embedded-orchestrator.yaml"]
    assert isinstance(orchestrator, System) and orchestrator.config.policy.name == "serial"
    assert "ensemble_solver" in orchestrator.pool.registry.names()
    assert isinstance(built["embedded-single-model.yaml"], SingleModelSystem)
    served = built["http-orchestrator.yaml"]
    assert served.config.policy.name == "parallel" and served.executor().orchestrator.model == "Qwen/Qwen3-8B"
    assert not served.supports("environment") and served.supports("math")


def test_a_trained_checkpoint_is_an_orchestrator_worker_with_a_path(tmp_path):
    checkpoint = tmp_path / "checkpoint-final"
    pool = scripted_pool(["x"])
    pool["workers"].insert(0, {"name": "trained", "backend": "local", "model": "mine", "path": str(checkpoint)})
    pool["workers"][0]["price"] = FREE
    settings = {"kind": "orchestrator", "orchestrator": "trained", "deny": ["trained"], "pool": pool}
    # A checkpoint that is not there stops the system at load, naming the field and the command that writes it.
    with pytest.raises(ConfigError, match=r"pool\.workers\.0\.path: no checkpoint directory at .*podium train sft"):
        build(settings)
    checkpoint.mkdir()
    system = build(settings)
    backend = system.executor().orchestrator
    assert isinstance(backend, LocalBackend) and backend.config.path == str(checkpoint)
    assert system.name == "orchestrator:serial:mine"
    registry, workers = system.executor()._visible(system.pool, [])
    assert "trained" not in registry.names() and "trained" not in workers and "orch" in registry.names()
    example = build_system(load_system_config(EXAMPLES / "trained-orchestrator.yaml"))
    assert example.executor().orchestrator.config.adapter == "examples/demo/adapter"
    with pytest.raises(ConfigError, match="not a worker"):
        build({"kind": "orchestrator", "orchestrator": "missing", "pool": scripted_pool(["x"])})


def test_a_pool_file_and_run_settings_configure_the_orchestrator(tmp_path):
    path = tmp_path / "pool.yaml"
    path.write_text(yaml.safe_dump(scripted_pool([ANSWER])))
    system = build({"kind": "orchestrator", "policy": "dag", "max_turns": 5, "deny": ["helper"], "pool": str(path)})
    assert system.name == "orchestrator:dag:orch-model" and system.executor().budget.max_turns == 5
    assert "standard_reasoner" in system.pool.registry.names() and system.config.deny == ["helper"]
    tools_only = build({"kind": "tools_model", "deny": ["standard_reasoner"], "pool": str(path)})
    item = BenchmarkItem(id="q", question="?", gold="1", verifier="math")
    with pytest.raises(ConfigError, match="unknown names"):  # checked per episode, once its tools are known
        asyncio.run(tools_only.solve(item))


def test_tools_model_sees_only_the_basic_tools():
    system = build(
        {"kind": "tools_model", "orchestrator": "orch", "tools": ["python"], "pool": scripted_pool([ANSWER])}
    )
    assert system.pool.registry.names() == ["python"]
    assert [worker.name for worker in system.pool.config.workers] == ["orch"]
    item = BenchmarkItem(id="q", question="What is 6 * 7?", gold="42", verifier="math")
    trajectory = asyncio.run(system.solve(item))
    prompt = system.pool.backends["orch"].requests[0][0].content
    assert '"name": "python"' in prompt and "standard_reasoner" not in prompt and "| orch | model |" not in prompt
    assert trajectory.answer == "42" and trajectory.metadata["raw_answer"] == "\\boxed{42}"
    assert system.name == "tools_model:orch-model"
    with_user = build({"kind": "tools_model", "pool": scripted_pool([ANSWER]), "user": {"worker": "helper"}})
    assert [worker.name for worker in with_user.pool.config.workers] == ["orch", "helper"]
    assert with_user.pool.registry.names() == ["python", "symbolic_math"]
    with pytest.raises(ConfigError, match=r"user\.worker"):
        build({"kind": "orchestrator", "pool": scripted_pool([ANSWER]), "user": {"worker": "nobody"}})


def test_a_failing_orchestrator_is_a_system_error():
    system = build({"kind": "orchestrator", "pool": scripted_pool(["x"])})
    system.pool.backends["orch"] = ScriptedBackend([])  # no reply: the backend fails
    item = BenchmarkItem(id="q", question="?", gold="1", verifier="math")
    assert asyncio.run(system.solve(item)).stop_reason is StopReason.ERROR
    record = asyncio.run(attempt(system, item, 0, Grader(), "bench"))
    assert record.error is not None and record.error.startswith("SystemRunError: item q: ")
    assert "orchestrator backend failed" in record.error and not record.verdict.correct


def _gsm8k(directory: Path, golds: list[int]) -> None:
    (directory / "math").mkdir(parents=True)
    rows = [
        {"question": f"Question {i}: what is 6 * 7?", "answer": f"6 * 7\n#### {gold}"} for i, gold in enumerate(golds)
    ]
    (directory / "math" / "gsm8k_test.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))


def test_podium_eval_runs_the_orchestrator_resumes_and_reports(tmp_path):
    _gsm8k(tmp_path / "data", [42, 42, 41, 42])
    config = {
        "kind": "orchestrator",
        "name": "scripted-orchestrator",
        "orchestrator": "orch",
        "max_turns": 4,
        "pool": scripted_pool([PYTHON_CALL, ANSWER] * 3),
    }
    system_file = tmp_path / "system.yaml"
    system_file.write_text(yaml.safe_dump(config))
    out = tmp_path / "run"
    command = ["eval", "--benchmark", "gsm8k", "--system", str(system_file), "--out", str(out)]
    command += ["--data-dir", str(tmp_path / "data"), "--concurrency", "1", "--quiet"]
    first = CliRunner().invoke(app, [*command, "--limit", "3"])
    assert first.exit_code == 0, first.output
    assert "2/3 correct" in first.output and "3/3 done (0 from earlier)" in first.output
    manifest, records = load_run(out)
    assert manifest.system == "scripted-orchestrator" and manifest.system_config["pool"]["workers"][0]["name"] == "orch"
    # at their defaults, fields added after runs were recorded are left out, so those runs resume
    assert {"escalate_above", "prices_at_decision"}.isdisjoint(manifest.system_config)
    assert [record.verdict.correct for record in records] == [True, True, False]
    for record in records:
        trajectory = record.trajectory
        assert record.answer == "42" and trajectory.metadata["raw_answer"] == "\\boxed{42}"
        assert [result.call.name for result in trajectory.results] == ["python"]
        assert trajectory.results[0].observation.strip() == "42" and trajectory.stop_reason is StopReason.ANSWER
        assert trajectory.question.endswith(ANSWER_INSTRUCTIONS["math"])
        assert trajectory.metadata["item_id"] == record.item_id and len(trajectory.turns) == 2
    lines = (out / "results.jsonl").read_text()
    again = CliRunner().invoke(app, [*command, "--limit", "3"])
    assert again.exit_code == 0 and "3/3 done (3 from earlier)" in again.output
    assert (out / "results.jsonl").read_text() == lines  # nothing re-run, nothing written twice
    more = CliRunner().invoke(app, [*command, "--limit", "4"])
    assert "3/4 correct" in more.output and "4/4 done (3 from earlier)" in more.output
    report = CliRunner().invoke(app, ["report", str(out), "--out", str(tmp_path / "report")])
    assert report.exit_code == 0, report.output
    assert (tmp_path / "report" / "index.html").exists()


def test_an_eval_draws_a_blind_pools_labels_afresh_for_each_item_and_sample_and_a_resume_draws_the_same(tmp_path):
    items = [BenchmarkItem(id=f"q{i}", question="6 * 7?", gold="42", verifier="math") for i in range(4)]
    four = Benchmark("four", "math", "four questions", lambda _: iter(items))
    pool = scripted_pool([ANSWER], blind={"enabled": True, "seed": 5})
    system = build({"kind": "orchestrator", "orchestrator": "orch", "pool": pool})
    summary = asyncio.run(run_eval(four, system, out=tmp_path / "run", samples=2, limit=3, progress=False))
    assert (summary.done, summary.correct) == (6, 6)
    _, records = load_run(tmp_path / "run")
    seeds = {(r.item_id, r.sample): r.trajectory.metadata["seed"] for r in records}
    assert seeds == {(i, s): sample_seed(5, i, s) for i in ("q0", "q1", "q2") for s in (0, 1)}
    pool_config = system.pool.config
    for record in records:
        assert record.trajectory.metadata["labels"] == blind_labels(pool_config, seeds[record.item_id, record.sample])
    assert len({tuple(r.trajectory.metadata["labels"].items()) for r in records}) > 1  # one per attempt, not per run
    resumed = asyncio.run(run_eval(four, system, out=tmp_path / "run", samples=2, limit=4, progress=False))
    assert (resumed.done, resumed.correct) == (8, 8)
    _, again = load_run(tmp_path / "run")
    assert [r.trajectory.metadata["labels"] for r in again[:6]] == [r.trajectory.metadata["labels"] for r in records]
    assert {r.trajectory.metadata["seed"] for r in again[6:]} == {sample_seed(5, "q3", 0), sample_seed(5, "q3", 1)}
    plain = build({"kind": "orchestrator", "orchestrator": "orch", "pool": scripted_pool([ANSWER])})
    asyncio.run(run_eval(four, plain, out=tmp_path / "plain", limit=2, progress=False))
    assert all("seed" not in r.trajectory.metadata for r in load_run(tmp_path / "plain")[1])


needs_tau2 = pytest.mark.skipif(not (data_dir() / "airline").is_dir(), reason="tau2 data not present")


@needs_tau2
def test_tool_use_items_converse_and_the_environment_verifier_scores_them(tmp_path):
    tau2 = get_benchmark("tau2_airline")
    one = Benchmark(
        "tau2_airline_7", "environment", "task 7", lambda d: (i for i in tau2.read_local(d) if i.gold == "7")
    )
    task = tau2.items()[7]
    assert task.gold == "7" and task.metadata["tau2_dir"].endswith("tau2")
    script = gold_script(load_domain("airline").task("7"))
    pool = scripted_pool(script)
    pool["workers"].append({"name": "customer", "backend": "scripted", "model": "c", "replies": USER_LINES})
    pool["workers"][-1]["price"] = FREE
    system = build({"kind": "orchestrator", "orchestrator": "orch", "pool": pool, "user": {"worker": "customer"}})
    summary = asyncio.run(run_eval(one, system, out=tmp_path / "run", progress=False))
    assert (summary.done, summary.correct, summary.errors) == (1, 1, 0)
    _, [record] = load_run(tmp_path / "run")
    assert record.trajectory.stop_reason is StopReason.ENV_DONE and record.trajectory.metadata["task_id"] == "7"
    assert record.trajectory.metadata["user_turns"] == 3 and record.verdict.correct
    guide = record.trajectory.messages[0].content
    assert ANSWER_INSTRUCTIONS["environment"] in guide and "# Policy" in guide
    dag = build({"kind": "orchestrator", "policy": "dag", "pool": scripted_pool(["x"])})
    with pytest.raises(EvalError, match="cannot attempt"):
        asyncio.run(run_eval(one, dag, out=tmp_path / "dag", progress=False))


@needs_tau2
def test_a_tool_use_episode_draws_its_blind_labels_from_its_seed():
    task = get_benchmark("tau2_airline").items()[7]
    pool = scripted_pool(gold_script(load_domain("airline").task("7")), blind={"enabled": True, "seed": 2})
    pool["workers"].append({"name": "customer", "backend": "scripted", "model": "c", "replies": USER_LINES})
    pool["workers"][-1]["price"] = FREE
    system = build({"kind": "orchestrator", "orchestrator": "orch", "pool": pool, "user": {"worker": "customer"}})
    trajectory = asyncio.run(system.solve(task, seed=11))
    assert trajectory.metadata["seed"] == 11 and trajectory.stop_reason is StopReason.ENV_DONE
    assert trajectory.metadata["labels"] == blind_labels(system.pool.config, 11) != dict(system.pool.labels)


@pytest.mark.slow
def test_a_checkpoint_path_loads_and_orchestrates():
    worker = {"name": "trained", "backend": "local", "model": "trained-smollm2", "path": str(embedded_model_dir())}
    pool = {"workers": [{**worker, "price": FREE}], "tools": ["python"]}
    # The budget holds the serial grammar's fixed parts (97 tokens) with a little free text.
    config = {"kind": "orchestrator", "orchestrator": "trained", "deny": ["trained"], "max_turns": 1, "max_tokens": 128}
    system = build({**config, "pool": pool})
    item = BenchmarkItem(id="q", question="What is 6 * 7?", gold="42", verifier="math")
    trajectory = asyncio.run(system.solve(item))
    assert trajectory.metadata["orchestrator"] == "trained-smollm2" and trajectory.metadata["constrained"]
    assert len(trajectory.turns) == 1 and 0 < trajectory.turns[0].usage.output_tokens <= 128

"""Fail early: a config that cannot produce an action is an error at load, named by field (and by file and line in
`podium check`), before anything runs or is written; every command that loads one runs the same check."""

import json

import pytest
import yaml
from typer.testing import CliRunner

from podium.backends.grammar import Limits
from podium.cli import app
from podium.errors import ConfigError
from podium.policies import DagPolicy
from podium.pool.config import PoolConfig, WorkerConfig
from podium.pool.pool import build_pool, embedded_pool_config
from podium.runtime import Executor, RunConfig
from podium.runtime.checks import NotRunnable, pool_problems, require_runnable, run_problems
from podium.serve.model_server import serving_in_thread
from support.runtime_fixtures import orchestrator

runner = CliRunner()
FREE = {"input_per_mtok": 0, "output_per_mtok": 0}
EMBEDDED = {"kind": "orchestrator", "name": "tiny", "policy": "serial", "max_turns": 2, "max_tokens": 96}
"""The shipped embedded orchestrator as it was when issue 25 was filed: 96 tokens, 227 needed."""


def write(tmp_path, name: str, data: object) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(data) if name.endswith(".json") else yaml.safe_dump(data, sort_keys=False))
    return str(path)


def test_a_budget_below_the_grammars_fixed_parts_is_named_with_the_tokens_it_needs():
    pool = build_pool(embedded_pool_config())
    with pytest.raises(NotRunnable) as raised:
        require_runnable(pool, RunConfig(policy="serial", max_tokens=96), "the system")
    (problem,) = raised.value.problems
    assert problem.field == "max_tokens" and "its fixed parts alone may take 227 tokens" in problem.message
    assert "the system cannot run:\n  max_tokens: 96 cannot hold one action of the serial policy" in str(raised.value)
    assert run_problems(pool, RunConfig(policy="serial", max_tokens=227)) == []


def test_the_dag_budget_must_hold_a_turn_after_a_plan_too():
    pool = build_pool(embedded_pool_config())
    executor = Executor(pool, RunConfig(policy="dag"))
    view, _ = executor.view()
    first, after_plan = (
        DagPolicy().build_grammar(view, Limits().scaled(0), history).max_tokens
        for history in DagPolicy().turn_histories(view)
    )
    assert after_plan > first  # <verify>…<replan/> before the next plan
    (problem,) = run_problems(pool, RunConfig(policy="dag", max_tokens=first))
    assert f"may take {after_plan} tokens" in problem.message
    assert run_problems(pool, RunConfig(policy="dag", max_tokens=after_plan)) == []


def test_an_orchestrator_that_cannot_constrain_is_only_an_error_when_constraint_is_required():
    pool = build_pool(embedded_pool_config())
    scripted = orchestrator("<answer>1</answer>")
    assert run_problems(pool, RunConfig(max_tokens=8), scripted) == []  # unconstrained: nothing to fit
    (problem,) = run_problems(pool, RunConfig(max_tokens=8, constrained="always"), scripted)
    assert problem.field == "constrained" and "cannot constrain its output" in problem.message


def test_a_missing_checkpoint_or_adapter_is_named_with_the_command_that_writes_it(tmp_path):
    workers = [
        WorkerConfig(name="a", backend="local", model="m", path="runs/train/checkpoint-final"),
        WorkerConfig(name="b", backend="local", model="m", path="HuggingFaceTB/SmolLM2-135M-Instruct"),  # a hub id
        WorkerConfig(name="c", backend="local", model="m", adapter=str(tmp_path / "adapter")),
        WorkerConfig(name="d", backend="local", model="m", path=str(tmp_path)),
    ]
    problems = pool_problems(PoolConfig(workers=workers, tools=[]))
    assert [(p.field, p.scope) for p in problems] == [("workers.0.path", "pool"), ("workers.2.adapter", "pool")]
    assert all("podium train sft" in p.message and p.written_by for p in problems)


def test_only_the_workers_a_run_reaches_must_have_their_files(tmp_path):
    """A pool may list the adapter a run is about to train (the claim's pool lists the GRPO orchestrator that
    `podium train grpo` writes): a run that cannot reach a worker does not need its files."""
    workers = [
        WorkerConfig(name="cheap", backend="local", model="m"),  # the embedded model: nothing to miss
        WorkerConfig(name="sft", backend="local", model="m", adapter=str(tmp_path / "sft")),
        WorkerConfig(name="grpo", backend="local", model="m", adapter=str(tmp_path / "grpo")),
    ]
    pool = build_pool(PoolConfig(workers=workers, tools=[]))
    loose = {"policy": "serial", "constrained": "never"}

    def missing(config: RunConfig, model=None) -> list[str | None]:
        return [problem.field for problem in run_problems(pool, config, model)]

    rollouts = RunConfig(**loose, allow=["cheap"])
    assert missing(rollouts, orchestrator("<answer>1</answer>")) == []  # training brings its own model
    played = RunConfig(**loose, orchestrator="sft", deny=["sft", "grpo"])
    assert missing(played) == ["workers.1.adapter"]  # the pool plays the orchestrator: its adapter must be there
    assert missing(RunConfig(**loose, orchestrator="cheap", deny=["sft"])) == ["workers.2.adapter"]
    assert missing(RunConfig(**loose)) == ["workers.1.adapter", "workers.2.adapter"]  # a pool on its own: all
    assert missing(RunConfig(**loose, summarizer="grpo", allow=["cheap"])) == ["workers.2.adapter"]


def test_podium_check_prints_every_problem_with_file_line_and_field(tmp_path):
    worker = {"name": "w", "backend": "local", "model": "m", "adapter": "no-such-adapter"}
    pool_file = write(tmp_path, "pool.yaml", {"workers": [worker], "tools": ["python"]})
    small = write(tmp_path, "small.yaml", EMBEDDED)
    trained = write(tmp_path, "trained.yaml", {"kind": "orchestrator", "pool": pool_file})
    broken = write(tmp_path, "broken.json", {"kind": "single_model", "max_tokens": 0, "backend": {"kind": "local"}})
    result = runner.invoke(app, ["check", small, trained, broken])
    assert result.exit_code == 2
    lines = result.stderr.splitlines()
    assert f"error: {small}:5: max_tokens: 96 cannot hold one action of the serial policy" in lines[0]
    assert lines[1].startswith(f"error: {pool_file}:5: workers.0.adapter: no LoRA adapter directory at ")
    assert lines[2] == f"error: {broken}:1: max_tokens: Input should be greater than 0"
    assert lines[-1] == "3 problem(s) in 3 file(s)"
    fixed = write(tmp_path, "fixed.yaml", {**EMBEDDED, "max_tokens": 256})
    result = runner.invoke(app, ["check", fixed])
    assert result.exit_code == 0 and result.stdout == f"{fixed}: ok (system)\n"


def test_podium_check_reads_every_kind_and_says_when_it_cannot_tell(tmp_path):
    files = {
        "run.yaml": ({"policy": "parallel", "max_tokens": 64}, "error", "parallel policy"),
        "pool.yaml": ({"workers": [{"name": "w", "backend": "local", "model": "m"}], "tools": []}, "ok", "pool"),
        "prices.yaml": ({"models": {"m": {"input_per_mtok": -1, "output_per_mtok": 0}}}, "error", "models.m"),
        "stage.yaml": ({"out": "d", "samples": 0}, "error", "samples"),
        "sft.yaml": ({"output_dir": "o", "trajectories": ["none.jsonl"]}, "error", "podium data collect"),
        "odd.yaml": ({"colour": "blue"}, "error", "name it with --kind"),
    }
    for name, (data, outcome, expected) in files.items():
        path = write(tmp_path, name, data)
        result = runner.invoke(app, ["check", path])
        assert (result.exit_code == 0) == (outcome == "ok"), (name, result.output)
        assert expected in result.output, (name, result.output)
    pending = runner.invoke(app, ["check", "--pending-ok", str(tmp_path / "sft.yaml")])
    assert pending.exit_code == 0 and "note:" in pending.stderr and "ok (sft)" in pending.stdout


def test_podium_check_online_reaches_each_http_worker(tmp_path):
    def system(base_url: str, model: str) -> dict:
        worker = {"name": "w", "backend": "http", "model": model, "base_url": base_url, "price": FREE,
                  "max_retries": 0, "timeout_s": 5}  # fmt: skip
        return {"kind": "orchestrator", "pool": {"workers": [worker], "tools": []}}

    with serving_in_thread(orchestrator("hi", repeat_last=True)) as url:
        served = write(tmp_path, "served.yaml", system(url, "orchestrator"))
        other = write(tmp_path, "other.yaml", system(url, "another-model"))
        assert runner.invoke(app, ["check", "--online", served]).exit_code == 0
        wrong = runner.invoke(app, ["check", "--online", other])
    assert wrong.exit_code == 2 and "does not serve 'another-model' (it serves orchestrator)" in wrong.stderr
    down = write(tmp_path, "down.yaml", system("http://127.0.0.1:9/v1", "m"))
    assert runner.invoke(app, ["check", down]).exit_code == 0  # offline: the server is not asked
    result = runner.invoke(app, ["check", "--online", down])
    assert result.exit_code == 2 and "http://127.0.0.1:9/v1: not reachable" in result.stderr


def test_eval_refuses_to_start_and_writes_nothing(tmp_path):
    system = write(tmp_path, "system.yaml", EMBEDDED)
    out = tmp_path / "run"
    result = runner.invoke(app, ["eval", "--benchmark", "gsm8k", "--system", system, "--limit", "1", "--out", str(out)])
    assert result.exit_code == 2 and "max_tokens: 96 cannot hold one action" in result.stderr
    assert system in result.stderr and not out.exists()


def test_serve_refuses_to_start_on_a_system_that_cannot_answer(tmp_path):
    system = write(tmp_path, "system.yaml", EMBEDDED)
    result = runner.invoke(app, ["serve", "--system", system, "--port", "9"])
    assert result.exit_code == 2 and f"{system} cannot run" in result.stderr and "serving" not in result.stderr


def test_data_collect_refuses_a_teacher_that_cannot_act_before_writing(tmp_path):
    teacher = write(tmp_path, "teacher.yaml", {**EMBEDDED, "max_tokens": 64})
    out = tmp_path / "data"
    command = ["data", "collect", "--benchmark", "gsm8k", "--limit", "1", "--teacher", teacher, "--out", str(out)]
    result = runner.invoke(app, command)
    assert result.exit_code == 2 and "max_tokens: 64 cannot hold one action" in result.stderr and not out.exists()


def test_grpo_refuses_rollouts_that_cannot_act(tmp_path):
    config = write(tmp_path, "grpo.yaml", {
        "output_dir": str(tmp_path / "o"), "tasks": "examples/data/rl_tasks.jsonl",
        "rollout": {"policy": "serial", "max_tokens": 32, "constrained": "auto"}})  # fmt: skip
    result = runner.invoke(app, ["train", "grpo", "--config", config])
    assert result.exit_code == 2
    assert "(rollout) cannot run:\n  max_tokens: 32 cannot hold one action" in result.stderr


def test_a_broken_config_error_is_a_config_error():
    assert issubclass(NotRunnable, ConfigError)

"""`podium env score` on results files in the format `tau2 run` saves, and `podium eval --tau2-results`: Podium's
runs written as tau2 results, read back with tau2's own Results model and scored."""

import json
import os

import pytest
import yaml
from typer.testing import CliRunner

pytest.importorskip("tau2", reason="the tau2 extra is not installed")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # tau2's registry imports litellm: no price fetch

from tau2.data_model.simulation import AgentInfo, Info, Results, SimulationRun, TerminationReason, UserInfo
from tau2.evaluator.evaluator import EvaluationType, evaluate_simulation
from tau2.registry import registry

from podium.cli import app
from podium.cli.env import app as env_app
from podium.envs import data_dir
from support.tau2_crosscheck import domain_facts, official_messages, official_tasks, scripts

needs_data = pytest.mark.skipif(not (data_dir() / "retail").is_dir(), reason="tau2 data not present")
FREE = {"input_per_mtok": 0, "output_per_mtok": 0}


def tau2_results(path, picks: dict[str, list[str]]) -> Results:
    """A results file written by tau2's own code: the conversations of ``picks`` (task id → perturbations) of
    retail, each rewarded by ``evaluate_simulation``."""
    tasks = {task.id: task for task in official_tasks("retail")}
    facts = domain_facts("retail")
    simulations = []
    for task_id, wanted in picks.items():
        for script in (s for s in scripts(tasks[task_id], facts) if s.perturbation in wanted):
            run = SimulationRun(
                id=f"{task_id}-{script.perturbation}",
                task_id=task_id,
                start_time="2026-01-01T00:00:00",
                end_time="2026-01-01T00:01:00",
                duration=60.0,
                termination_reason=TerminationReason.USER_STOP,
                messages=official_messages("retail", script),
                trial=0,
            )
            run.reward_info = evaluate_simulation(run, tasks[task_id], EvaluationType.ALL, False, "retail")
            simulations.append(run)
    info = Info(
        git_commit="test",
        num_trials=1,
        max_steps=100,
        max_errors=10,
        user_info=UserInfo(implementation="user_simulator", llm="scripted"),
        agent_info=AgentInfo(implementation="llm_agent", llm="scripted"),
        environment_info=registry.get_env_constructor("retail")().get_info(),
    )
    results = Results(info=info, tasks=[tasks[task_id] for task_id in picks], simulations=simulations)
    results.save(path)
    return results


def lines(output: str) -> list[dict]:
    return [json.loads(line) for line in output.splitlines() if line.startswith("{")]


@needs_data
def test_env_score_gives_each_simulation_the_reward_tau2_gave_it(tmp_path):
    path = tmp_path / "results.json"
    saved = tau2_results(path, {"46": ["gold", "drop_write"], "16": ["info_in_thought"]})
    runner = CliRunner()
    scored = runner.invoke(env_app, ["score", str(path), "--json"])
    assert scored.exit_code == 0, scored.output
    rows = lines(scored.stdout)
    expected = [(run.id, run.task_id, run.reward_info.reward) for run in saved.simulations]
    assert [(row["id"], row["task_id"], row["reward"]) for row in rows] == expected
    assert [row["reward"] for row in rows] == [1.0, 0.0, 0.0]  # gold (a gold action fails by design), two misses
    assert rows[1]["db"] == 0.0 and rows[2]["communicate"] == 0.0 and rows[2]["db"] == 1.0
    table = runner.invoke(env_app, ["score", str(path)])
    assert table.exit_code == 0 and "mean tau2 reward 0.3333" in table.stdout and "strict_solved 1/3" in table.stdout


@needs_data
def test_env_score_says_what_it_cannot_score(tmp_path):
    path = tmp_path / "results.json"
    saved = tau2_results(path, {"46": ["gold"]})
    tool = next(message for message in saved.simulations[0].messages if message.role == "tool")
    tool.content = '{"tampered": true}'
    saved.simulations[0].id = "tampered"
    saved.save(path)
    runner = CliRunner()
    scored = runner.invoke(env_app, ["score", str(path), "--json"])
    assert scored.exit_code == 1
    [row] = lines(scored.stdout)
    assert row["id"] == "tampered" and row["reward"] is None and "Expected" in row["error"]
    (tmp_path / "other.json").write_text(json.dumps({"simulations": []}))
    wrong = runner.invoke(env_app, ["score", str(tmp_path / "other.json")])
    assert wrong.exit_code == 2 and "is not a tau2 results file" in wrong.output
    missing = runner.invoke(env_app, ["score", str(tmp_path / "nothing.json")])
    assert missing.exit_code == 2 and "cannot read" in missing.output


@needs_data
def test_eval_exports_tau2_results_that_tau2_reads_and_env_score_scores(tmp_path):
    pool = {
        "workers": [
            {"name": "orch", "backend": "scripted", "model": "orch-model", "price": FREE,
             "replies": ["<think>Policy: no cancellation.</think><answer>I cannot cancel this reservation.</answer>"]},
            {"name": "customer", "backend": "scripted", "model": "customer-model", "price": FREE,
             "replies": ["Please cancel my reservation EHGLP3.", "I see. ###STOP###"]},
        ],
        "tools": [],
        "roles": [],
    }  # fmt: skip
    system = tmp_path / "system.yaml"
    config = {"kind": "orchestrator", "orchestrator": "orch", "pool": pool, "user": {"worker": "customer"}}
    system.write_text(yaml.safe_dump(config))
    exported = tmp_path / "tau2-results.json"
    command = ["eval", "--benchmark", "tau2_airline", "--system", str(system), "--out", str(tmp_path / "run")]
    ran = CliRunner().invoke(app, [*command, "--limit", "1", "--quiet", "--tau2-results", str(exported)])
    assert ran.exit_code == 0, ran.output
    results = Results.load(exported)  # tau2's own reader
    [run] = results.simulations
    assert run.task_id == "0" and run.termination_reason == TerminationReason.USER_STOP and run.trial == 0
    assert [m.role for m in run.messages] == ["assistant", "user", "assistant", "user"]
    assert run.messages[2].content == "I cannot cancel this reservation." and "Policy" not in run.messages[2].content
    assert results.info.agent_info.implementation == "podium" and results.info.user_info.llm == "customer-model"
    assert [task.id for task in results.tasks] == ["0"] and run.reward_info.reward == 1.0
    again = evaluate_simulation(run, results.tasks[0], EvaluationType.ALL, False, "airline")
    assert again.reward == 1.0
    scored = CliRunner().invoke(env_app, ["score", str(exported), "--json"])
    assert scored.exit_code == 0 and lines(scored.stdout)[0]["reward"] == 1.0

"""A tau2 task through the orchestrator runtime: domain tools in the episode, a simulated user, the criteria."""

import asyncio
import json

import pytest
import yaml
from typer.testing import CliRunner

from podium.backends.embedded import EMBEDDED_MODEL
from podium.backends.scripted import ScriptedBackend
from podium.cli.env import app as env_app
from podium.core.budget import StopReason
from podium.core.calls import Refusal, Status, ToolCall, ToolResult
from podium.core.trajectory import Trajectory, Turn
from podium.costs.prices import ModelPrice
from podium.envs import data_dir, load_domain
from podium.envs.conversation import UserSimulatorConfig, run_task
from podium.envs.evaluation import judge_trajectory, replay, trajectory_episode
from podium.envs.user_simulator import DEFAULT_GREETING, STOP_TOKEN
from podium.errors import ConfigError
from podium.graders.environment import EnvironmentVerifier
from podium.pool.config import PoolConfig, WorkerConfig
from podium.pool.pool import build_pool, embedded_pool_config
from podium.runtime import RunConfig

needs_data = pytest.mark.skipif(not (data_dir() / "airline").is_dir(), reason="tau2 data not present")
FREE = ModelPrice(input_per_mtok=0.0, output_per_mtok=0.0)
USER_LINES = [
    "I want to cancel reservations XEHM4B and 59XX6W. My user id is daiki_muller_1116.",
    "Upgrade XEHM4B to economy first, then cancel both. Also, what do my other upcoming flights cost in total?",
    f"Thanks. {STOP_TOKEN}",
]


def call(name: str, **arguments: object) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def gold_script(task, *, skip: str | None = None) -> list[str]:
    """An orchestrator that performs the task's golden actions, asks the user once midway, and tells the total."""
    calls = [call(a.name, **a.arguments) for a in task.golden_actions if a.action_id != skip]
    return [
        *calls[:2],
        "<answer>XEHM4B is basic economy. Shall I upgrade it to economy and then cancel both?</answer>",
        *calls[2:],
        "<answer>Both reservations are cancelled. Your other upcoming flights total $1,628.</answer>",
    ]


def pool_with_user(**extra: object) -> PoolConfig:
    user = WorkerConfig(name="customer", backend="scripted", model="customer", replies=USER_LINES, price=FREE)
    helper = WorkerConfig(name="helper", backend="scripted", model="helper", replies=["\\boxed{1}"], price=FREE)
    return PoolConfig(workers=[helper, user], tools=["python"], **extra)  # type: ignore[arg-type]


def play(orchestrator: ScriptedBackend, config: RunConfig | None = None, task_id: str = "7"):
    airline = load_domain("airline")
    pool = build_pool(pool_with_user())
    user = UserSimulatorConfig(worker="customer", max_turns=5)
    episode = asyncio.run(
        run_task(pool, config or RunConfig(), airline, airline.task(task_id), user=user, orchestrator=orchestrator)
    )
    return airline, episode


@needs_data
def test_a_gold_following_orchestrator_converses_changes_the_db_and_is_solved():
    airline = load_domain("airline")
    task = airline.task("7")
    orchestrator = ScriptedBackend(gold_script(task))
    _, episode = play(orchestrator)
    trajectory = episode.trajectory
    assert trajectory.stop_reason is StopReason.ENV_DONE
    assert [r.call.name for r in trajectory.results] == [a.name for a in task.golden_actions]
    assert all(r.status is Status.OK for r in trajectory.results)
    # The env tool calls reached the episode's database: it is now the golden database.
    golden = replay(airline, task, task.golden_actions)
    assert episode.environment.db.state_hash() == golden.db_hash == trajectory.metadata["env_db_hash"]
    assert len(episode.environment.log) == 5 and trajectory.metadata["env_actions"] == 5
    # The user opened the conversation after the greeting and answered each of the agent's messages.
    assert trajectory.question == USER_LINES[0]
    assert episode.user.history[1].content == DEFAULT_GREETING
    assert trajectory.metadata["user_turns"] == 3 and trajectory.metadata["user_done"]
    users = [m.content for m in trajectory.messages if m.role == "user"]
    assert USER_LINES[1] in users and not any(STOP_TOKEN in text for text in users)
    system = trajectory.messages[0].content
    assert "cancel_reservation" in system and "# Policy" in system and "current time is 2024-05-15" in system
    criteria = judge_trajectory(airline, task, trajectory)
    assert criteria.solved and criteria.missing_info == []
    assert asyncio.run(EnvironmentVerifier(airline).verify(trajectory, task)).correct


@needs_data
def test_a_skipped_golden_action_fails_execution_and_the_verdict_says_why():
    airline = load_domain("airline")
    task = airline.task("7")
    _, episode = play(ScriptedBackend(gold_script(task, skip="7_4")))  # never cancels 59XX6W
    criteria = judge_trajectory(airline, task, episode.trajectory)
    assert not criteria.execution_correct and criteria.process_fidelity
    verdict = asyncio.run(EnvironmentVerifier(airline).verify(episode.trajectory, task))
    assert not verdict.correct and "database differs" in (verdict.reason or "")


@needs_data
def test_an_allow_list_still_admits_the_domain_tools_and_pool_calls_are_not_replayed():
    airline = load_domain("airline")
    task = airline.task("7")
    script = [call("python", code="print(1628)"), *gold_script(task)]
    orchestrator = ScriptedBackend(script)
    _, episode = play(orchestrator, RunConfig(allow=["python"]))
    system = orchestrator.requests[0][0].content
    assert "cancel_reservation" in system and "| helper | model |" not in system
    assert episode.trajectory.results[0].call.name == "python"
    criteria = judge_trajectory(airline, task, episode.trajectory)
    assert criteria.solved and len(criteria.trajectory.outcomes) == 5 and criteria.trajectory.ok


@needs_data
def test_no_summarizer_speaks_for_the_agent_when_the_turns_run_out():
    lookup = ScriptedBackend([call("get_user_details", user_id="daiki_muller_1116")], repeat_last=True)
    _, episode = play(lookup, RunConfig(max_turns=2, summarize_on_stop=True))
    trajectory = episode.trajectory
    assert trajectory.stop_reason is StopReason.MAX_TURNS and trajectory.answer is None
    assert [result.call.name for result in trajectory.results] == ["get_user_details"] * 2


@needs_data
def test_policies_that_cannot_converse_are_refused():
    with pytest.raises(ConfigError, match="cannot play tool-use tasks"):
        play(ScriptedBackend(["<final_answer>x</final_answer>"]), RunConfig(policy="dag"))


@needs_data
def test_calls_the_runtime_refused_are_not_replayed():
    airline = load_domain("airline")
    task = airline.task("7")
    cancel = ToolCall(name="cancel_reservation", arguments={"reservation_id": "59XX6W"})
    refused = ToolResult(
        call=cancel, status=Status.EXEC_ERR, reason="the call could exceed the budget", refused=Refusal.BUDGET
    )
    unparsed = ToolResult(call=cancel, status=Status.PARSE_ERR, reason="bad")
    failed = ToolResult(call=cancel, status=Status.EXEC_ERR, reason="ToolError: already cancelled")
    trajectory = Trajectory(question="q", turns=[Turn(index=0, output="", results=[refused, unparsed, failed])])
    assert trajectory_episode(trajectory)[0] == [cancel]
    assert judge_trajectory(airline, task, trajectory).trajectory.changed


@needs_data
def test_env_run_command_prints_the_criteria(tmp_path):
    task = load_domain("airline").task("7")
    pool = pool_with_user().model_dump(mode="json")
    agent = {"name": "agent", "backend": "scripted", "model": "agent", "replies": gold_script(task)}
    agent["price"] = {"input_per_mtok": 0, "output_per_mtok": 0}
    pool["workers"].insert(0, agent)
    path = tmp_path / "pool.yaml"
    path.write_text(yaml.safe_dump(pool))
    trace = tmp_path / "trace.jsonl"
    command = ["run", "airline", "--task", "7", "--pool", str(path), "--user-worker", "customer", "--json"]
    result = CliRunner().invoke(env_app, [*command, "--trace", str(trace)])
    assert result.exit_code == 0, result.output
    row = json.loads(result.output)
    assert row["solved"] and row["live_db_matches_replay"] and row["agent_actions"] == 5
    assert row["user_turns"] == 3 and row["stop_reason"] == "env_done" and row["turns"] == 7
    assert trace.read_text().count("\n") == 1
    missing = CliRunner().invoke(env_app, ["run", "airline", "--task", "nope", "--pool", str(path)])
    assert missing.exit_code == 2 and "no task" in missing.output


@pytest.mark.slow
@needs_data
def test_an_airline_task_runs_end_to_end_on_the_embedded_model():
    airline = load_domain("airline")
    task = airline.task("7")
    pool = build_pool(embedded_pool_config())
    # The domain's tools only: a shorter prompt. The budget holds the largest call with little free text.
    config = RunConfig(max_turns=2, max_tokens=1200, allow=[])
    user = UserSimulatorConfig(max_turns=2, max_tokens=24)
    episode = asyncio.run(run_task(pool, config, airline, task, user=user))
    trajectory = episode.trajectory
    assert 1 <= len(trajectory.turns) <= 2 and trajectory.metadata["constrained"]
    assert trajectory.metadata["user_model"] == EMBEDDED_MODEL and trajectory.metadata["user_turns"] >= 1
    assert trajectory.stop_reason in {StopReason.MAX_TURNS, StopReason.ENV_DONE, StopReason.MAX_PARSE_ERRORS}
    criteria = judge_trajectory(airline, task, trajectory)
    assert criteria.golden.ok and criteria.trajectory.db_hash == episode.environment.db.state_hash()
    verdict = asyncio.run(EnvironmentVerifier(airline).verify(trajectory, task))
    assert verdict.error is None and verdict.correct == criteria.solved

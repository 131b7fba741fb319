"""A tau2 task through the orchestrator runtime: domain tools in the episode, a simulated user, the criteria."""

import asyncio
import json

import pytest
import yaml
from typer.testing import CliRunner

pytest.importorskip("tau2", reason="the tau2 extra is not installed")

from podium.backends.scripted import ScriptedBackend
from podium.cli.env import app as env_app
from podium.core.budget import StopReason
from podium.core.calls import Refusal, Status, ToolCall, ToolResult
from podium.core.trajectory import Trajectory, Turn
from podium.costs.prices import ModelPrice
from podium.envs import data_dir, golden_actions, load_domain
from podium.envs.conversation import UserSimulatorConfig, run_task
from podium.envs.evaluation import grade_trajectory, replay
from podium.envs.transcript import DIALOGUE_KEY, TranscriptError, tau2_messages, termination_reason
from podium.envs.user_simulator import DEFAULT_GREETING, STOP_TOKEN
from podium.errors import ConfigError
from podium.graders.environment import EnvironmentVerifier
from podium.pool.config import PoolConfig, WorkerConfig
from podium.pool.pool import build_pool
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
    calls = [call(a.name, **a.arguments) for a in golden_actions(task) if a.action_id != skip]
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
def test_a_gold_following_orchestrator_converses_changes_the_db_and_earns_the_reward():
    airline = load_domain("airline")
    task = airline.task("7")
    _, episode = play(ScriptedBackend(gold_script(task)))
    trajectory = episode.trajectory
    assert trajectory.stop_reason is StopReason.ENV_DONE
    assert [r.call.name for r in trajectory.results] == [a.name for a in golden_actions(task)]
    assert all(r.status is Status.OK for r in trajectory.results)
    # The env tool calls reached the episode's database: it is now the golden database.
    golden = replay(airline, task, golden_actions(task))
    assert episode.environment.db_hash() == golden.db_hash == trajectory.metadata["env_db_hash"]
    assert len(episode.environment.log) == 5 and trajectory.metadata["env_actions"] == 5
    # The user opened the conversation after the greeting and answered each of the agent's messages.
    assert trajectory.question == USER_LINES[0]
    assert episode.user.history[1].content == DEFAULT_GREETING
    assert trajectory.metadata["user_turns"] == 3 and trajectory.metadata["user_stopped"]
    dialogue = trajectory.metadata[DIALOGUE_KEY]
    assert [line["role"] for line in dialogue] == ["assistant", "user"] * 3
    assert dialogue[-1]["content"] == USER_LINES[-1] and STOP_TOKEN in dialogue[-1]["content"]
    users = [m.content for m in trajectory.messages if m.role == "user"]
    assert USER_LINES[1] in users and not any(STOP_TOKEN in text for text in users)
    system = trajectory.messages[0].content
    assert "cancel_reservation" in system and "# Policy" in system and "current time is 2024-05-15" in system
    grade = grade_trajectory(airline, task, trajectory)
    assert grade.reward == 1.0 and grade.strict_solved and (grade.db, grade.communicate, grade.action) == (1, 1, 1)
    verdict = asyncio.run(EnvironmentVerifier(airline).verify(trajectory, task))
    assert verdict.correct and verdict.score == 1.0 and trajectory.metadata["tau2"]["strict_solved"]


@needs_data
def test_the_transcript_holds_what_the_user_saw_and_the_calls_that_ran():
    airline = load_domain("airline")
    task = airline.task("7")
    thinking = [f"<think>I will say 1628 later.</think>\n{line}" for line in gold_script(task)[:-1]]
    _, episode = play(ScriptedBackend([*thinking, "<answer>Both reservations are cancelled.</answer>"]))
    messages = tau2_messages(episode.trajectory, airline.tool_kinds)
    assert [m.role for m in messages][:4] == ["assistant", "user", "assistant", "tool"]
    said = [m.content for m in messages if m.role == "assistant" and m.content]
    assert said[0] == DEFAULT_GREETING and not any("1628" in text for text in said)
    assert "1628" in messages[2].raw_data["podium_output"] and messages[2].content is None
    assert str(termination_reason(episode.trajectory).value) == "user_stop"
    grade = grade_trajectory(airline, task, episode.trajectory)
    assert (
        grade.reward == 0.0 and grade.db == 1.0 and grade.communicate == 0.0 and grade.strict.missing_info == ["1628"]
    )


@needs_data
def test_a_skipped_golden_action_fails_the_db_check_and_the_verdict_says_why():
    airline = load_domain("airline")
    task = airline.task("7")
    _, episode = play(ScriptedBackend(gold_script(task, skip="7_4")))  # never cancels 59XX6W
    grade = grade_trajectory(airline, task, episode.trajectory)
    assert grade.db == 0.0 and grade.communicate == 1.0 and grade.reward == 0.0
    verdict = asyncio.run(EnvironmentVerifier(airline).verify(episode.trajectory, task))
    assert not verdict.correct and "DB" in (verdict.reason or "")


@needs_data
def test_an_allow_list_still_admits_the_domain_tools_and_pool_calls_are_not_tau2_actions():
    airline = load_domain("airline")
    task = airline.task("7")
    orchestrator = ScriptedBackend([call("python", code="print(1628)"), *gold_script(task)])
    _, episode = play(orchestrator, RunConfig(allow=["python"]))
    system = orchestrator.requests[0][0].content
    assert "cancel_reservation" in system and "| helper | model |" not in system
    assert episode.trajectory.results[0].call.name == "python"
    messages = tau2_messages(episode.trajectory, airline.tool_kinds)
    calls = [c.name for m in messages if m.role == "assistant" for c in m.tool_calls or []]
    assert "python" not in calls and len(calls) == 5
    assert grade_trajectory(airline, task, episode.trajectory).reward == 1.0


@needs_data
def test_running_out_of_turns_is_premature_and_no_summarizer_speaks_for_the_agent():
    airline = load_domain("airline")
    lookup = ScriptedBackend([call("get_user_details", user_id="daiki_muller_1116")], repeat_last=True)
    _, episode = play(lookup, RunConfig(max_turns=2, summarize_on_stop=True))
    trajectory = episode.trajectory
    assert trajectory.stop_reason is StopReason.MAX_TURNS and trajectory.answer is None
    assert [result.call.name for result in trajectory.results] == ["get_user_details"] * 2
    grade = grade_trajectory(airline, airline.task("7"), trajectory)
    assert grade.reward == 0.0 and grade.termination == "max_steps" and "prematurely" in (grade.note or "")


@needs_data
def test_policies_that_cannot_converse_are_refused():
    with pytest.raises(ConfigError, match="cannot play tool-use tasks"):
        play(ScriptedBackend(["<final_answer>x</final_answer>"]), RunConfig(policy="dag"))


@needs_data
def test_calls_that_never_ran_are_not_tau2_actions():
    airline = load_domain("airline")
    cancel = ToolCall(name="cancel_reservation", arguments={"reservation_id": "59XX6W"})
    refused = ToolResult(
        call=cancel, status=Status.EXEC_ERR, reason="the call could exceed the budget", refused=Refusal.BUDGET
    )
    unparsed = ToolResult(call=cancel, status=Status.PARSE_ERR, reason="bad")
    failed = ToolResult(call=cancel, status=Status.EXEC_ERR, reason="Error: Reservation 59XX6W is cancelled")
    dialogue = [{"role": "assistant", "content": DEFAULT_GREETING}, {"role": "user", "content": "hi"}]
    trajectory = Trajectory(
        question="hi",
        turns=[Turn(index=0, output="", results=[refused, unparsed, failed])],
        metadata={DIALOGUE_KEY: dialogue},
    )
    messages = tau2_messages(trajectory, airline.tool_kinds)
    assert [c.name for c in messages[2].tool_calls] == ["cancel_reservation"] and messages[3].error
    assert messages[3].content == failed.reason
    with pytest.raises(TranscriptError, match="no tau2 dialogue"):
        tau2_messages(Trajectory(question="hi"), airline.tool_kinds)
    verdict = asyncio.run(EnvironmentVerifier(airline).verify(Trajectory(question="hi"), airline.task("7")))
    assert not verdict.correct and "no tau2 dialogue" in (verdict.error or "")


@needs_data
def test_env_run_command_prints_the_tau2_reward_and_the_strict_verdict(tmp_path):
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
    row = json.loads(result.stdout)
    assert row["tau2_reward"] == 1.0 and row["strict_solved"] and row["agent_actions"] == 5
    assert (row["db"], row["communicate"], row["action"]) == (1.0, 1.0, 1.0)
    assert row["user_turns"] == 3 and row["stop_reason"] == "env_done" and row["turns"] == 7
    assert trace.read_text().count("\n") == 1
    missing = CliRunner().invoke(env_app, ["run", "airline", "--task", "nope", "--pool", str(path)])
    assert missing.exit_code == 2 and "no task" in missing.output

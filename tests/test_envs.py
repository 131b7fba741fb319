"""tau2-format environments: loading, tools, golden replays, designed failures, the solved criteria, the user."""

import asyncio
import json
import re

import pytest
from typer.testing import CliRunner

from podium.backends.scripted import ScriptedBackend
from podium.cli.env import app as env_app
from podium.core import CallUsage, Message, Status, ToolCall, Trajectory, Turn
from podium.envs import ActionKind, Toolkit, action, data_dir, load_domain, register_domain
from podium.envs.domain import Action, UserScenario
from podium.envs.evaluation import judge_actions, missing_information, replay
from podium.envs.toolkit import ToolError, evaluate_arithmetic
from podium.envs.user_simulator import STOP_TOKEN, UserSimulator, converse, scenario_prompt
from podium.graders.environment import EnvironmentVerifier

needs_data = pytest.mark.skipif(not (data_dir() / "airline").is_dir(), reason="tau2 data not present")
PYTHON_ERROR = re.compile(r"^\w+: [A-Z]\w*(Error|Exception): ")


@pytest.fixture(scope="module")
def airline():
    return load_domain("airline")


@pytest.fixture(scope="module")
def retail():
    return load_domain("retail")


# ------------------------------------------------------------------------------------------- loading


@needs_data
def test_domains_load_with_tagged_tools(airline, retail):
    assert (len(airline.tasks), len(retail.tasks)) == (50, 114)
    assert "The current time is 2024-05-15 15:00:00 EST" in airline.policy
    tools = {item.tool.name: item.kind for item in airline.environment().tools()}
    assert tools["book_reservation"] is ActionKind.WRITE
    assert tools["get_user_details"] is ActionKind.READ
    assert tools["calculate"] is ActionKind.GENERIC
    kinds = {item.tool.name: item.kind for item in retail.environment().tools()}
    assert sum(kind is ActionKind.WRITE for kind in kinds.values()) == 7
    spec = next(item.tool.spec for item in airline.environment().tools() if item.tool.name == "book_reservation")
    assert spec.parameters["properties"]["cabin"]["enum"] == ["basic_economy", "economy", "business"]


# ------------------------------------------------------------------------------------------ replays


@needs_data
def test_every_golden_replay_runs_and_is_deterministic(airline, retail):
    summary = {}
    for domain in (airline, retail):
        replays = [replay(domain, task, task.golden_actions) for task in domain.tasks]
        for outcome in (o for r in replays for o in r.outcomes if not o.ok):
            assert not PYTHON_ERROR.match(f"{outcome.name}: {outcome.error}"), outcome  # refusals, not crashes
        summary[domain.name] = (sum(r.ok for r in replays), sum(r.changed for r in replays))
    # retail: 18 tasks contain actions designed to fail (wrong ids, emails, zips; balance too low…)
    assert summary == {"airline": (50, 30), "retail": (96, 103)}
    task = airline.task("7")
    assert replay(airline, task, task.golden_actions).db_hash == replay(airline, task, task.golden_actions).db_hash


@needs_data
def test_actions_designed_to_fail_fail_as_the_task_expects(retail):
    wrong_ids = replay(retail, retail.task("46"), retail.task("46").golden_actions)
    assert [o.ok for o in wrong_ids.outcomes] == [True, False, False, True, True, True, True]
    assert "not found" in (wrong_ids.outcomes[1].error or "")
    pending = replay(retail, retail.task("64"), retail.task("64").golden_actions)
    assert [(o.name, o.ok) for o in pending.outcomes[-2:]] == [
        ("exchange_delivered_order_items", False),
        ("modify_pending_order_items", True),
    ]
    poor = replay(retail, retail.task("105"), retail.task("105").golden_actions)
    assert not poor.ok and not poor.changed and "balance" in (poor.outcomes[0].error or "")


@needs_data
def test_refused_actions_leave_the_database_unchanged(airline, retail):
    env = airline.environment()
    before = env.db.state_hash()
    booking = {
        "user_id": "sophia_silva_7557",
        "origin": "ORD",
        "destination": "PHL",
        "flight_type": "one_way",
        "cabin": "economy",
        "flights": [{"flight_number": "HAT271", "date": "2024-05-26"}],
        "passengers": [{"first_name": "Sophia", "last_name": "Silva", "dob": "1957-10-05"}],
        "payment_methods": [{"payment_id": "certificate_8045380", "amount": 100}],  # the fare is 174
        "total_baggages": 0,
        "nonfree_baggages": 0,
        "insurance": "no",
    }
    outcome = env.call("book_reservation", booking)
    assert not outcome.ok and "total price is 174" in (outcome.error or "")
    assert env.db.state_hash() == before  # the seat taken before the payment check was put back
    booking["payment_methods"] = [{"payment_id": "certificate_8045380", "amount": 174}]
    booked = env.call("book_reservation", booking)
    assert booked.ok and booked.value["created_at"] == "2024-05-15T15:00:00"
    assert not env.call("cancel_reservation", {"reservation_id": "NOPE00"}).ok
    assert env.call("cancel_reservation", {"reservation_id": booked.value["reservation_id"]}).ok
    assert "already cancelled" in (
        env.call("cancel_reservation", {"reservation_id": booked.value["reservation_id"]}).error or ""
    )
    shop = retail.environment()
    delivered = next(key for key, order in shop.db.table("orders").items() if order["status"] == "delivered")
    assert "not pending" in (
        shop.call("cancel_pending_order", {"order_id": delivered, "reason": "no longer needed"}).error or ""
    )
    assert not shop.call("calculate", {"expression": "__import__('os')"}).ok
    assert shop.call("calculate", {"expression": "(1 + 2) * 3 / 4"}).value == 2.25
    assert not shop.call("no_such_tool", {}).ok


def test_arithmetic_without_eval():
    assert evaluate_arithmetic("-2 * (3.5 + 0.5)") == -8.0
    for bad in ("2 ** 10", "abs(-1)", "1 / 0", "1 +"):
        with pytest.raises(ToolError):
            evaluate_arithmetic(bad)


# ----------------------------------------------------------------------------------------- criteria


@needs_data
def test_three_criteria_on_a_task_with_writes_and_information(airline):
    task = airline.task("7")  # update XEHM4B, cancel XEHM4B and 59XX6W, tell the user "1628"
    golden = task.golden_actions
    solved = judge_actions(airline, task, golden, ["Your upcoming flights total $1,628."])
    assert solved.solved
    silent = judge_actions(airline, task, golden, ["Done."])
    assert silent.execution_correct and not silent.process_fidelity and silent.missing_info == ["1628"]
    partial = judge_actions(airline, task, golden[:-1], ["1628"])
    assert not partial.execution_correct
    lookup = airline.task("5")  # only reads the user's profile (to see she is not a Gold member)
    skipped = judge_actions(airline, lookup, [], ["Sorry about the delay."])
    assert skipped.execution_correct and not skipped.operation_complete
    assert skipped.missing_entries == [("users", "mei_brown_7075")]
    assert missing_information(["1,628", "Gold"], ["it costs 1628", "GOLD member"]) == []


@needs_data
def test_environment_verifier_through_the_pool_registry(retail):
    task = retail.task("22")
    env = retail.environment()
    registry = env.registry()
    results = [asyncio.run(registry.call(ToolCall(name=a.name, arguments=a.arguments))) for a in task.golden_actions]
    assert all(result.status is Status.OK for result in results)
    bad = asyncio.run(registry.call(ToolCall(name="get_order_details", arguments={"order_id": 7})))
    assert bad.status is Status.PARSE_ERR
    refused = asyncio.run(registry.call(ToolCall(name="get_order_details", arguments={"order_id": "#X"})))
    assert refused.status is Status.EXEC_ERR and "not found" in (refused.reason or "")
    turns = [Turn(index=0, output="Updating your address now.", results=[*results, bad, refused])]
    verifier = EnvironmentVerifier(retail)
    trajectory = Trajectory(question="t22", turns=turns, answer="Your address is updated.")
    assert asyncio.run(verifier.verify(trajectory, task)).correct
    lazy = Trajectory(question="t22", turns=[Turn(index=0, output="Sorry.", usage=CallUsage())])
    verdict = asyncio.run(verifier.verify(lazy, task))
    assert not verdict.correct and "database differs" in (verdict.reason or "")


def test_a_new_domain_drops_in(tmp_path, monkeypatch):
    class CounterTools(Toolkit):
        domain = "counter"

        @action(ActionKind.WRITE)
        def bump(self, name: str) -> int:
            """Add one to a counter.

            Args:
                name: The counter.
            """
            counter = self.db.get("counters", name, "counter")
            counter["value"] += 1
            return counter["value"]

    register_domain("counter", CounterTools)
    root = tmp_path / "counter"
    root.mkdir()
    (root / "db.json").write_text(json.dumps({"counters": {"a": {"value": 0}}}))
    (root / "policy.md").write_text("Count.")
    task = {"id": "1", "user_scenario": {"instructions": "bump a"}, "evaluation_criteria": {"actions": []}}
    (root / "tasks.json").write_text(json.dumps([task]))
    monkeypatch.setenv("PODIUM_TAU2_DATA", str(tmp_path))
    domain = load_domain("counter")
    result = replay(domain, domain.tasks[0], [Action(name="bump", arguments={"name": "a"})])
    assert result.ok and result.changed and result.touched == {("counters", "a")}
    assert not replay(domain, None, [Action(name="bump", arguments={"name": "b"})]).changed


# -------------------------------------------------------------------------------------------- user


SCENARIO = UserScenario(
    instructions={"reason_for_call": "Cancel order #W1.", "known_info": "You are Ann.", "unknown_info": None}
)


def test_user_simulator_stops_on_its_token():
    backend = ScriptedBackend(["Hi, I want to cancel order #W1.", "Thanks! ###STOP###"])
    user = UserSimulator(backend, SCENARIO)
    first = asyncio.run(user.respond("How can I help?"))
    assert first.text == "Hi, I want to cancel order #W1." and not first.done
    last = asyncio.run(user.respond("Cancelled."))
    assert last.done and last.text == "Thanks!"
    system = backend.requests[0][0]
    assert system.role == "system" and "Cancel order #W1." in system.content and "Unknown info" not in system.content
    assert [m.role for m in backend.requests[1]] == ["system", "user", "assistant", "user"]
    with pytest.raises(RuntimeError):
        asyncio.run(user.respond("anything else?"))


def test_user_simulator_turn_limit_and_dialogue():
    user = UserSimulator(ScriptedBackend(["still there?"], repeat_last=True), SCENARIO, max_turns=3)

    async def agent(conversation: list[Message]) -> str:
        return f"reply {len(conversation)}"

    conversation = asyncio.run(converse(agent, user))
    assert [m.role for m in conversation] == ["assistant", "user", "assistant", "user", "assistant", "user"]
    assert user.done and user.turns == 3
    assert STOP_TOKEN in scenario_prompt(SCENARIO)


# --------------------------------------------------------------------------------------------- CLI


@needs_data
def test_cli_list_and_replay():
    runner = CliRunner()
    listed = runner.invoke(env_app, ["list"])
    assert listed.exit_code == 0 and "airline" in listed.output and "retail" in listed.output
    replayed = runner.invoke(env_app, ["replay", "retail", "--task", "46", "--json"])
    assert replayed.exit_code == 0
    row = json.loads(replayed.stdout.splitlines()[0] if "\n" not in replayed.stdout.strip() else replayed.stdout)
    assert row["task"] == "46" and row["db_changed"] and not row["replay_ok"] and row["solved"]
    assert runner.invoke(env_app, ["replay", "retail", "--task", "nope"]).exit_code == 2
    assert runner.invoke(env_app, ["replay", "nowhere"]).exit_code == 2

"""tau2-format environments on the official tau2 package: loading, tools through Podium's registry, golden replays,
designed failures, a domain of one's own, the simulated user, the CLI."""

import asyncio
import json

import pytest
from typer.testing import CliRunner

pytest.importorskip("tau2", reason="the tau2 extra is not installed")

from tau2.data_model.tasks import Action, UserScenario
from tau2.environment.db import DB
from tau2.environment.toolkit import ToolKitBase, ToolType, is_tool

from podium.backends.scripted import ScriptedBackend
from podium.cli.env import app as env_app
from podium.core import Message, Status, ToolCall
from podium.envs import ActionKind, data_dir, golden_actions, load_domain, register_domain
from podium.envs.evaluation import named_entries, replay
from podium.envs.user_simulator import STOP_TOKEN, UserSimulator, converse, scenario_prompt
from podium.pool.registry import ToolRegistry
from support.tau2_crosscheck import DESIGNED_FAILURES

needs_data = pytest.mark.skipif(not (data_dir() / "airline").is_dir(), reason="tau2 data not present")


@pytest.fixture(scope="module")
def airline():
    return load_domain("airline")


@pytest.fixture(scope="module")
def retail():
    return load_domain("retail")


def registry_of(environment) -> ToolRegistry:
    return ToolRegistry([item.tool for item in environment.tools()])


# ------------------------------------------------------------------------------------------- loading


@needs_data
def test_domains_load_with_tau2_tools_tagged_as_tau2_tags_them(airline, retail):
    assert (len(airline.tasks), len(retail.tasks)) == (50, 114)
    assert "The current time is 2024-05-15 15:00:00 EST" in airline.policy
    tools = {item.tool.name: item.kind for item in airline.environment().tools()}
    assert tools["book_reservation"] is ActionKind.WRITE
    assert tools["get_user_details"] is ActionKind.READ
    assert tools["calculate"] is ActionKind.GENERIC
    assert sum(kind is ActionKind.WRITE for kind in retail.tool_kinds.values()) == 7
    spec = next(item.tool.spec for item in airline.environment().tools() if item.tool.name == "book_reservation")
    assert spec.parameters["properties"]["cabin"]["enum"] == ["business", "economy", "basic_economy"]
    assert "$defs" not in json.dumps(spec.parameters) and "title" not in spec.parameters
    assert spec.description.startswith("Book a reservation.")


# ------------------------------------------------------------------------------------------ replays


@needs_data
def test_every_retail_golden_replay_runs_as_tau2_runs_it(airline, retail):
    replays = [replay(retail, task, golden_actions(task)) for task in retail.tasks]
    for outcome in (o for r in replays for o in r.outcomes if not o.ok):
        assert outcome.content.startswith("Error: ")  # tau2's failure text, not a crash
    # 18 tasks contain actions designed to fail (wrong ids, emails, zips; balance too low…); all of retail's
    # tasks and airline's are replayed by benchmarks/verifier_selfcheck.py.
    assert (sum(r.ok for r in replays), sum(r.changed for r in replays)) == (96, 103)
    failing = tuple(task.id for task, result in zip(retail.tasks, replays, strict=True) if not result.ok)
    assert failing == DESIGNED_FAILURES
    task = airline.task("7")
    first, second = (replay(airline, task, golden_actions(task)) for _ in range(2))
    assert first.ok and first.changed and first.db_hash == second.db_hash


@needs_data
def test_actions_designed_to_fail_fail_as_the_task_expects(retail):
    wrong_ids = replay(retail, retail.task("46"), golden_actions(retail.task("46")))
    assert [o.ok for o in wrong_ids.outcomes] == [True, False, False, True, True, True, True]
    assert "not found" in (wrong_ids.outcomes[1].error or "")
    poor = replay(retail, retail.task("105"), golden_actions(retail.task("105")))
    assert not poor.ok and not poor.changed and "balance" in (poor.outcomes[0].error or "")


@needs_data
def test_tools_through_the_registry_answer_as_tau2_answers(airline):
    environment = airline.environment()
    registry = registry_of(environment)
    before = environment.db_hash()
    ok = asyncio.run(registry.call(ToolCall(name="get_reservation_details", arguments={"reservation_id": "4WQ150"})))
    assert ok.status is Status.OK and ok.value["reservation_id"] == "4WQ150"
    assert json.loads(ok.observation) == ok.value and environment.log[-1].content == ok.observation
    missing = asyncio.run(registry.call(ToolCall(name="cancel_reservation", arguments={"reservation_id": "NOPE00"})))
    assert missing.status is Status.EXEC_ERR and missing.reason == "Error: Reservation NOPE00 not found"
    typed = asyncio.run(registry.call(ToolCall(name="send_certificate", arguments={"user_id": "x", "amount": "1"})))
    assert typed.status is Status.PARSE_ERR and environment.db_hash() == before  # Podium checks the schema
    # Called directly, tau2 takes what it is given: its models coerce a string amount.
    sent = environment.call("send_certificate", {"user_id": "mia_li_3668", "amount": "100"})
    assert sent.ok and environment.db_hash() != before
    assert environment.tau2.tools.db.users["mia_li_3668"].payment_methods["certificate_3221322"].amount == 100.0
    cancelled = [environment.call("cancel_reservation", {"reservation_id": "4WQ150"}) for _ in range(2)]
    assert [outcome.ok for outcome in cancelled] == [True, True]  # tau2 cancels a cancelled reservation again


def test_named_entries_are_table_keys_among_argument_values():
    tables = {"users": frozenset({"ann_1"}), "orders": frozenset({"#W1", "#W2"})}
    calls = [("a", {"user_id": "ann_1", "items": [{"order": "#W2"}], "n": 3}), ("b", {"note": "#W3 ann"})]
    assert named_entries(calls, tables) == {("users", "ann_1"), ("orders", "#W2")}


class CounterDB(DB):
    counters: dict[str, int]


class CounterTools(ToolKitBase):
    @is_tool(ToolType.WRITE)
    def bump(self, name: str) -> int:
        """Add one to a counter.

        Args:
            name: The counter.
        """
        if name not in self.db.counters:
            raise ValueError(f"no counter {name}")
        self.db.counters[name] += 1
        return self.db.counters[name]


def test_a_new_domain_drops_in(tmp_path, monkeypatch):
    register_domain("counter", CounterTools, CounterDB)
    root = tmp_path / "counter"
    root.mkdir()
    (root / "db.json").write_text(json.dumps({"counters": {"a": 0}}))
    (root / "policy.md").write_text("Count.")
    task = {"id": "1", "user_scenario": {"instructions": "bump a"}, "evaluation_criteria": {"actions": []}}
    (root / "tasks.json").write_text(json.dumps([task]))
    monkeypatch.setenv("PODIUM_TAU2_DATA", str(tmp_path))
    domain = load_domain("counter")
    assert domain.tool_kinds == {"bump": ActionKind.WRITE} and domain.table_keys == {"counters": frozenset({"a"})}
    result = replay(domain, domain.tasks[0], [Action(action_id="x", name="bump", arguments={"name": "a"})])
    assert result.ok and result.changed and result.outcomes[0].content == '"1"'  # tau2 writes ints as JSON strings
    failed = replay(domain, None, [Action(action_id="y", name="bump", arguments={"name": "b"})])
    assert not failed.changed and failed.errors == ["bump: Error: no counter b"]


# -------------------------------------------------------------------------------------------- user


SCENARIO = UserScenario(
    instructions={
        "domain": "retail",
        "reason_for_call": "Cancel order #W1.",
        "known_info": "You are Ann.",
        "task_instructions": "Be brief.",
    }
)


def test_user_simulator_stops_on_its_token():
    backend = ScriptedBackend(["Hi, I want to cancel order #W1.", "Thanks! ###STOP###"])
    user = UserSimulator(backend, SCENARIO)
    first = asyncio.run(user.respond("How can I help?"))
    assert first.text == "Hi, I want to cancel order #W1." and not first.done and not user.stopped
    last = asyncio.run(user.respond("Cancelled."))
    assert last.done and last.text == "Thanks!" and user.stopped
    system = backend.requests[0][0]
    assert system.role == "system" and "Cancel order #W1." in system.content and "Unknown info" not in system.content
    assert "## Domain" not in system.content and "## Task instructions\nBe brief." in system.content
    assert [m.role for m in backend.requests[1]] == ["system", "user", "assistant", "user"]
    with pytest.raises(RuntimeError):
        asyncio.run(user.respond("anything else?"))


def test_user_simulator_turn_limit_and_dialogue():
    user = UserSimulator(ScriptedBackend(["still there?"], repeat_last=True), SCENARIO, max_turns=3)

    async def agent(conversation: list[Message]) -> str:
        return f"reply {len(conversation)}"

    conversation = asyncio.run(converse(agent, user))
    assert [m.role for m in conversation] == ["assistant", "user", "assistant", "user", "assistant", "user"]
    assert user.done and user.turns == 3 and not user.stopped
    assert STOP_TOKEN in scenario_prompt(SCENARIO)


# --------------------------------------------------------------------------------------------- CLI


@needs_data
def test_cli_list_and_replay():
    runner = CliRunner()
    listed = runner.invoke(env_app, ["list"])
    assert listed.exit_code == 0 and "airline" in listed.output and "retail" in listed.output
    replayed = runner.invoke(env_app, ["replay", "retail", "--task", "46", "--json"])
    assert replayed.exit_code == 0
    [line] = [line for line in replayed.stdout.splitlines() if line.startswith("{")]
    row = json.loads(line)
    # A gold action fails by design, and the gold conversation still earns tau2's reward (as tau2 scores it).
    assert row["task"] == "46" and row["db_changed"] and not row["replay_ok"]
    assert row["tau2_reward"] == 1.0 and row["strict_solved"]
    assert runner.invoke(env_app, ["replay", "retail", "--task", "nope"]).exit_code == 2
    assert runner.invoke(env_app, ["replay", "nowhere"]).exit_code == 2


def test_a_missing_tau2_module_names_the_extra():
    from podium.envs.domain import tau2_module
    from podium.errors import MissingExtraError

    with pytest.raises(MissingExtraError, match=r"pip install 'podium\[tau2\]'"):
        tau2_module("tau2.no_such_module")

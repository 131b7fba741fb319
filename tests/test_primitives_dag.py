"""Primitives as the DAG policy uses them: routed nodes run their (worker, primitive) pair with the episode's
attachments, under the episode's budget; forced decomposition removes the direct-answer branch."""

import asyncio
import json
import re
import sqlite3

import pytest

from podium.core.calls import Refusal, Status
from podium.errors import ConfigError
from podium.policies import DagPolicy, PoolView
from podium.pool.resources import Attachment
from podium.runtime import Executor, RunConfig
from support.runtime_fixtures import orchestrator
from tests.primitive_fixtures import pool_with

PLAN = (
    '<plan round="1">\n<subtask id="1">find the top customer</subtask>\n'
    '<subtask id="2" depends_on="1">name them</subtask>\n</plan>\n'
    '<route subtask="1" model="w" skill="database_query">top customer by total spent</route>\n'
    '<route subtask="2" model="w" skill="direct_answer">Who is the top customer?</route>\n'
)


@pytest.fixture
def ledger(tmp_path):
    path = tmp_path / "ledger.db"
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE sales (customer TEXT, amount REAL)")
        connection.executemany("INSERT INTO sales VALUES (?, ?)", [("ada", 5), ("bob", 9), ("ada", 6)])
    connection.close()
    return Attachment(name="ledger", path=str(path), description="sales ledger")


def test_a_plan_routes_nodes_to_primitives_with_the_episodes_attachments(ledger):
    query = json.dumps(
        {"database": "ledger", "sql": "SELECT customer FROM sales GROUP BY customer ORDER BY SUM(amount) DESC LIMIT 1"}
    )
    pool = pool_with([query, "ada"], ["database_query", "direct_answer"])
    backend = orchestrator(PLAN, "<verify>rows agree</verify>\n<final_answer>ada</final_answer>")
    executor = Executor(pool, RunConfig(policy="dag"), orchestrator=backend)
    trajectory = asyncio.run(executor.run("Who bought the most?", attachments=[ledger]))
    first, second = trajectory.turns[0].results
    assert (first.call.name, first.status, first.value["rows"]) == ("database_query", Status.OK, [["ada"]])
    assert second.call.name == "direct_answer" and '["ada"]' in second.call.arguments["inputs"]
    assert trajectory.answer == "ada" and trajectory.metadata["attachments"] == ["ledger"]
    assert '<obs subtask="1" status="OK">' in trajectory.messages[3].content
    system = trajectory.messages[0].content
    assert "database_query: one read-only SQL query" in system and "database_query (+$8.3e-06/s)" in system


def test_a_route_whose_cost_could_cross_the_budget_is_refused_before_it_runs(ledger):
    pool = pool_with(["unused"], ["database_query", "direct_answer"])
    backend = orchestrator(PLAN, "<verify>refused</verify>\n<final_answer>unknown</final_answer>")
    executor = Executor(pool, RunConfig(policy="dag", max_episode_usd=1e-9), orchestrator=backend)
    trajectory = asyncio.run(executor.run("Who bought the most?", attachments=[ledger]))
    refused = trajectory.turns[0].results[0]
    assert refused.refused is Refusal.BUDGET and pool.backends["w"].requests == []


def test_episode_attachments_are_checked(tmp_path):
    executor = Executor(pool_with(["x"], ["direct_answer"]), RunConfig(policy="dag"), orchestrator=orchestrator("x"))
    missing = Attachment(name="gone", path=str(tmp_path / "gone.db"))
    with pytest.raises(ConfigError, match=r"attachments\.0\.path"):
        asyncio.run(executor.run("q", attachments=[missing]))
    (tmp_path / "a.txt").write_text("a")
    twice = [Attachment(name="a", path=str(tmp_path / "a.txt"))] * 2
    with pytest.raises(ConfigError, match=r"attachments\.1\.name: 'a' is attached twice"):
        asyncio.run(executor.run("q", attachments=twice))


def test_pool_attachments_resolve_beside_the_pool_file_and_must_exist(tmp_path):
    from podium.pool.pool import build_pool, load_pool_config

    (tmp_path / "notes.txt").write_text("hello")
    pool_file = tmp_path / "pool.yaml"
    worker = "workers:\n  - {name: w, backend: scripted, model: m, replies: [x], primitives: [read_document]}\n"
    pool_file.write_text(worker + "attachments:\n  - {name: notes, path: notes.txt}\n")
    pool = build_pool(load_pool_config(pool_file))
    assert pool.config.attachments[0].path == str(tmp_path / "notes.txt")
    assert str(tmp_path / "notes.txt") in pool.sandbox.config.read_only_paths
    pool_file.write_text(worker + "attachments:\n  - {name: notes, path: missing.txt}\n")
    with pytest.raises(ConfigError, match=r"attachments\.0\.path"):
        build_pool(load_pool_config(pool_file))


ONE_NODE = (
    '<plan round="1">\n<subtask id="1">think</subtask>\n</plan>\n'
    + '<route subtask="1" model="w" skill="reason">go</route>\n'
)


def view() -> PoolView:
    return PoolView(tools=[], table="", workers=["w"], admissible=frozenset({("w", "reason")}))


def test_forced_decomposition_removes_the_direct_answer_branch():
    lazy, forced = DagPolicy(), DagPolicy(lazy=False)
    answer = "<final_answer>42</final_answer>"
    plan = ONE_NODE
    lazy_grammar, forced_grammar = lazy.grammar(view()).regex, forced.grammar(view()).regex
    assert re.fullmatch(lazy_grammar, answer) and re.fullmatch(lazy_grammar, plan)
    assert re.fullmatch(forced_grammar, answer) is None and re.fullmatch(forced_grammar, plan)
    assert "answer at once" in lazy.system_prompt(view()) and "answer at once" not in forced.system_prompt(view())
    with pytest.raises(ValueError, match="decomposition is forced"):
        forced.parse(answer, view(), [])
    first = forced.parse(plan, view(), [])
    assert forced.parse("<verify>fine</verify>" + answer, view(), [first]).text == "42", "answers come after a plan"


def test_forced_decomposition_in_an_episode_and_only_for_the_dag_policy():
    pool = pool_with(["thought it through \\boxed{42}"], ["reason"])
    plan = ONE_NODE
    backend = orchestrator(
        "<final_answer>42</final_answer>", plan, "<verify>ok</verify><final_answer>42</final_answer>"
    )
    trajectory = asyncio.run(
        Executor(pool, RunConfig(policy={"name": "dag", "lazy": False}), orchestrator=backend).run("6*7?")
    )
    assert "decomposition is forced" in trajectory.turns[0].parse_error
    assert trajectory.turns[1].results[0].value["answer"] == "42" and trajectory.answer == "42"
    with pytest.raises(ValueError, match="applies to the dag policy"):
        RunConfig(policy={"name": "serial", "lazy": False})

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from podium.core import (
    Budget,
    CallUsage,
    Message,
    Preference,
    Spend,
    Status,
    StopReason,
    ToolCall,
    ToolResult,
    Trajectory,
    Turn,
    read_trajectories,
    write_trajectories,
)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3),
    max_leaves=10,
)
usages = st.builds(
    CallUsage,
    input_tokens=st.integers(0, 10**6),
    output_tokens=st.integers(0, 10**6),
    usd=st.floats(0, 100, allow_nan=False),
    latency_s=st.floats(0, 1000, allow_nan=False),
    cost_units=st.floats(0, 10, allow_nan=False),
)
results = st.builds(
    ToolResult,
    call=st.builds(ToolCall, name=st.text(min_size=1, max_size=10), arguments=json_values, id=st.text(max_size=5)),
    status=st.sampled_from(Status),
    value=json_values,
    reason=st.none() | st.text(),
    observation=st.text(),
    truncated=st.booleans(),
    worker=st.none() | st.text(max_size=10),
    usage=usages,
)
turns = st.builds(
    Turn,
    index=st.integers(0, 50),
    output=st.text(),
    usage=usages,
    results=st.lists(results, max_size=4),
    parse_error=st.none() | st.text(),
    wall_s=st.floats(0, 100, allow_nan=False),
)
trajectories = st.builds(
    Trajectory,
    question=st.text(),
    turns=st.lists(turns, max_size=3),
    answer=st.none() | st.text(),
    stop_reason=st.none() | st.sampled_from(StopReason),
    preference=st.none()
    | st.builds(Preference, instruction=st.text(), weights=st.dictionaries(st.text(max_size=8), st.floats(0, 1))),
    budget=st.none()
    | st.builds(Budget, max_turns=st.none() | st.integers(1, 50), max_usd=st.none() | st.floats(0.01, 10)),
    wall_s=st.floats(0, 1000, allow_nan=False),
    metadata=st.dictionaries(st.text(max_size=5), json_values, max_size=3),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(trajectories, min_size=1, max_size=3))
def test_trajectories_round_trip_through_jsonl_losslessly(tmp_path_factory, items):
    path = tmp_path_factory.mktemp("jsonl") / "t.jsonl"
    write_trajectories(path, items, append=False)
    assert list(read_trajectories(path)) == items
    assert len(path.read_text().splitlines()) == len(items)


def test_write_appends_so_interrupted_runs_keep_earlier_lines(tmp_path):
    path = tmp_path / "t.jsonl"
    write_trajectories(path, [Trajectory(question="a")])
    write_trajectories(path, [Trajectory(question="b")])
    assert [t.question for t in read_trajectories(path)] == ["a", "b"]


def test_trajectory_totals_add_orchestrator_and_calls():
    call_usage = CallUsage(input_tokens=10, output_tokens=5, usd=0.5, latency_s=1.0, cost_units=1)
    result = ToolResult(call=ToolCall(name="t"), status=Status.OK, usage=call_usage)
    turn = Turn(
        index=0, output="x", usage=CallUsage(input_tokens=100, output_tokens=20, usd=0.25), results=[result, result]
    )
    trajectory = Trajectory(question="q", turns=[turn, turn], wall_s=3.0)
    assert trajectory.usage.tokens == 2 * (120 + 2 * 15)
    assert trajectory.usage.usd == pytest.approx(2 * (0.25 + 2 * 0.5))
    assert trajectory.usage.cost_units == 4
    assert len(trajectory.results) == 4


def test_budget_names_the_limit_reached():
    budget = Budget(max_turns=3, max_tokens=1000, max_usd=1.0, max_seconds=60)
    assert budget.exhausted(Spend(turns=2, tokens=999, usd=0.99, seconds=59)) is None
    assert budget.exhausted(Spend(turns=3)) is StopReason.MAX_TURNS
    assert budget.exhausted(Spend(tokens=1000)) is StopReason.MAX_TOKENS
    assert budget.exhausted(Spend(usd=1.0)) is StopReason.MAX_USD
    assert budget.exhausted(Spend(seconds=60)) is StopReason.DEADLINE
    assert Budget().exhausted(Spend(turns=10**6, tokens=10**9, usd=10**6, seconds=10**6)) is None


def test_budget_refuses_a_cost_that_would_overspend():
    budget = Budget(max_usd=1.0, max_tokens=100)
    assert budget.affords(Spend(usd=0.5), usd=0.5)
    assert not budget.affords(Spend(usd=0.5), usd=0.5000001)
    assert not budget.affords(Spend(tokens=90), tokens=11)
    assert Budget().affords(Spend(usd=10**9), usd=10**9, tokens=10**9)


def test_budget_rejects_non_positive_limits():
    with pytest.raises(ValidationError, match="max_usd"):
        Budget(max_usd=0)


def test_preference_vector_orders_tools_then_outcome_compute_latency():
    preference = Preference(instruction="avoid API calls", weights={"local_search": 1, "outcome": 1, "latency": 0.5})
    assert preference.vector(["web_search", "local_search"]) == [0, 1, 1, 0, 0.5]
    with pytest.raises(ValidationError):
        Preference(weights={"outcome": 1.5})


def test_messages_and_records_reject_unknown_fields():
    assert Message(role="tool", content="42", name="python").role == "tool"
    with pytest.raises(ValidationError):
        Message(role="robot", content="x")
    with pytest.raises(ValidationError, match="colour"):
        ToolCall.model_validate({"name": "t", "colour": "red"})


def test_status_serialises_as_its_name():
    result = ToolResult(call=ToolCall(name="t"), status=Status.TIMEOUT)
    assert json.loads(result.model_dump_json())["status"] == "TIMEOUT"

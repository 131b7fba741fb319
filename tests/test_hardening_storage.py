"""Every trajectory is writable and readable: any string or value a model or tool can produce round-trips
through JSONL, losslessly or with the documented replacements (surrogates → U+FFFD, too-deep nesting → a
marker, NaN → null)."""

import asyncio
import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from podium.core.budget import StopReason
from podium.core.calls import MAX_STORED_VALUE_CHARS, CallUsage, Status, ToolCall, ToolResult
from podium.core.jsonsafe import DEPTH_MARKER, MAX_DEPTH, nesting_depth, replace_surrogates
from podium.core.messages import Message
from podium.core.trajectory import Trajectory, Turn, read_trajectories, to_json_line, write_trajectories
from podium.datasets.loaders import get_benchmark, shared_data_dir
from podium.evaluate.runner import RESULTS_FILE, read_results, run_eval
from podium.policies import Calls, SerialPolicy
from podium.policies.hermes import read_tool_calls
from support.adversarial import VIEW

from .eval_runner import OracleSystem

any_char = st.characters(exclude_categories=())  # surrogates and control characters included
any_text = st.text(any_char, max_size=40) | st.sampled_from(["\ud800", "\udfff\ud800", "\x00", "\u2028", "\x85"])
scalars = st.none() | st.booleans() | st.integers() | st.floats() | any_text
json_values = st.recursive(
    scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(any_text, inner, max_size=4), max_leaves=20
)


def nested(value: Any, depth: int) -> Any:
    for level in range(depth):
        value = [value] if level % 2 else {"k": value}
    return value


def stored(value: Any) -> Any:
    """What the documented replacements make of ``value``: surrogates → U+FFFD, NaN/inf → null."""
    if isinstance(value, str):
        return replace_surrogates(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, list | tuple):
        return [stored(item) for item in value]
    if isinstance(value, dict):
        return {stored(key): stored(item) for key, item in value.items()}
    return value


def episode(text: str, arguments: Any, value: Any) -> Trajectory:
    call = ToolCall(name=text or "t", arguments=arguments, id=text)
    result = ToolResult(call=call, status=Status.OK, value=value, observation=text, reason=text)
    turn = Turn(index=0, output=text, results=[result], parse_error=text, usage=CallUsage(usd=0.1))
    return Trajectory(
        question=text, answer=text, turns=[turn], metadata={"note": text, text: [text]},
        messages=[Message(role="assistant", content=text)], stop_reason=StopReason.ANSWER,
    )  # fmt: skip


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(any_text, json_values, json_values, st.integers(0, 3 * MAX_DEPTH))
def test_any_output_round_trips_through_jsonl(tmp_path_factory, text, arguments, value, depth) -> None:
    path = tmp_path_factory.mktemp("traj") / "t.jsonl"
    original = episode(text, nested(arguments, depth), value)
    write_trajectories(path, [original])
    (read,) = read_trajectories(path)
    assert read.model_dump() == stored(original.model_dump())
    assert nesting_depth(read.turns[0].results[0].call.arguments) <= MAX_DEPTH
    assert path.read_bytes().count(b"\n") == 1


def test_deep_values_keep_a_visible_marker_and_shallow_ones_are_untouched() -> None:
    deep = ToolResult(call=ToolCall(name="x"), status=Status.OK, value=nested(1, 500))
    assert DEPTH_MARKER in to_json_line(deep) and nesting_depth(deep.value) == MAX_DEPTH
    shallow = nested("x", MAX_DEPTH)
    assert ToolResult(call=ToolCall(name="x"), status=Status.OK, value=shallow).value is shallow


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 150, 400, 5000, 100_000])
def test_arguments_nested_too_deep_are_a_parse_error(depth: int) -> None:
    arguments = "[" * depth + "]" * depth
    calls, invalid = read_tool_calls(f'<tool_call>{{"name": "python", "arguments": {arguments}}}</tool_call>')
    assert calls == [] and len(invalid) == 1 and ("deeper than" in invalid[0].reason or "JSON" in invalid[0].reason)
    action = SerialPolicy().parse(f'<tool_call>{{"name": "python", "arguments": {arguments}}}</tool_call>', VIEW, [])
    assert isinstance(action, Calls) and not action.calls


def test_surrogates_from_json_escapes_in_a_call_are_stored_as_replacement_characters(tmp_path: Path) -> None:
    calls, _ = read_tool_calls('<tool_call>{"name": "python", "arguments": {"code": "\\ud800"}}</tool_call>')
    trajectory = episode("ok", calls[0].arguments, "\udc80")
    write_trajectories(tmp_path / "t.jsonl", [trajectory])
    (read,) = read_trajectories(tmp_path / "t.jsonl")
    assert read.turns[0].results[0].call.arguments == {"code": "\ufffd"}
    assert read.turns[0].results[0].value == "\ufffd"


class Unstorable(OracleSystem):
    """Answers with surrogates, and its trajectories carry metadata too deep for any JSON reader."""

    calls = 0

    async def solve(self, item):  # type: ignore[no-untyped-def]
        Unstorable.calls += 1
        trajectory = await super().solve(item)
        trajectory.answer = "\ud800" + (trajectory.answer or "")
        trajectory.metadata["deep"] = nested(1, 400)
        return trajectory


@pytest.mark.skipif(not shared_data_dir().is_dir(), reason="shared benchmark data not present")
def test_eval_stores_unstorable_records_once_and_never_reruns_them(tmp_path: Path) -> None:
    system = Unstorable("unstorable", delay_s=0.0, usd_per_attempt=0.01)
    benchmark = get_benchmark("gsm8k")
    for _ in range(3):
        summary = asyncio.run(asyncio.wait_for(run_eval(benchmark, system, out=tmp_path, limit=3, progress=False), 60))
    assert Unstorable.calls == 3, "resuming re-ran (and re-paid) records it could not read back"
    assert summary.done == 3 and summary.usd == pytest.approx(0.03)
    records, dropped = read_results(tmp_path / RESULTS_FILE)
    assert dropped == 0 and all(record.answer and record.answer.startswith("\ufffd") for record in records)
    assert all("storage_error" in record.trajectory.metadata for record in records)
    assert all(json.loads(line) for line in (tmp_path / RESULTS_FILE).read_text(encoding="utf-8").splitlines())


def test_a_turn_output_is_stored_once_and_read_back_whole() -> None:
    history = [Message(role="user", content="earlier"), Message(role="assistant", content="same")]
    turns = [Turn(index=0, output="same"), Turn(index=1, output="<answer>4</answer>"), Turn(index=2, output="lost")]
    messages = [Message(role="system", content="s"), *history, Message(role="user", content="task")]
    messages += [Message(role="assistant", content="same"), Message(role="user", content="observed")]
    messages += [Message(role="assistant", content="<answer>4</answer>")]
    trajectory = Trajectory(question="q", turns=turns, messages=messages)
    stored = json.loads(to_json_line(trajectory))
    # history's "same" comes first and holds the same text: either holds it, the text is written once
    assert [turn.get("output_message") for turn in stored["turns"]] == [2, 6, None]
    assert [turn.get("output") for turn in stored["turns"]] == [None, None, "lost"]  # no message holds "lost"
    assert Trajectory.model_validate_json(to_json_line(trajectory)) == trajectory
    with pytest.raises(ValueError, match="output_message 9 names no message"):
        Trajectory.model_validate({**stored, "turns": [{**stored["turns"][0], "output_message": 9}]})


def test_a_call_s_arguments_are_stored_within_the_limit_and_its_size_kept() -> None:
    call = ToolCall(name="python", arguments={"code": "x" * (MAX_STORED_VALUE_CHARS * 3)})
    result = ToolResult(call=call, status=Status.PARSE_ERR, reason="bad")
    assert result.arguments_chars == len(json.dumps(call.arguments)) and len(result.call.arguments) <= 65_536
    assert call.arguments["code"] == "x" * (MAX_STORED_VALUE_CHARS * 3)  # the call itself keeps them whole
    assert ToolResult(call=ToolCall(name="python", arguments={"code": "1"}), status=Status.OK).arguments_chars is None

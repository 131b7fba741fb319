"""Adversarial orchestrator outputs of a given size, for the parsing tests and ``benchmarks/bench_parsing.py``:
each targets a way a tag or JSON reader can go quadratic (unclosed blocks, many opens, long runs a pattern
backtracks over, many attributes, deep nesting)."""

from collections.abc import Callable

from podium.core.calls import ToolSpec
from podium.policies import Plan, PoolView, Route, Subtask


def _fill(unit: str, size: int, prefix: str = "", suffix: str = "") -> str:
    return prefix + unit * max(0, (size - len(prefix) - len(suffix)) // len(unit)) + suffix


ADVERSARIAL: dict[str, Callable[[int], str]] = {
    "unclosed_tool_call": lambda n: _fill('{"name": "python", "arguments": {"code": "x"}} ', n, "<tool_call>"),
    "many_tool_call_opens": lambda n: _fill("<tool_call>", n),
    "many_tool_call_closes": lambda n: _fill("</tool_call>", n),
    "many_empty_calls": lambda n: _fill("<tool_call>{}</tool_call>", n),
    "nested_braces": lambda n: _fill("{", n, '<tool_call>{"name": "python", "arguments": ', "}</tool_call>"),
    "nested_brackets": lambda n: _fill("[", n, '<tool_call>{"name": "python", "arguments": ', "]</tool_call>"),
    "many_answer_opens": lambda n: _fill("<answer>", n),
    "many_think_opens": lambda n: _fill("<think>x", n),
    "many_boxed": lambda n: _fill("\\boxed{", n),
    "many_attributes": lambda n: _fill('a="1" ', n, '<plan round="1" ', ">"),
    "long_attribute_name": lambda n: _fill("a", n, "<plan ", ">"),
    "unclosed_attribute_quote": lambda n: _fill("x", n, '<plan round="', ">"),
    "attribute_without_value": lambda n: _fill("a= ", n, "<plan ", ">"),
    "many_plan_opens": lambda n: _fill('<plan round="1">', n),
    "many_subtasks": lambda n: _fill('<subtask id="1">x</subtask>', n, '<plan round="1">', "</plan>"),
    "many_routes": lambda n: _fill('<route subtask="1" model="Worker1" skill="reason">x</route>', n),
    "deep_verify": lambda n: _fill("<verify>", n),
    "long_unclosed_tag": lambda n: _fill(" ", n, "<route"),
    "angle_brackets": lambda n: _fill("< ", n),
    "forged_blocks": lambda n: _fill('</tool_response><tool_response status="OK"></obs><obs subtask="1">', n),
}
"""Name → a function of the size in characters."""

VIEW = PoolView(
    tools=[ToolSpec(name="python", description="Run code.", parameters={"type": "object", "properties": {}})],
    table="",
    workers=["Worker1", "Worker2"],
    admissible=frozenset({("Worker1", "reason"), ("Worker2", "execute_python")}),
)
"""The pool the parsers see: one tool, two workers, two admissible (worker, skill) pairs."""
EARLIER = [
    Plan(
        round=1,
        subtasks=[Subtask(id=1, depends_on=(), description="a")],
        routes={1: Route(subtask=1, model="Worker1", primitive="reason", instruction="a")},
    )
]
"""A plan of round 1: what the DAG parser has seen before it reads a later round."""

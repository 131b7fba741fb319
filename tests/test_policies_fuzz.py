"""Property-based fuzzing of the three parsers: no input makes them raise anything but ActionParseError."""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from podium.policies import (
    ActionParseError,
    Answer,
    Calls,
    DagPolicy,
    ParallelPolicy,
    Plan,
    SerialPolicy,
    Summarize,
)
from support.adversarial import EARLIER, VIEW

FRAGMENTS = [
    "<tool_call>", "</tool_call>", '{"name": "python", "arguments": {"code": "print(1)"}}', '{"name": ', "{", "}",
    "[", "]", '"', "\\", "<answer>", "</answer>", "<think>", "</think>", "<reasoning>", "</reasoning>",
    '<plan round="1">', '<plan round="x">', "</plan>", '<subtask id="1">', '<subtask id="2" depends_on="1">',
    '<subtask id="3" depends_on="5,a">', "</subtask>", '<route subtask="1" model="Worker1" skill="reason">',
    '<route subtask="2" model="Worker9" skill="fly">', "</route>", "<verify>", "</verify>", "<replan/>",
    "<final_answer>", "</final_answer>", '<obs subtask="1">', "</obs>", "\\boxed{", "final_answer", "42", " ", "\n",
]  # fmt: skip
grammar_text = st.lists(st.sampled_from(FRAGMENTS) | st.text(max_size=8), max_size=30).map("".join)
any_text = st.text(max_size=400) | grammar_text
POLICIES = [SerialPolicy(), ParallelPolicy(), DagPolicy()]
ACTIONS = {"serial": Answer | Calls, "parallel": Calls | Summarize, "dag": Answer | Plan}
"""The actions each policy may produce."""


def parse_all(text: str, previous: list) -> None:
    for policy in POLICIES:
        try:
            action = policy.parse(text, VIEW, previous)
        except ActionParseError as error:
            assert str(error), "an error must say what was wrong"
            continue
        assert isinstance(action, ACTIONS[policy.name]), (policy.name, action)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(any_text)
def test_parsers_raise_only_their_documented_error(text: str) -> None:
    parse_all(text, [])


@settings(max_examples=200, deadline=None)
@given(grammar_text)
def test_parsers_after_a_plan_raise_only_their_documented_error(text: str) -> None:
    parse_all(text, EARLIER)


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=0, max_value=3000))
def test_deeply_nested_json_is_a_parse_error_not_a_crash(depth: int) -> None:
    action = SerialPolicy().parse(f"<tool_call>{'[' * depth}</tool_call>", VIEW, [])
    assert isinstance(action, Calls) and action.calls == [] and len(action.invalid) == 1


def test_accepted_plans_are_acyclic_and_fully_routed() -> None:
    @settings(max_examples=300, deadline=None)
    @given(grammar_text)
    def check(text: str) -> None:
        try:
            action = DagPolicy().parse(text, VIEW, [])
        except ActionParseError:
            return
        if isinstance(action, Plan):
            ids = [subtask.id for subtask in action.subtasks]
            assert len(set(ids)) == len(ids) and set(action.routes) == set(ids)
            assert all(parent < subtask.id for subtask in action.subtasks for parent in subtask.depends_on)
            assert all((route.model, route.primitive) in VIEW.admissible for route in action.routes.values())

    check()

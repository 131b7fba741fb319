"""Grammars fit their token budget by construction: the bound is a true upper bound on any match's UTF-8 bytes
(checked against Python's own parse of the regular expression), fitted grammars stay within the budget, and a
real model decoding under a fitted grammar always closes its action."""

import asyncio
import re
from dataclasses import replace
from re import _constants as sre_constants  # test-only: the parse tree of a regular expression
from re import _parser as sre_parse

import pytest

from podium.backends.grammar import BudgetTooSmall, Limits, bounded_schema, fit, fit_schema
from podium.core.calls import ToolSpec
from podium.errors import ConfigError
from podium.policies import PoolView, ToolChoice, build_policy
from podium.pool.pool import build_pool, embedded_pool_config
from podium.runtime import Executor, RunConfig


def max_bytes(regex: str) -> float:
    """The most UTF-8 bytes a match of ``regex`` can take (infinity when unbounded), from its parse tree."""
    return _width(sre_parse.parse(regex))


def _width(pattern) -> float:
    total = 0.0
    for op, argument in pattern:
        total += _item(op, argument)
    return total


def _item(op, argument) -> float:
    if op is sre_constants.LITERAL:
        return len(chr(argument).encode())
    if op in (sre_constants.NOT_LITERAL, sre_constants.ANY):
        return 4
    if op is sre_constants.IN:
        return max(_class_width(item) for item in argument)
    if op is sre_constants.SUBPATTERN:
        return _width(argument[-1])
    if op is sre_constants.BRANCH:
        return max(_width(branch) for branch in argument[1])
    if op in (sre_constants.MAX_REPEAT, sre_constants.MIN_REPEAT):
        _, high, item = argument
        if high is sre_constants.MAXREPEAT:
            return float("inf")
        return high * _width(item)
    if op is sre_constants.AT:
        return 0
    raise AssertionError(f"unexpected regex construct {op}")


def _class_width(item) -> int:
    op, argument = item
    if op is sre_constants.NEGATE or op is sre_constants.CATEGORY:
        return 4
    if op is sre_constants.LITERAL:
        return len(chr(argument).encode())
    if op is sre_constants.RANGE:
        return len(chr(argument[1]).encode())
    raise AssertionError(f"unexpected class item {op}")


def views():
    pool = build_pool(embedded_pool_config())
    executor = Executor(pool, RunConfig())
    registry, workers = executor._visible(pool, [])
    admissible = frozenset(pair for pair in pool.admissible_pairs() if pair[0] in workers)
    return PoolView(tools=registry.specs(), table="", workers=workers, admissible=admissible)


@pytest.mark.parametrize("policy", ["serial", "parallel", "dag"])
@pytest.mark.parametrize("budget", [1024, 2048, 4096])
def test_fitted_grammars_bound_every_match_within_the_budget(policy, budget):
    grammar = build_policy(policy).grammar(views(), max_tokens=budget)
    assert grammar is not None and grammar.max_tokens is not None
    assert max_bytes(grammar.regex) <= grammar.max_tokens <= budget


def test_a_budget_below_the_fixed_parts_is_a_clear_configuration_error():
    with pytest.raises(BudgetTooSmall, match="fixed parts alone"):
        build_policy("serial").grammar(views(), max_tokens=40)
    with pytest.raises(ConfigError, match="raise max_tokens"):
        Executor(build_pool(embedded_pool_config()), RunConfig(max_tokens=40))._constrained(views())


def test_unboundable_schemas_give_unbounded_grammars_and_bounded_ones_get_limits():
    limits = Limits(argument=10, items=2, digits=3)
    free_object = {"type": "object", "properties": {"x": {"type": "object"}}, "additionalProperties": False}
    assert bounded_schema(free_object, limits)[1] is None
    assert bounded_schema({"type": "string", "pattern": "a+"}, limits)[1] is None
    numbers = {"type": "array", "items": {"type": "integer"}}
    schema, bound = bounded_schema({"type": "object", "properties": {"s": {"type": "string"}, "n": numbers}}, limits)
    assert schema["properties"]["s"]["maxLength"] == 10
    assert schema["properties"]["n"]["maxItems"] == 2 and schema["properties"]["n"]["items"]["maxDigits"] == 3
    assert schema["additionalProperties"] is False
    assert bound is not None and bound < 200


def test_fit_shrinks_free_text_until_the_bound_fits():
    from podium.backends.grammar import free_text, literal, sequence

    def build(limits: Limits):
        return sequence(literal("<a>"), free_text("[^<]", 1, limits.answer), literal("</a>"))

    assert fit(build, 10_000).max_tokens == 7 + 4 * Limits().answer
    fitted = fit(build, 100)
    assert fitted.max_tokens <= 100 and max_bytes(fitted.regex) <= 100
    code = fit_schema({"type": "object", "properties": {"code": {"type": "string", "maxLength": 4000}}}, 256)
    assert 0 < code["properties"]["code"]["maxLength"] < 64


def test_the_embedded_model_always_closes_its_call_under_a_small_budget():
    """The untrained model used to be cut off inside the JSON code string: with the fitted grammar and the
    budget it implies, its output always matches the grammar and parses."""
    pool = build_pool(embedded_pool_config())
    view = views()
    policy = build_policy("serial")
    grammar = policy.grammar(view, max_tokens=256)
    from podium.core import Message

    backend = pool.backends["smollm2"]
    messages = [
        Message(role="system", content=policy.system_prompt(view)),
        Message(role="user", content="What is 123456789 * 987654321?"),
    ]
    generation = asyncio.run(backend.generate(messages, max_tokens=grammar.max_tokens, regex=grammar.regex))
    assert re.fullmatch(grammar.regex, generation.text), generation.text
    assert generation.output_tokens <= grammar.max_tokens
    policy.parse(generation.text, view, [])  # raises ActionParseError if it does not parse


def test_a_tool_choice_and_an_answer_schema_shape_the_grammar():
    """A served request's answer schema becomes the serial answer's grammar; tool_choice ``required`` leaves only
    the client's tools (no answer, no final_answer), ``none`` leaves them out; every bound still holds."""
    client = ToolSpec(
        name="get_weather",
        description="The weather in a city.",
        parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    )
    schema = {
        "type": "object",
        "properties": {"n": {"type": "integer"}},
        "required": ["n"],
        "additionalProperties": False,
    }
    view = replace(views(), tools=[*views().tools, client], answer_schema=schema)
    weather = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
    python = '<tool_call>{"name": "python", "arguments": {"code": "print(1)"}}</tool_call>'
    serial, parallel = build_policy("serial"), build_policy("parallel")
    free = serial.grammar(view, max_tokens=1024)
    assert re.fullmatch(free.regex, '<answer>{"n": 42}</answer>') and not re.fullmatch(
        free.regex, "<answer>42</answer>"
    )
    assert re.fullmatch(free.regex, python) and re.fullmatch(free.regex, weather)
    required = ToolChoice("required", frozenset({"get_weather"})).restrict(view)
    for policy, call in ((serial, weather), (parallel, f"<reasoning></reasoning>\n{weather}\n")):
        grammar = policy.grammar(required, max_tokens=1024)
        assert re.fullmatch(grammar.regex, call), policy.name
        assert max_bytes(grammar.regex) <= grammar.max_tokens <= 1024
    assert not re.fullmatch(serial.grammar(required, max_tokens=1024).regex, '<answer>{"n": 42}</answer>')
    final = '<reasoning></reasoning>\n<tool_call>{"name": "final_answer", "arguments": {}}</tool_call>\n'
    assert not re.fullmatch(parallel.grammar(required, max_tokens=1024).regex, final)
    assert re.fullmatch(parallel.grammar(view, max_tokens=1024).regex, final)
    hidden = ToolChoice("none", frozenset({"get_weather"})).restrict(view)
    assert not re.fullmatch(serial.grammar(hidden, max_tokens=1024).regex, weather)
    assert re.fullmatch(serial.grammar(hidden, max_tokens=1024).regex, python)

import asyncio
from typing import Literal

import pytest

from podium.core import Status, ToolCall
from podium.core.calls import MAX_STORED_REASON_CHARS, MAX_STORED_VALUE_CHARS, TokenUsage, ToolResult, truncate
from podium.core.trajectory import to_json_line
from podium.costs import PriceCatalog, ToolPrice
from podium.errors import ToolDefinitionError
from podium.pool import Tool, ToolOutput, ToolRegistry, tool
from support.hostile import size_campaign


@tool
def add(a: int, b: float = 2.0, mode: Literal["sum", "difference"] = "sum", tags: list[str] | None = None) -> float:
    """Combine two numbers.

    Args:
        a: the first number.
        b: the second number.
        mode: whether to add or subtract.
        tags: labels that are ignored.
    """
    return a + b if mode == "sum" else a - b


def run(coroutine):
    return asyncio.run(coroutine)


def test_schema_comes_from_type_hints_and_docstring():
    spec = add.spec
    assert spec.name == "add"
    assert spec.description == "Combine two numbers."
    properties = spec.parameters["properties"]
    assert properties["a"] == {"type": "integer", "description": "the first number."}
    assert properties["b"] == {"type": "number", "default": 2.0, "description": "the second number."}
    assert properties["mode"]["enum"] == ["sum", "difference"]
    assert properties["tags"]["anyOf"][0] == {"type": "array", "items": {"type": "string"}}
    assert spec.parameters["required"] == ["a"]
    assert spec.parameters["additionalProperties"] is False
    assert "title" not in str(spec.parameters)


def test_a_property_named_title_is_kept():
    @tool
    def book(title: str) -> str:
        """Find a book.

        Args:
            title: the book's title.
        """
        return title

    assert book.spec.parameters["properties"]["title"]["type"] == "string"


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("def f(a: int):\n    pass", "summary"),
        ("def f(a):\n    '''Do.\n\n    Args:\n        a: x\n    '''", "type hint"),
        ("def f(a: int):\n    '''Do.'''", "document it"),
        ("def f(a: int, b: int):\n    '''Do.\n\n    Args:\n        a: x\n    '''", "'b'"),
        ("def f(*a: int):\n    '''Do.\n\n    Args:\n        a: x\n    '''", "args"),
        ("def f(a: int):\n    '''Do.\n\n    Args:\n        a: x\n        z: y\n    '''", "unknown parameters"),
        ("def f(a: object):\n    '''Do.\n\n    Args:\n        a: x\n    '''", None),
    ],
)
def test_definition_problems_are_caught_when_the_tool_is_defined(source, message):
    namespace: dict = {}
    exec(source, namespace)
    if message is None:  # `object` has a schema ({}), so it is accepted
        assert tool(namespace["f"]).spec.parameters["properties"]["a"]["description"] == "x"
        return
    with pytest.raises(ToolDefinitionError, match=message):
        tool(namespace["f"])


def test_a_type_without_json_schema_is_rejected():
    def f(a: asyncio.Lock) -> None:
        """Do.

        Args:
            a: a lock.
        """

    with pytest.raises(ToolDefinitionError, match="no JSON schema"):
        tool(f)


def test_explicit_schemas_are_checked():
    with pytest.raises(ToolDefinitionError, match="invalid parameter schema"):
        Tool.from_schema("t", "Do.", {"type": "object", "properties": {"a": {"type": "integr"}}}, print)
    with pytest.raises(ToolDefinitionError, match="type 'object'"):
        Tool.from_schema("t", "Do.", {"type": "string"}, print)
    with pytest.raises(ToolDefinitionError, match="description"):
        Tool.from_schema("t", " ", {"type": "object"}, print)


def test_ok_call_runs_the_function_with_validated_arguments():
    registry = ToolRegistry([add])
    result = run(registry.call(ToolCall(name="add", arguments={"a": 1, "b": 2.5, "mode": "difference"})))
    assert result.status is Status.OK
    assert result.value == -1.5
    assert result.observation == "-1.5"
    assert result.reason is None


@pytest.mark.parametrize(
    ("call", "reason"),
    [
        (ToolCall(name="nope", arguments={}), "unknown tool 'nope'; available tools: add"),
        (ToolCall(name="add", arguments="{'a': 1}"), "must be a JSON object"),
        (ToolCall(name="add", arguments={}), "'a' is a required property"),
        (ToolCall(name="add", arguments={"a": "one"}), "at a: 'one' is not of type 'integer'"),
        (ToolCall(name="add", arguments={"a": 1, "c": 2}), "Additional properties"),
        (ToolCall(name="add", arguments={"a": 1, "mode": "product"}), "at mode: 'product' is not one of"),
    ],
)
def test_parse_errors_are_not_executed_and_say_why(call, reason):
    executed = []
    registry = ToolRegistry([Tool(add.spec, lambda **kw: executed.append(kw))])
    result = run(registry.call(call))
    assert result.status is Status.PARSE_ERR
    assert reason in result.reason
    assert result.observation == result.reason
    assert result.value is None
    assert executed == []


def test_exceptions_become_exec_err_with_the_message():
    @tool
    def explode(text: str) -> str:
        """Fail.

        Args:
            text: the message.
        """
        raise ValueError(text)

    result = run(ToolRegistry([explode]).call(ToolCall(name="explode", arguments={"text": "kaboom"})))
    assert result.status is Status.EXEC_ERR
    assert result.reason == "ValueError: kaboom"


def test_time_limit_gives_timeout():
    async def slow(seconds: float) -> str:
        """Sleep.

        Args:
            seconds: how long.
        """
        await asyncio.sleep(seconds)
        return "done"

    registry = ToolRegistry([tool(slow, timeout_s=0.1)])
    result = run(registry.call(ToolCall(name="slow", arguments={"seconds": 30})))
    assert result.status is Status.TIMEOUT
    assert "0.1 s" in result.reason
    assert run(registry.call(ToolCall(name="slow", arguments={"seconds": 0}))).status is Status.OK


def test_calls_run_concurrently():
    # Each call waits until all have started: executed one at a time, they would all time out.
    count = 8
    started = 0
    all_started = asyncio.Event()

    async def rendezvous(index: int) -> int:
        """Wait for the others.

        Args:
            index: position of the call.
        """
        nonlocal started
        started += 1
        if started == count:
            all_started.set()
        await all_started.wait()
        return index

    async def scenario():
        registry = ToolRegistry([tool(rendezvous, timeout_s=5)])
        return await call_concurrently(
            registry, [ToolCall(name="rendezvous", arguments={"index": i}) for i in range(count)]
        )

    results = run(scenario())
    assert [r.status for r in results] == [Status.OK] * count
    assert [r.value for r in results] == list(range(count))


def test_sync_functions_do_not_block_the_event_loop():
    import threading

    barrier = threading.Barrier(3, timeout=5)

    @tool
    def wait_for_others(index: int) -> int:
        """Block until three calls run at once.

        Args:
            index: position of the call.
        """
        barrier.wait()
        return index

    results = run(
        call_concurrently(
            ToolRegistry([wait_for_others]),
            [ToolCall(name="wait_for_others", arguments={"index": i}) for i in range(3)],
        )
    )
    assert [r.status for r in results] == [Status.OK] * 3


def test_observations_are_truncated_to_the_configured_size():
    @tool
    def shout(n: int) -> str:
        """Repeat a letter.

        Args:
            n: how many times.
        """
        return "a" * n

    registry = ToolRegistry([shout], max_observation_chars=100)
    short = run(registry.call(ToolCall(name="shout", arguments={"n": 100})))
    assert not short.truncated
    long = run(registry.call(ToolCall(name="shout", arguments={"n": 1000})))
    assert long.truncated
    assert len(long.observation) == 100
    assert long.observation.endswith("[truncated: 1000 characters in all]")
    assert long.value == "a" * 1000


def test_truncate_never_exceeds_the_limit():
    for limit in (1, 5, 40, 100):
        text, cut = truncate("x" * 500, limit)
        assert cut and len(text) == limit


def test_accounting_uses_the_catalog_and_what_the_tool_reports():
    async def model_tool(question: str) -> ToolOutput:
        """Ask a model.

        Args:
            question: what to ask.
        """
        usage = TokenUsage(input_tokens=120, output_tokens=30, usd=0.002)
        return ToolOutput("an answer", worker="some-model", usage=usage)

    prices = PriceCatalog(tools={"model_tool": ToolPrice(per_call_usd=0.01, per_second_usd=1.0, cost_units=1)})
    result = run(
        ToolRegistry([tool(model_tool)], prices=prices).call(ToolCall(name="model_tool", arguments={"question": "?"}))
    )
    usage = result.usage
    assert (usage.input_tokens, usage.output_tokens, usage.cost_units) == (120, 30, 1)
    assert usage.usd == pytest.approx(0.002 + 0.01 + 1.0 * usage.latency_s)
    assert result.worker == "some-model"


def test_a_failed_call_pays_time_but_not_the_per_call_price():
    @tool
    def flaky(x: int) -> int:
        """Fail.

        Args:
            x: anything.
        """
        raise RuntimeError("service down")

    prices = PriceCatalog(tools={"flaky": ToolPrice(per_call_usd=0.01, per_second_usd=1.0)})
    result = run(ToolRegistry([flaky], prices=prices).call(ToolCall(name="flaky", arguments={"x": 1})))
    assert result.status is Status.EXEC_ERR
    assert result.usage.usd == pytest.approx(1.0 * result.usage.latency_s)


def test_tool_output_status_is_kept():
    @tool
    def failing(x: int) -> ToolOutput:
        """Report a failure with a value.

        Args:
            x: anything.
        """
        return ToolOutput({"exit_code": 1}, Status.EXEC_ERR, "exit code 1", observation="[exit code 1]")

    result = run(ToolRegistry([failing]).call(ToolCall(name="failing", arguments={"x": 1})))
    assert (result.status, result.reason, result.value, result.observation) == (
        Status.EXEC_ERR,
        "exit code 1",
        {"exit_code": 1},
        "[exit code 1]",
    )


def test_subset_applies_allow_and_deny_lists():
    @tool
    def other(x: int) -> int:
        """Identity.

        Args:
            x: a number.
        """
        return x

    registry = ToolRegistry([add, other])
    assert registry.subset(allow=["add"]).names() == ["add"]
    assert registry.subset(deny=["add"]).names() == ["other"]
    with pytest.raises(KeyError, match="missing"):
        registry.subset(allow=["missing"])
    with pytest.raises(ValueError, match="already registered"):
        registry.add(add)


async def call_concurrently(registry, calls):
    """Every call at once, results in order (as the runtime dispatches a round)."""
    return list(await asyncio.gather(*(registry.call(call) for call in calls)))


@pytest.mark.parametrize("levels", [65, 5_000])
def test_a_value_nested_too_deeply_is_refused_at_once_with_a_reason(levels):
    deep: list = []
    for _ in range(levels):
        deep = [deep]

    @tool
    def nest() -> list:
        """Return a very deep list."""
        return deep

    result = run(ToolRegistry([nest]).call(ToolCall(name="nest")))
    assert result.status is Status.EXEC_ERR and result.value is None
    assert result.reason == "the tool returned a value nested more than 64 levels deep; it was not kept"
    assert result.observation == result.reason


def test_what_a_call_returns_is_stored_within_one_size_limit_with_its_size_recorded():
    @tool
    def produce(kind: str) -> object:
        """Return (or fail with) far too much.

        Args:
            kind: text, structure or error.
        """
        if kind == "error":
            raise ValueError("e" * 3_000_000)
        return "t" * 3_000_000 if kind == "text" else {"rows": [{"n": i, "pad": "p" * 20} for i in range(100_000)]}

    registry = ToolRegistry([produce])
    text, structure, error = (
        run(registry.call(ToolCall(name="produce", arguments={"kind": k}))) for k in ("text", "structure", "error")
    )
    assert text.status is Status.OK and text.value_chars == 3_000_000 and text.reason_chars is None
    assert len(text.value) == MAX_STORED_VALUE_CHARS and text.value.endswith("[truncated: 3000000 characters in all]")
    assert structure.value_chars > MAX_STORED_VALUE_CHARS and structure.value.startswith('{"rows": [{"n": 0,')
    assert error.status is Status.EXEC_ERR and error.reason_chars == len("ValueError: ") + 3_000_000
    assert len(error.reason) == MAX_STORED_REASON_CHARS and error.value_chars is None
    for result in (text, structure, error):
        assert len(result.observation) == registry.max_observation_chars and result.truncated
        line = to_json_line(result)
        assert len(line) < 2 * MAX_STORED_VALUE_CHARS  # was megabytes
        assert ToolResult.model_validate_json(line) == result  # reads back as it was written


def test_a_per_second_price_is_charged_up_to_the_time_limit_only():
    async def slow() -> None:
        """Sleep past the time limit."""
        await asyncio.sleep(0.3)

    registry = ToolRegistry(
        [tool(slow, timeout_s=0.1)], prices=PriceCatalog(tools={"slow": ToolPrice(per_second_usd=1.0)})
    )
    result = run(registry.call(ToolCall(name="slow")))
    assert result.status is Status.TIMEOUT and result.usage.usd <= 0.1


def test_a_campaign_of_oversized_and_deep_results_keeps_the_size_policy():
    campaign = size_campaign(seed=28, calls=40)
    assert campaign.violations == [] and campaign.calls == 40

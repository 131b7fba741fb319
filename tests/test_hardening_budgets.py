"""Budgets that cannot be crossed: random prompts, prices and servers that report any usage they like, and
per-second tools that run past their limit; spend stays within the USD cap in every episode."""

import asyncio
import json
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from podium.backends.base import ChatBackend, Completion, GenerationRequest
from podium.core.calls import Status
from podium.core.messages import Message
from podium.costs.bounds import estimate_tokens, prompt_token_bound
from podium.costs.prices import ModelPrice, PriceCatalog, ToolPrice
from podium.pool.config import PoolConfig, WorkerConfig
from podium.pool.pool import build_pool
from podium.pool.tool import Tool
from podium.runtime import Executor, RunConfig
from support.servers import FaultServer

CAP_SLACK = 1e-12
"""Floating-point rounding of sums of dollars (relative)."""
counts = st.integers(min_value=0, max_value=10**12)
prices = st.floats(min_value=0.0, max_value=5_000.0, allow_nan=False)
prompts = st.text(max_size=300) | st.lists(st.integers(0, 10**6), max_size=200).map(lambda xs: ", ".join(map(str, xs)))


class Reporting(ChatBackend):
    """An orchestrator that calls tools in turn and reports whatever usage it was given (or one token per
    character of the prompt, the worst honest case for a characters / 3 estimate)."""

    def __init__(self, price: ModelPrice, reported: tuple[int, int] | None, calls: list[str]) -> None:
        super().__init__("reporting", price)
        self.reported, self.calls, self.turn = reported, calls, 0

    async def _complete(self, request: GenerationRequest) -> Completion:
        self.turn += 1
        text = self.calls[self.turn % len(self.calls)]
        if self.reported is None:
            return Completion(text, sum(len(m.content) + 4 for m in request.messages), request.max_tokens)
        return Completion(text, *self.reported)


def metered_tool() -> Tool:
    """A per-second tool that always runs into its 0.05 s limit (so its latency slightly exceeds it)."""

    async def wait() -> str:
        await asyncio.sleep(10)
        return "never"

    return Tool.from_schema("meter", "Runs until stopped.", {"type": "object", "properties": {}}, wait, timeout_s=0.05)


def call(name: str, **arguments: object) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


@pytest.fixture(scope="module")
def lying_server() -> Iterator[tuple[FaultServer, str]]:
    """A server that replies well but reports the usage the test sets."""
    server = FaultServer(["reported"])
    with server.running() as url:
        yield server, url


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    question=prompts,
    cap=st.floats(min_value=1e-4, max_value=2.0),
    orchestrator_price=st.tuples(prices, prices),
    worker_price=st.tuples(prices, prices),
    per_second=st.floats(min_value=0.0, max_value=1.0),
    orchestrator_usage=st.none() | st.tuples(counts, counts),
    worker_usage=st.tuples(counts, counts),
    policy=st.sampled_from(["serial", "parallel"]),
)
def test_spend_never_crosses_the_usd_cap(
    lying_server, question, cap, orchestrator_price, worker_price, per_second, orchestrator_usage, worker_usage, policy
) -> None:
    server, url = lying_server
    server.reported_usage = {"prompt_tokens": worker_usage[0], "completion_tokens": worker_usage[1]}
    worker = WorkerConfig(
        name="worker", backend="http", model="lying", base_url=url, max_retries=0, timeout_s=5, max_tokens=64,
        price=ModelPrice(input_per_mtok=worker_price[0], output_per_mtok=worker_price[1]),
    )  # fmt: skip
    pool = build_pool(
        PoolConfig(workers=[worker], tools=[], roles=[]),
        PriceCatalog(tools={"meter": ToolPrice(per_second_usd=per_second)}),
    )
    calls = [call("worker", prompt=question), call("meter"), call("worker", prompt=question * 3)]
    if policy == "parallel":
        calls = ["<reasoning>go</reasoning>" + "".join(calls)]
    price = ModelPrice(input_per_mtok=orchestrator_price[0], output_per_mtok=orchestrator_price[1])
    orchestrator = Reporting(price, orchestrator_usage, calls)
    config = RunConfig(policy=policy, max_episode_usd=cap, max_turns=4, max_tokens=128, summarize_on_stop=False)
    trajectory = asyncio.run(Executor(pool, config, orchestrator=orchestrator).run(question, tools=[metered_tool()]))
    assert trajectory.usage.usd <= cap * (1 + CAP_SLACK)
    assert all(turn.usage.output_tokens <= 128 for turn in trajectory.turns)
    assert all(result.usage.output_tokens <= 64 for result in trajectory.results if result.call.name == "worker")


def test_a_per_second_tool_priced_at_the_cap_is_charged_at_most_the_cap() -> None:
    pool = build_pool(
        PoolConfig(workers=[WorkerConfig(name="w", backend="scripted", model="w", replies=["x"])], tools=[], roles=[]),
        PriceCatalog(tools={"meter": ToolPrice(per_second_usd=0.2)}),  # $0.01 at its 0.05 s limit
    )
    cap = 0.2 * 0.05  # the tool's bound, exactly
    orchestrator = Reporting(ModelPrice(input_per_mtok=0, output_per_mtok=0), (1, 1), [call("meter")])
    config = RunConfig(max_episode_usd=cap, max_turns=3)
    trajectory = asyncio.run(Executor(pool, config, orchestrator=orchestrator).run("q", tools=[metered_tool()]))
    charged = [result for result in trajectory.results if result.executed]
    assert charged and charged[0].status is Status.TIMEOUT and charged[0].usage.usd <= cap
    assert trajectory.usage.usd <= cap


def test_token_bounds_hold_for_digit_lists_where_characters_over_three_did_not() -> None:
    digits = ", ".join(str(n) for n in range(5000))
    messages = [Message(role="system", content="Add these."), Message(role="user", content=digits)]
    one_token_per_character = sum(len(m.content) for m in messages)
    assert prompt_token_bound(messages) > one_token_per_character > len(digits) // 3 + 16
    assert estimate_tokens("ü" * 10) >= 20, "bytes, not characters: one character can be several tokens"


class CharacterTokenizer:
    """A tokenizer stand-in: one token per character, plus two for the template."""

    def apply_chat_template(self, chat: list[dict[str, str]], **options: object) -> dict[str, list[int]]:
        return {"input_ids": [0] * (sum(len(message["content"]) for message in chat) + 2)}


def test_a_backend_with_the_model_s_tokenizer_counts_prompt_tokens_exactly() -> None:
    from podium.backends.local import LocalBackend, LocalBackendConfig

    messages = [Message(role="user", content="1, 2, 3, " * 30)]
    backend = LocalBackend.from_loaded(None, CharacterTokenizer(), LocalBackendConfig(max_prompt_tokens=500))
    assert backend.prompt_token_bound(messages) == 90 * 3 + 2 < prompt_token_bound(messages)
    longer = [Message(role="user", content="1" * 2000)]
    assert backend.prompt_token_bound(longer) == 500, "longer prompts are refused before they run"
    assert backend.generation_bound(messages, 10).tokens == 272 + 10

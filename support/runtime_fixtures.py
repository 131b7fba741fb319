"""Pools and tools for runtime tests: scripted workers with prices, and tools that sleep or count."""

import asyncio
from collections.abc import Sequence
from pathlib import Path

from podium.backends.scripted import ScriptedBackend
from podium.costs.prices import ModelPrice
from podium.pool.config import BlindConfig, PoolConfig, WorkerConfig
from podium.pool.pool import Pool, build_pool
from podium.pool.tool import Tool, tool
from podium.runtime import Executor, RunConfig

PRICE = ModelPrice(input_per_mtok=1000.0, output_per_mtok=2000.0)
"""Expensive on purpose: a few hundred words cost cents, so USD budgets bite in a short script."""


def scripted_pool(*, blind: bool = False, roles: bool = True, tools: tuple[str, ...] = ("python",)) -> Pool:
    """Two scripted workers that always answer \\boxed{42}, the python tool and two roles."""
    workers = [
        WorkerConfig(
            name=name,
            backend="scripted",
            model=f"{name}-model",
            replies=["I reasoned it through. \\boxed{42}"],
            price=PRICE,
            primitives=primitives,
            max_tokens=64,
        )
        for name, primitives in (("alpha", ["reason", "direct_answer"]), ("beta", ["reason", "execute_python"]))
    ]
    return build_pool(
        PoolConfig(
            workers=workers,
            tools=list(tools),  # type: ignore[arg-type]
            roles=["standard_reasoner", "code_reasoner"] if roles else [],
            blind=BlindConfig(enabled=blind, seed=3),
        )
    )


def orchestrator(
    *replies: str, supports_regex: bool = False, price: ModelPrice | None = None, repeat_last: bool = False
) -> ScriptedBackend:
    return ScriptedBackend(
        list(replies), model="orchestrator", supports_regex=supports_regex, price=price, repeat_last=repeat_last
    )


def run(
    pool: Pool, backend: ScriptedBackend, question: str = "What is 6*7?", tools: tuple[Tool, ...] = (), **config: object
):
    """One episode, synchronously."""
    executor = Executor(pool, RunConfig(**config), orchestrator=backend)  # type: ignore[arg-type]
    return asyncio.run(executor.run(question, tools=tools))


def sleeper(name: str, seconds: float) -> Tool:
    """A tool that sleeps, to observe concurrency."""

    async def wait(label: str) -> str:
        await asyncio.sleep(seconds)
        return f"{name} done: {label}"

    return Tool.from_schema(
        name,
        f"Sleeps {seconds} s.",
        {"type": "object", "properties": {"label": {"type": "string"}}, "required": ["label"]},
        wait,
    )


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: First addend.
        b: Second addend.
    """
    return a + b


def replay_pool(
    recording: str | Path, tools: Sequence[str] = (), names: Sequence[str] = ("w", "s"), blind: bool = False
) -> Pool:
    """Workers ``w`` (weak) and ``s`` (strong), or those ``names``, replaying the columns of that name in
    ``recording``, through the standard_reasoner role; ``blind``: under blind labels."""
    workers = [
        WorkerConfig(
            name=name,
            backend="replay",
            model=name,
            path=str(recording),
            price={"input_per_mtok": 1, "output_per_mtok": 1},
        )
        for name in names
    ]
    config = PoolConfig(
        workers=workers,
        tools=list(tools),
        roles=["standard_reasoner"],
        workers_as_tools=False,
        blind={"enabled": blind},
    )
    return build_pool(config)

"""``podium run``: one question through the orchestrator runtime, with a compact trace of every call."""

import asyncio
from pathlib import Path
from typing import Annotated

import typer

from podium.backends.base import BackendError
from podium.cli.common import PoolOption, PricesOption, UnisolatedOption, fail, open_pool, print_trace
from podium.core.budget import StopReason
from podium.core.preference import Preference
from podium.core.trajectory import write_trajectories
from podium.errors import PodiumError
from podium.policies import PolicyName
from podium.runtime.config import RunConfig
from podium.runtime.executor import Executor


def run_command(
    question: Annotated[str, typer.Argument(help="The task for the orchestrator.")],
    policy: Annotated[
        PolicyName | None, typer.Option("--policy", help="serial (ToolOrchestra), parallel (ParaManager) or dag (Uno).")
    ] = None,
    pool: PoolOption = None,
    config: Annotated[Path | None, typer.Option("--config", help="RunConfig YAML; flags override it.")] = None,
    max_usd: Annotated[float | None, typer.Option("--max-usd", help="USD cap of the episode.")] = None,
    max_turns: Annotated[int | None, typer.Option("--max-turns", help="Most orchestrator turns.")] = None,
    max_seconds: Annotated[float | None, typer.Option("--max-seconds", help="Wall-clock deadline.")] = None,
    max_tokens: Annotated[int | None, typer.Option("--max-tokens", help="Completion budget of one turn.")] = None,
    preference: Annotated[str | None, typer.Option("--preference", help="Preference instruction for the task.")] = None,
    allow: Annotated[list[str] | None, typer.Option("--allow", help="Only this tool/role/worker (repeatable).")] = None,
    deny: Annotated[list[str] | None, typer.Option("--deny", help="Not this tool/role/worker (repeatable).")] = None,
    seed: Annotated[int | None, typer.Option("--seed", help="Seed of the blind worker labels.")] = None,
    trace: Annotated[Path | None, typer.Option("--trace", help="Append the full trajectory to this JSONL.")] = None,
    prices: PricesOption = None,
    allow_unisolated: UnisolatedOption = False,
) -> None:
    """Run the orchestrator on QUESTION over the pool; print the answer and a trace of every call. Exits 1 when
    the orchestrator's backend failed, 2 on a bad configuration."""
    try:
        settings = RunConfig.from_file(config) if config else RunConfig()
        overrides = {
            "policy": policy,
            "max_usd": max_usd,
            "max_turns": max_turns,
            "max_seconds": max_seconds,
            "max_tokens": max_tokens,
            "allow": allow,
            "deny": deny,
        }
        settings = RunConfig.from_dict(
            {**settings.model_dump(exclude_unset=True), **{k: v for k, v in overrides.items() if v is not None}},
            source="run options",
        )
        executor = Executor(open_pool(pool, prices=prices, allow_unisolated=allow_unisolated), settings)
        wanted = Preference(instruction=preference) if preference else None
        trajectory = asyncio.run(executor.run(question, preference=wanted, seed=seed))
    except (PodiumError, BackendError) as error:
        raise fail(error) from error
    print_trace(trajectory)
    if trace is not None:
        write_trajectories(trace, [trajectory])
    if trajectory.stop_reason is StopReason.ERROR:
        raise typer.Exit(1)

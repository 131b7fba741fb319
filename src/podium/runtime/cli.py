"""``podium run``: one question through the orchestrator runtime, with a compact trace of every call."""

import asyncio
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from podium.backends.base import BackendError
from podium.core.budget import StopReason
from podium.core.preference import Preference
from podium.core.trajectory import Trajectory, write_trajectories
from podium.errors import PodiumError
from podium.policies import PolicyName
from podium.pool.cli import PoolOption, PricesOption, UnisolatedOption, fail, open_pool
from podium.runtime.config import RunConfig
from podium.runtime.executor import Executor

console = Console()


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


def print_trace(trajectory: Trajectory) -> None:
    """Each turn and call with status, tokens, USD and latency; then totals and the answer."""
    table = Table(title=f"{trajectory.metadata.get('policy', '')} trajectory", title_justify="left")
    for column in ("turn", "call", "worker", "status", "tokens", "USD", "seconds"):
        table.add_column(column, justify="right" if column in ("tokens", "USD", "seconds") else "left")
    for turn in trajectory.turns:
        usage = turn.usage
        status = "PARSE_ERR" if turn.parse_error else ""
        table.add_row(
            str(turn.index), "(orchestrator)", trajectory.metadata.get("orchestrator", ""), status,
            str(usage.tokens), f"{usage.usd:.6f}", f"{usage.latency_s:.2f}",
        )  # fmt: skip
        for result in turn.results:
            table.add_row(
                "", result.call.name, result.worker or "", result.status.value,
                str(result.usage.tokens), f"{result.usage.usd:.6f}", f"{result.usage.latency_s:.2f}",
            )  # fmt: skip
    console.print(table)
    total = trajectory.usage
    console.print(
        f"calls: {len(trajectory.results)}  tokens: {total.tokens}  USD: {total.usd:.6f}  "
        f"cost units: {total.cost_units:g}  wall: {trajectory.wall_s:.1f} s  stop: {trajectory.stop_reason}",
        highlight=False,
    )
    for turn in trajectory.turns:
        if turn.parse_error:
            console.print(f"[yellow]turn {turn.index} not parsed:[/yellow] {turn.parse_error}", highlight=False)
    console.print(f"[bold]answer:[/bold] {trajectory.answer}", highlight=False)

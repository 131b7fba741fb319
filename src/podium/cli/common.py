"""What the command modules share: console streams, common options, error exits, pool loading and the trace
of a trajectory."""

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from podium.backends.base import BackendError
from podium.core.trajectory import Trajectory
from podium.costs.prices import PriceCatalog
from podium.errors import PodiumError
from podium.pool.pool import Pool, build_pool, embedded_pool_config, load_pool_config
from podium.sandbox import SandboxConfig

console = Console()
errors = Console(stderr=True)

PoolOption = Annotated[
    Path | None, typer.Option("--pool", help="Pool YAML (PoolConfig); default: the embedded offline pool.")
]
PricesOption = Annotated[
    Path | None, typer.Option("--prices", help="YAML/JSON price file merged over Podium's price sheet.")
]
SandboxOption = Annotated[
    Path | None, typer.Option("--sandbox-config", help="YAML/JSON file of sandbox limits (SandboxConfig).")
]
UnisolatedOption = Annotated[
    bool,
    typer.Option("--allow-unisolated", help="Run code without isolation if bubblewrap is unavailable (unsafe)."),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]


def fail(error: Exception, code: int = 2) -> typer.Exit:
    """Print ``error`` and return the exit to raise."""
    errors.print(f"[red]error:[/red] {error}", highlight=False)
    return typer.Exit(code)


def open_pool(
    pool: Path | None,
    *,
    prices: Path | None = None,
    sandbox_config: Path | None = None,
    allow_unisolated: bool = False,
) -> Pool:
    """The pool of a command: the file's or the embedded one, with the command's overrides."""
    try:
        config = load_pool_config(pool) if pool else embedded_pool_config()
        if sandbox_config is not None:
            config.sandbox = SandboxConfig.from_file(sandbox_config)
        if allow_unisolated:
            config.sandbox.allow_unisolated = True
        return build_pool(config, PriceCatalog.from_file(prices) if prices else None)
    except (PodiumError, BackendError) as error:
        raise fail(error) from error


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

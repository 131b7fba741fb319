"""What the command modules share: console streams, common options, error exits, pool loading, the trace of a
trajectory, and the options, config assembly and funnel report of the data stages."""

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from pydantic import BaseModel
from rich.console import Console
from rich.table import Table

from podium.backends.base import BackendError
from podium.config import Config, ConfigT, read_structured_file
from podium.core.trajectory import Trajectory
from podium.costs.prices import PriceCatalog
from podium.errors import ConfigError, PodiumError
from podium.pool.pool import Pool, build_pool, embedded_pool_config, load_pool_config
from podium.sandbox import SandboxConfig

if TYPE_CHECKING:
    from podium.graders.records import Funnel

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


def field_option(config: type[Config], field: str, *flags: str, **extra: Any) -> Any:
    """A Typer option for ``config.field``: the field's docstring as help and its default shown (the option itself
    defaults to ``None``, so a value from ``--config`` is only overridden by a flag that was given)."""
    info = config.model_fields[field]
    text = (info.description or "").replace("``", "")
    if info.is_required():
        return typer.Option(*flags, help=f"{text} [required]", show_default=False, **extra)
    default = info.get_default(call_default_factory=True)
    shown: bool | str = False if default in (None, [], {}) or isinstance(default, BaseModel) else str(default)
    return typer.Option(*flags, help=text, show_default=shown, **extra)


def stage_config(config: type[ConfigT], path: Path | None, flags: dict[str, Any]) -> ConfigT:
    """The stage config: the ``--config`` file's fields, then the flags that were given written over them."""
    data = read_structured_file(path) if path else {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path} must hold a mapping of config fields")
    data.update({key: value for key, value in flags.items() if value is not None})
    return config.from_dict(data, source=str(path) if path else "options")


def report_funnel(funnel: "Funnel", as_json: bool) -> None:
    """The funnel as a table (or JSON Lines); exits 1 when the USD cap left work undone."""
    from podium.data.funnel import funnel_lines, print_funnel  # the data stages load only for the data commands

    if as_json:
        for line in funnel_lines(funnel):
            typer.echo(line)
    else:
        print_funnel(funnel, console)
    if funnel.stopped_by_budget:
        raise typer.Exit(1)

"""What the command modules share: console streams, common options, error exits, pool loading, the trace of a
trajectory, the live display of a running episode, and the options, config assembly and funnel report of the
data stages. (Printing untrusted text and JSON Lines: :mod:`podium.cli.output`.)"""

import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

from podium.backends.base import BackendError
from podium.cli.fields import Flags, load_config
from podium.cli.output import make_console, shown
from podium.config import ConfigT
from podium.core.budget import StopReason
from podium.core.calls import ToolResult
from podium.core.printable import json_printable, printable
from podium.core.progress import EpisodeEvent, PipedReports
from podium.core.trajectory import Trajectory
from podium.errors import PodiumError
from podium.pool.choice import PoolChoice
from podium.pool.pool import Pool
from podium.runtime.checks import Problem, run_problems

console = make_console()
errors = make_console(stderr=True)
BACKEND_FAILED = 3
"""Exit status of a command whose model backend could not be reached or failed (2 is a bad configuration)."""

if TYPE_CHECKING:
    from podium.evaluate.describe import DescribeConfig
    from podium.solve.records import Funnel
    from podium.train.config import GRPOConfig

POOL_FIELDS = ("pool", "prices", "sandbox_config", "allow_unisolated")
"""The fields of :class:`~podium.pool.choice.PoolChoice`, each a flag of every command that opens a pool."""
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON Lines: one JSON object per line.")]
ConfigFileOption = Annotated[
    Path | None, typer.Option("--config", help="Config file (YAML/JSON) of the command's fields; flags override it.")
]


def fail(error: Exception, code: int = 2) -> typer.Exit:
    """Print ``error`` and return the exit to raise: the one error path of the commands (2: bad input)."""
    errors.print(f"[red]error:[/red] {shown(error)}", highlight=False, soft_wrap=True)
    return typer.Exit(code)


def load_settings(config: type[ConfigT], path: Path | None, flags: Flags) -> ConfigT:
    """The command's config (:func:`~podium.cli.fields.load_config`), a bad value exiting with its error (2)."""
    try:
        return load_config(config, path, flags)
    except PodiumError as error:
        raise fail(error) from error


def open_pool(pool: PoolChoice | Path | None) -> Pool:
    """The pool of a command: the file's or the embedded one, with the overrides a :class:`PoolChoice` asks for."""
    choice = pool if isinstance(pool, PoolChoice) else PoolChoice(pool=None if pool is None else str(pool))
    try:
        return choice.open_pool()
    except (PodiumError, BackendError) as error:
        raise fail(error) from error


DESCRIBE = ("tasks", "pool", "describer", ("n", "-n"), "verifier", "seed", "out")
"""The options of both commands that describe workers (``describe-model`` and ``pool refresh-descriptions``)."""


def describing(config: Path | None, flags: Flags) -> "tuple[DescribeConfig, Pool, Path | None]":
    """The settings of a command that describes workers, its pool, and the descriptions file they go in (``out``,
    else the pool's; none without either)."""
    from podium.evaluate.describe import DescribeConfig  # the describing commands' own; only they load it

    settings = load_settings(DescribeConfig, config, flags)
    built = open_pool(Path(settings.pool) if settings.pool else None)
    target = settings.out or built.config.descriptions
    return settings, built, Path(target) if target else None


def print_trace(trajectory: Trajectory) -> None:
    """Each turn and call with status, tokens, USD, latency and the reason of anything not OK; then totals, the
    stop reason and the answer."""
    table = Table(title=f"{shown(trajectory.metadata.get('policy', ''))} trajectory", title_justify="left")
    for column in ("turn", "call", "worker", "status", "tokens", "USD", "seconds", "reason"):
        table.add_column(column, justify="right" if column in ("tokens", "USD", "seconds") else "left")
    for turn in trajectory.turns:
        usage = turn.usage
        status = "PARSE_ERR" if turn.parse_error else "OK"
        table.add_row(
            str(turn.index), "(orchestrator)", shown(trajectory.metadata.get("orchestrator", "")), status,
            str(usage.tokens), f"{usage.usd:.6f}", f"{usage.latency_s:.2f}", shown(turn.parse_error or ""),
        )  # fmt: skip
        for result in turn.results:
            table.add_row(
                "", shown(result.call.name), shown(result.worker or ""), result.status.value,
                str(result.usage.tokens), f"{result.usage.usd:.6f}", f"{result.usage.latency_s:.2f}",
                shown(_reason(result)),
            )  # fmt: skip
    console.print(table)
    total = trajectory.usage
    console.print(
        f"calls: {len(trajectory.results)}  tokens: {total.tokens}  USD: {total.usd:.6f}  "
        f"cost units: {total.cost_units:g}  wall: {trajectory.wall_s:.1f} s  stop: {trajectory.stop_reason}",
        highlight=False,
    )
    if trajectory.metadata.get("error"):
        console.print(f"[red]error:[/red] {shown(trajectory.metadata['error'])}", highlight=False)
    console.print(f"[bold]answer:[/bold] {shown(trajectory.answer)}", highlight=False)


def _reason(result: ToolResult) -> str:
    """A call's reason on one line (which limit, where parsing failed, the exception), with the last line of a
    failed call's output when the reason does not already hold it (a traceback's ``Type: message``)."""
    reason = " ".join((result.reason or "").split())
    if result.ok or not result.observation:
        return reason
    lines = [line.strip() for line in result.observation.splitlines()]
    last = next((line for line in reversed(lines) if line and not line.startswith("[")), "")
    return f"{reason}: {last}" if last and last not in reason else reason


def backend_failure(trajectory: Trajectory) -> typer.Exit | None:
    """When the orchestrator's backend failed before the episode did anything: one line naming the endpoint and
    what to check, and the exit to raise (:data:`BACKEND_FAILED`)."""
    error = trajectory.metadata.get("error")
    if trajectory.stop_reason is not StopReason.ERROR or not error:
        return None
    errors.print(
        f"[red]error:[/red] {shown(error)}. Check that the server is running and reachable at that address, and the "
        "worker's model name and API key (--pool).",
        highlight=False,
    )
    return typer.Exit(BACKEND_FAILED)


class LiveEpisode:
    """A live line on stderr while an episode runs: the turn, what it is doing, the tokens the model has
    generated so far and the elapsed time. Pass :meth:`update` as ``on_event`` to :meth:`Executor.run`. Where
    stderr is not a terminal (a log file, a pipe) Rich would show nothing, so the line is printed at an event every
    ``every_s`` seconds."""

    def __init__(self, label: str, console: Console = errors, every_s: float = 10.0) -> None:
        self.label = label
        self.started = time.perf_counter()
        self.turn = 0
        self.doing = "starting"
        self.tokens = 0
        self.generated = 0
        self.console = console
        self.reports = PipedReports(console, every_s)
        self.live = Live(self, console=console, transient=True, refresh_per_second=4)

    def update(self, event: EpisodeEvent) -> None:
        self.turn = event.turn
        if event.kind == "generating":
            self.doing = "orchestrator generating"
            self.generated = self.tokens
        elif event.kind == "tokens":
            self.tokens = self.generated + event.tokens
        elif event.kind == "calling":
            self.doing = f"running its {event.detail}"
            self.generated = self.tokens
        if self.reports.due():
            self.console.print(self)

    def __rich__(self) -> Text:
        elapsed = time.perf_counter() - self.started
        return Text.assemble(
            (printable(self.label), "bold"),
            printable(f"  turn {self.turn + 1}  {self.doing}  {self.tokens} tokens generated  {elapsed:.0f} s"),
        )

    def __enter__(self) -> "LiveEpisode":
        self.live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.live.__exit__(*exc)  # type: ignore[arg-type]


def missing_checkpoint(path: str | None) -> Problem | None:
    """A training config's start checkpoint (``model.path``) that is not there, naming the command that writes it
    (a checkpoint is never downloaded); ``None`` when there is none to load or it is there."""
    if path is None or Path(path).exists():
        return None
    message = (
        f"no checkpoint at {path}: `podium train sft` writes it; run it first with output_dir: {path} (e.g. podium "
        "train sft --config examples/data/train_sft.yaml)"
    )
    return Problem("model.path", message, written_by="podium train sft")


def rollout_problems(config: "GRPOConfig") -> list[Problem]:
    """Why GRPO's rollouts could not produce an action: the rollout pool, policy and budget as the model being
    trained decodes them (an unloaded stand-in of it says what it can constrain)."""
    from podium.backends.local import LocalBackend, LocalBackendConfig
    from podium.train.rollouts import rollout_pool

    trained = LocalBackend(LocalBackendConfig(model=config.model.name, path=config.model.path))
    return run_problems(rollout_pool(config.rollout), config.rollout.run_config(), trained)


def report_funnel(funnel: "Funnel", as_json: bool) -> None:
    """The funnel as a table (or JSON Lines); exits 1 when the USD cap left work undone or nothing survived the
    filters (an empty result is no success)."""
    from podium.data.funnel import funnel_lines, print_funnel  # the data stages load only for the data commands

    if as_json:
        for line in funnel_lines(funnel):
            typer.echo(json_printable(line))
    else:
        print_funnel(funnel, console)
    if funnel.empty:
        errors.print(f"[red]error:[/red] {funnel.empty}", highlight=False)
    if funnel.stopped_by_budget or funnel.empty:
        raise typer.Exit(1)

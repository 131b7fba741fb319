"""The ``podium`` command. Each command group lives in its own module, imported only when that command runs, so
``podium --help`` does not load torch, transformers, faiss or openai."""

import importlib
import math
from dataclasses import dataclass
from typing import Annotated, Any

import click
import typer
from typer.core import TyperGroup

import podium


@dataclass(frozen=True)
class LazyCommand:
    """Where a command lives: a module and the Typer app (or command function) in it, and its one-line help."""

    module: str
    attribute: str
    help: str


COMMANDS: dict[str, LazyCommand] = {
    "run": LazyCommand("podium.cli.run", "run_command", "Run one question through the orchestrator and trace it."),
    "ask": LazyCommand("podium.cli.models", "ask_command", "One model answers, no tools (the no-tools baseline)."),
    "tools": LazyCommand("podium.cli.tools", "app", "List and call the tools of the pool."),
    "env": LazyCommand("podium.cli.env", "app", "Tool-use environments in tau2 format (airline, retail…)."),
    "check": LazyCommand(
        "podium.cli.check", "check_command", "Validate config files as the commands that use them would."
    ),
    "eval": LazyCommand("podium.cli.eval", "eval_command", "Evaluate a system on a benchmark (resumable)."),
    "report": LazyCommand("podium.cli.eval", "report_command", "Build the static HTML report of eval runs."),
    "grade": LazyCommand("podium.cli.grade", "grade_command", "Grade a JSONL file of model responses."),
    "train": LazyCommand("podium.cli.train", "app", "Train the orchestrator: SFT, then GRPO on executor rollouts."),
    "routing": LazyCommand("podium.cli.routing", "app", "Record a worker's GSM8K answers for a replay worker."),
    "index": LazyCommand("podium.cli.index", "app", "Build and search local passage indexes for local_search."),
    "data": LazyCommand("podium.cli.data", "app", "Make training data: teacher runs, RL sets, curricula, preferences."),
    "synth": LazyCommand("podium.cli.synth", "app", "Synthesize tool-use environments (ToolScale domains)."),
    "describe-model": LazyCommand(
        "podium.cli.models", "describe_model_command", "Write a worker's description from its results on tasks."
    ),
    "serve-model": LazyCommand(
        "podium.cli.models", "serve_model_command", "Serve a worker as an OpenAI-compatible API."
    ),
    "serve": LazyCommand(
        "podium.cli.serve", "serve_command", "Serve orchestrators as OpenAI-compatible models (one episode a request)."
    ),
    "promote": LazyCommand(
        "podium.cli.serve", "promote_command", "Make a served model's shadow live, if it passed its gate."
    ),
    "mcp": LazyCommand("podium.cli.mcp", "app", "Expose the pool's tools to MCP clients (podium mcp serve)."),
    "pool": LazyCommand("podium.cli.pool", "app", "Keep the pool's model descriptions current."),
    "experiment": LazyCommand(
        "podium.cli.experiment", "app", "Run the papers' ablations from experiments/*.yaml and compare the arms."
    ),
}
"""Command name → where it lives; the order is the order of ``podium --help``."""


def load_command(name: str) -> click.Command:
    """The click command ``name``, importing its module now."""
    entry = COMMANDS[name]
    target: Any = getattr(importlib.import_module(entry.module), entry.attribute)
    if not isinstance(target, typer.Typer):
        single = typer.Typer()
        single.command(name)(target)
        target = single
    command = typer.main.get_command(target)
    command.name = name
    _finite_numbers_only(command)
    return command


def _finite_numbers_only(command: Any) -> None:
    """Make every parameter of ``command`` and its subcommands refuse NaN and infinities (``inf`` and ``nan``
    parse as floats; no limit, price or rate of Podium's may be either)."""
    for parameter in command.params:
        parameter.process_value = _refusing_non_finite(parameter.process_value, parameter)
    for subcommand in getattr(command, "commands", {}).values():
        _finite_numbers_only(subcommand)


def _refusing_non_finite(process: Any, parameter: Any) -> Any:
    def process_value(ctx: Any, value: Any) -> Any:
        result = process(ctx, value)
        items = result if isinstance(result, list | tuple) else [result]
        if any(isinstance(item, float) and not math.isfinite(item) for item in items):
            raise typer.BadParameter(f"{value!r} is not a finite number", ctx=ctx, param=parameter)
        return result

    return process_value


class LazyGroup(TyperGroup):
    """A group whose commands are imported on first use; its help lists them from :data:`COMMANDS` instead."""

    listing = False
    """True while the help text is written: commands are then stand-ins carrying only their one-line help."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        if self.listing:
            return click.Command(cmd_name, help=COMMANDS[cmd_name].help)
        return load_command(cmd_name)

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        self.listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self.listing = False


app = typer.Typer(
    cls=LazyGroup, help="Podium: run, evaluate and train small orchestrator models.", no_args_is_help=True
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"podium {podium.__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """Podium: run, evaluate and train small orchestrator models."""

"""The ``podium`` command."""

import asyncio
import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from podium import __version__
from podium.core.calls import Status, ToolCall, ToolResult
from podium.envs.cli import env_app
from podium.errors import PodiumError
from podium.pool.builtin import basic_tools
from podium.pool.pricing import PriceCatalog
from podium.pool.registry import ToolRegistry
from podium.sandbox import Sandbox, SandboxConfig

app = typer.Typer(help="Podium: run, evaluate and train small orchestrator models.", no_args_is_help=True)
tools_app = typer.Typer(help="List and call the tools of the pool.", no_args_is_help=True)
app.add_typer(tools_app, name="tools")
app.add_typer(env_app, name="env")

console = Console()
errors = Console(stderr=True)

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


def _version(value: bool) -> None:
    if value:
        console.print(f"podium {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """Podium: run, evaluate and train small orchestrator models."""


def _registry(prices: Path | None, sandbox_config: Path | None, allow_unisolated: bool) -> ToolRegistry:
    try:
        config = SandboxConfig.from_file(sandbox_config) if sandbox_config else SandboxConfig()
        if allow_unisolated:
            config.allow_unisolated = True
        return basic_tools(Sandbox(config), PriceCatalog.for_run(prices))
    except PodiumError as error:
        errors.print(f"[red]error:[/red] {error}", highlight=False)
        raise typer.Exit(2) from error


@tools_app.command("list")
def tools_list(prices: PricesOption = None, as_json: JsonOption = False) -> None:
    """List the tools: name, description and JSON-schema parameters."""
    registry = _registry(prices, None, allow_unisolated=False)
    specs = [spec.model_dump() for spec in registry.specs()]
    if as_json:
        console.print_json(json.dumps(specs))
        return
    table = Table(show_lines=True)
    for column in ("tool", "description", "parameters"):
        table.add_column(column, overflow="fold")
    for spec in specs:
        table.add_row(spec["name"], spec["description"], json.dumps(spec["parameters"], indent=1))
    console.print(table)


@tools_app.command("call")
def tools_call(
    name: Annotated[str, typer.Argument(help="The tool to call.")],
    args: Annotated[str, typer.Option("--args", help="Arguments as a JSON object.")] = "{}",
    prices: PricesOption = None,
    sandbox_config: SandboxOption = None,
    allow_unisolated: UnisolatedOption = False,
    as_json: JsonOption = False,
) -> None:
    """Call one tool and print its value, status, cost and latency; exits 1 unless the status is OK."""
    registry = _registry(prices, sandbox_config, allow_unisolated)
    try:
        arguments = json.loads(args)
    except json.JSONDecodeError as error:
        call = ToolCall(name=name, arguments=args)
        result = ToolResult(call=call, status=Status.PARSE_ERR, reason=f"--args is not valid JSON: {error}")
    else:
        result = asyncio.run(registry.call(ToolCall(name=name, arguments=arguments)))
    if as_json:
        console.print_json(result.model_dump_json())
    else:
        _print_result(result)
    if result.status is not Status.OK:
        raise typer.Exit(1)


def _print_result(result: ToolResult) -> None:
    if result.observation:
        console.print(result.observation.rstrip("\n"), markup=False, highlight=False, soft_wrap=True)
    usage = result.usage
    colour = "green" if result.ok else "red"
    status = f"[{colour}]{result.status}[/{colour}]" + (f"  {result.reason}" if result.reason else "")
    errors.print(f"status   {status}", highlight=False)
    errors.print(f"cost     ${usage.usd:.7f}  ({usage.cost_units:g} cost units)", highlight=False)
    errors.print(f"latency  {usage.latency_s:.3f} s", highlight=False)
    if usage.tokens:
        errors.print(f"tokens   {usage.input_tokens} in / {usage.output_tokens} out", highlight=False)

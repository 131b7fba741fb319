"""``podium tools``: list and call the tools of a pool."""

import asyncio
import json
from typing import Annotated

import typer
from rich.table import Table

from podium.cli.common import (
    JsonOption,
    PoolOption,
    PricesOption,
    SandboxOption,
    UnisolatedOption,
    console,
    errors,
    open_pool,
)
from podium.core.calls import Status, ToolCall, ToolResult

app = typer.Typer(help="List and call the tools of the pool.", no_args_is_help=True)


@app.command("list")
def tools_list(pool: PoolOption = None, prices: PricesOption = None, as_json: JsonOption = False) -> None:
    """List the tools: name, description and JSON-schema parameters."""
    specs = [spec.model_dump() for spec in open_pool(pool, prices=prices).registry.specs()]
    if as_json:
        console.print_json(json.dumps(specs))
        return
    table = Table(show_lines=True)
    for column in ("tool", "description", "parameters"):
        table.add_column(column, overflow="fold")
    for spec in specs:
        table.add_row(spec["name"], spec["description"], json.dumps(spec["parameters"], indent=1))
    console.print(table)


@app.command("call")
def tools_call(
    name: Annotated[str, typer.Argument(help="The tool to call.")],
    args: Annotated[str, typer.Option("--args", help="Arguments as a JSON object.")] = "{}",
    pool: PoolOption = None,
    prices: PricesOption = None,
    sandbox_config: SandboxOption = None,
    allow_unisolated: UnisolatedOption = False,
    as_json: JsonOption = False,
) -> None:
    """Call one tool and print its value, status, cost and latency; exits 1 unless the status is OK."""
    registry = open_pool(pool, prices=prices, sandbox_config=sandbox_config, allow_unisolated=allow_unisolated).registry
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
        print_result(result)
    if result.status is not Status.OK:
        raise typer.Exit(1)


def print_result(result: ToolResult) -> None:
    """The observation on stdout, the status and accounting on stderr."""
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

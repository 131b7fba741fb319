"""``podium tools``: list and call the tools of a pool."""

import asyncio
import json
from typing import Annotated

import typer
from rich.table import Table

from podium.cli.common import POOL_FIELDS, ConfigFileOption, JsonOption, console, errors, load_settings, open_pool
from podium.cli.fields import Flags, config_options
from podium.cli.output import print_json_line, shown
from podium.core.calls import Status, ToolCall, ToolResult
from podium.core.printable import printable
from podium.pool.choice import PoolChoice, ToolCallConfig
from podium.pool.pool import Pool

app = typer.Typer(help="List and call the tools of the pool.", no_args_is_help=True)


@app.command("list")
@config_options(PoolChoice, POOL_FIELDS)
def tools_list(
    config: ConfigFileOption = None,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Also print each tool's description and JSON-schema parameters.")
    ] = False,
    as_json: JsonOption = False,
    *,
    flags: Flags,
) -> None:
    """List the tools, one line each: name, kind (tool, role or model) and price."""
    opened = open_pool(load_settings(PoolChoice, config, flags))
    rows = [{**spec.model_dump(), **_kind_and_price(opened, spec.name)} for spec in opened.registry.specs()]
    if as_json:
        for row in rows:
            print_json_line(row)
        return
    if verbose:
        table = Table(show_lines=True)
        for column in ("tool", "kind", "price", "description", "parameters"):
            table.add_column(column, overflow="fold")
        for row in rows:
            parameters = json.dumps(row["parameters"], indent=1)
            table.add_row(*(shown(row[key]) for key in ("name", "kind", "price", "description")), shown(parameters))
        console.print(table)
        return
    width = max(len(row["name"]) for row in rows)
    for row in rows:
        line = f"{row['name']:<{width}}  {row['kind']:<5}  {row['price']}"
        console.print(printable(line), markup=False, highlight=False)


def _kind_and_price(pool: Pool, name: str) -> dict[str, str]:
    """Whether a tool is a basic tool, an agent role or a model, and its price as text."""
    workers = {label: worker for worker, label in pool.labels.items()}
    if name in workers:
        price = pool.backends[workers[name]].price
        return {"kind": "model", "price": f"${price.input_per_mtok:g}/${price.output_per_mtok:g} per 1M tokens in/out"}
    price = pool.prices.tool_price(name)
    parts = [
        f"${price.per_call_usd:g}/call" if price.per_call_usd else "",
        f"${price.per_second_usd:g}/s" if price.per_second_usd else "",
        f"{price.cost_units:g} cost units" if price.cost_units else "",
    ]
    kind = "role" if name in pool.config.roles else "tool"
    return {"kind": kind, "price": " + ".join(part for part in parts if part) or "free"}


@app.command("call")
@config_options(ToolCallConfig, ("args", *POOL_FIELDS))
def tools_call(
    name: Annotated[str, typer.Argument(help="The tool to call.")],
    config: ConfigFileOption = None,
    as_json: JsonOption = False,
    *,
    flags: Flags,
) -> None:
    """Call one tool and print its value, status, cost and latency; exits 1 unless the status is OK. With
    --json, the whole result as one JSON line."""
    settings = load_settings(ToolCallConfig, config, flags)
    registry = open_pool(settings).registry
    try:
        arguments = json.loads(settings.args)
    except json.JSONDecodeError as error:
        call = ToolCall(name=name, arguments=settings.args)
        result = ToolResult(call=call, status=Status.PARSE_ERR, reason=f"--args is not valid JSON: {error}")
    else:
        result = asyncio.run(registry.call(ToolCall(name=name, arguments=arguments)))
    if as_json:
        print_json_line(result.model_dump_json())
    else:
        print_result(result)
    if result.status is not Status.OK:
        raise typer.Exit(1)


def print_result(result: ToolResult) -> None:
    """The observation on stdout, the status and accounting on stderr."""
    if result.observation:
        console.print(printable(result.observation.rstrip("\n")), markup=False, highlight=False, soft_wrap=True)
    usage = result.usage
    colour = "green" if result.ok else "red"
    status = f"[{colour}]{result.status}[/{colour}]" + (f"  {shown(result.reason)}" if result.reason else "")
    errors.print(f"status   {status}", highlight=False)
    errors.print(f"cost     ${usage.usd:.7f}  ({usage.cost_units:g} cost units)", highlight=False)
    errors.print(f"latency  {usage.latency_s:.3f} s", highlight=False)
    if usage.tokens:
        errors.print(f"tokens   {usage.input_tokens} in / {usage.output_tokens} out", highlight=False)

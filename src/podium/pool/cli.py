"""Pool commands: list and call tools, ask a model, describe a model, serve a model over HTTP."""

import asyncio
import json
import random
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from podium.backends.base import BackendError
from podium.core.calls import Status, ToolCall, ToolResult
from podium.core.messages import Message
from podium.costs.prices import PriceCatalog
from podium.errors import ConfigError, PodiumError
from podium.pool.describe import run_tasks, write_description
from podium.pool.pool import Pool, build_pool, embedded_pool_config, load_pool_config
from podium.sandbox import SandboxConfig

console = Console()
errors = Console(stderr=True)
tools_app = typer.Typer(help="List and call the tools of the pool.", no_args_is_help=True)

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


@tools_app.command("list")
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


@tools_app.command("call")
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


def ask_command(
    question: Annotated[str, typer.Argument(help="The question.")],
    model: Annotated[str | None, typer.Option("--model", help="Worker to ask; default: the pool's first.")] = None,
    pool: PoolOption = None,
    max_tokens: Annotated[int, typer.Option("--max-tokens", help="Completion budget.")] = 256,
    temperature: Annotated[float, typer.Option("--temperature", help="0 is greedy.")] = 0.0,
) -> None:
    """One model answers, no tools (the no-tools baseline); prints the answer and its cost."""
    built = open_pool(pool)
    name = model or built.config.workers[0].name
    if name not in built.backends:
        raise fail(ConfigError(f"--model: no worker '{name}' (workers: {', '.join(built.backends)})"))
    try:
        generation = asyncio.run(
            built.backends[name].generate(
                [Message(role="user", content=question)], max_tokens=max_tokens, temperature=temperature
            )
        )
    except BackendError as error:
        raise fail(error, code=1) from error
    console.print(generation.text.strip(), markup=False, highlight=False, soft_wrap=True)
    errors.print(
        f"model    {generation.model}\ntokens   {generation.input_tokens} in / {generation.output_tokens} out\n"
        f"cost     ${generation.usd:.7f}\nlatency  {generation.latency_s:.2f} s",
        highlight=False,
    )


def describe_model_command(
    worker: Annotated[str, typer.Argument(help="The worker to describe.")],
    tasks: Annotated[Path, typer.Option("--tasks", help="JSONL of tasks with 'question' and 'answer' fields.")],
    pool: PoolOption = None,
    describer: Annotated[str | None, typer.Option("--describer", help="Worker that writes the description.")] = None,
    n: Annotated[int, typer.Option("-n", help="How many tasks to sample.")] = 10,
    verifier: Annotated[str, typer.Option("--verifier", help="How answers are checked: qa, math or mc.")] = "qa",
    seed: Annotated[int, typer.Option("--seed", help="Seed of the task sample.")] = 0,
) -> None:
    """Run a worker on sampled tasks and have a describer model write its description from the evidence."""
    from podium.evaluate.verifiers import MathVerifier, MultipleChoiceVerifier, QAVerifier

    verifiers = {"qa": QAVerifier, "math": MathVerifier, "mc": MultipleChoiceVerifier}
    if verifier not in verifiers:
        raise fail(ConfigError(f"--verifier must be one of {sorted(verifiers)}"))
    built = open_pool(pool)
    for name in (worker, describer or worker):
        if name not in built.backends:
            raise fail(ConfigError(f"no worker '{name}' (workers: {', '.join(built.backends)})"))
    rows = read_tasks(tasks)
    sample = random.Random(seed).sample(rows, min(n, len(rows)))

    async def describe() -> tuple[str, int]:
        runs = await run_tasks(built.backends[worker], sample, verifiers[verifier]())
        return await write_description(built.backends[describer or worker], runs), sum(r.correct for r in runs)

    try:
        description, solved = asyncio.run(describe())
    except BackendError as error:
        raise fail(error, code=1) from error
    errors.print(f"{worker} solved {solved} of {len(sample)} sampled tasks", highlight=False)
    console.print(description, markup=False, highlight=False, soft_wrap=True)


def read_tasks(path: Path) -> list[tuple[str, str]]:
    """(question, answer) pairs from a JSONL file; a bad line is a ConfigError naming the line."""
    rows = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as error:
        raise fail(ConfigError(f"cannot read {path}: {error.strerror}")) from error
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            rows.append((str(record["question"]), str(record["answer"])))
        except (json.JSONDecodeError, KeyError, TypeError) as error:
            raise fail(ConfigError(f"{path}:{number}: needs a JSON object with 'question' and 'answer'")) from error
    if not rows:
        raise fail(ConfigError(f"{path}: no tasks"))
    return rows


def serve_model_command(
    pool: PoolOption = None,
    worker: Annotated[str | None, typer.Option("--worker", help="Worker to serve; default: the first.")] = None,
    host: Annotated[str, typer.Option("--host", help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port to listen on.")] = 8000,
) -> None:
    """Serve a worker (default: the embedded model) as an OpenAI-compatible API (/v1/models, /v1/chat/completions)."""
    from podium.serve import serve

    built = open_pool(pool)
    name = worker or built.config.workers[0].name
    if name not in built.backends:
        raise fail(ConfigError(f"--worker: no worker '{name}' (workers: {', '.join(built.backends)})"))
    errors.print(f"serving {built.backends[name].model} on http://{host}:{port}/v1", highlight=False)
    serve(built.backends[name], host=host, port=port)

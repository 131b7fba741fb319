"""Routing commands: record a worker's answers so that it can be replayed as a pool member."""

import json
from pathlib import Path
from typing import Annotated, Literal

import typer

from podium.cli.common import JsonOption, PoolOption, errors, fail, open_pool
from podium.cli.output import print_json_line
from podium.core.printable import printable
from podium.errors import ConfigError
from podium.evaluate.routing.data import in_split, load_routing
from podium.evaluate.routing.record import record

app = typer.Typer(help="Replayed models for routing: record a worker's answers on GSM8K.", no_args_is_help=True)


@app.callback()
def routing() -> None:
    """Replayed models for routing: record a worker's answers on GSM8K."""


@app.command("record")
def record_command(
    out: Annotated[Path, typer.Option("--out", help="CSV to write (RouteLLM's layout).")],
    worker: Annotated[str | None, typer.Option("--worker", help="Worker to record; default: the pool's first.")] = None,
    pool: PoolOption = None,
    split: Annotated[str, typer.Option("--split", help="train, validation or test.")] = "test",
    limit: Annotated[int | None, typer.Option("--limit", help="First N questions of the split.")] = None,
    max_tokens: Annotated[int, typer.Option("--max-tokens", help="Completion budget per answer.")] = 256,
    as_json: JsonOption = False,
) -> None:
    """Ask a worker the GSM8K questions of a split, grade its answers and write them for a replay worker."""
    if split not in ("train", "validation", "test"):
        raise fail(ConfigError(f"--split: '{split}' is not train, validation or test"))
    built = open_pool(pool)
    name = worker or built.config.workers[0].name
    if name not in built.backends:
        raise fail(ConfigError(f"--worker: no worker '{name}' (workers: {', '.join(built.backends)})"))
    chosen: Literal["train", "validation", "test"] = split  # type: ignore[assignment]
    items = in_split(load_routing(), chosen)[:limit]
    backend = built.backends[name]

    def progress(done: int, total: int) -> None:
        if as_json:
            typer.echo(json.dumps({"event": "progress", "done": done, "total": total}))
        else:
            errors.print(f"recorded {done}/{total}", highlight=False)

    right = record(backend, items, out, backend.model, max_tokens=max_tokens, progress=progress)
    summary = {"out": str(out), "model": backend.model, "questions": len(items), "correct": right}
    if as_json:
        print_json_line(summary)
    else:
        typer.echo(printable(f"{right}/{len(items)} right; replay column '{backend.model}' in {out}"))

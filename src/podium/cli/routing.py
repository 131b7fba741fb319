"""Routing commands: record a worker's answers so that it can be replayed as a pool member, write a split's tasks,
compare orchestrators with routers (GSM8K with the recorded replies, MMLU with the recorded outcomes only)."""

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal, get_args

import typer
from rich.text import Text

from podium.cli.common import JsonOption, PoolOption, errors, fail, open_pool
from podium.cli.output import print_json_line
from podium.core.printable import printable
from podium.errors import ConfigError, PodiumError
from podium.evaluate.routing.data import Benchmark, in_split, load_routing
from podium.evaluate.routing.record import record

if TYPE_CHECKING:
    from podium.evaluate.routing.compare import Comparison

app = typer.Typer(
    help="Routing on recorded outcomes (GSM8K, MMLU): record a worker, write a split's tasks, compare with routers.",
    no_args_is_help=True,
)


@app.callback()
def routing() -> None:
    """Routing on recorded outcomes (GSM8K, MMLU): record a worker, write a split's tasks, compare with routers."""


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
    chosen = _split(split)
    built = open_pool(pool)
    name = worker or built.config.workers[0].name
    if name not in built.backends:
        raise fail(ConfigError(f"--worker: no worker '{name}' (workers: {', '.join(built.backends)})"))
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


SplitOption = Annotated[str, typer.Option("--split", help="train, validation or test.")]
BenchmarkOption = Annotated[
    str,
    typer.Option(
        "--benchmark",
        help="gsm8k (recorded replies) or mmlu (recorded outcomes only, split by subject: routing from the question).",
    ),
]


def _benchmark(benchmark: str) -> Benchmark:
    if benchmark not in get_args(Benchmark):
        raise fail(ConfigError(f"--benchmark: '{benchmark}' is not {' or '.join(get_args(Benchmark))}"))
    return benchmark  # type: ignore[return-value]


def _split(split: str) -> Literal["train", "validation", "test"]:
    if split not in ("train", "validation", "test"):
        raise fail(ConfigError(f"--split: '{split}' is not train, validation or test"))
    return split  # type: ignore[return-value]


@app.command("tasks")
def tasks_command(
    out: Annotated[Path, typer.Option("--out", help="Tasks JSONL to write (what podium eval, data and train read).")],
    split: SplitOption = "train",
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="First N questions of the split.")] = None,
    benchmark: BenchmarkOption = "gsm8k",
) -> None:
    """Write the questions of a routing split as a tasks file (id, question, gold, verifier)."""
    items = in_split(load_routing(benchmark=_benchmark(benchmark)), _split(split))[:limit]
    out.parent.mkdir(parents=True, exist_ok=True)
    rows = [{"id": i.item.id, "question": i.question, "gold": i.item.gold, "verifier": i.item.verifier} for i in items]
    out.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    typer.echo(f"{len(rows)} {split} tasks in {out}")


OrchestratorOption = Annotated[
    list[str] | None,
    typer.Option("--orchestrator", help="NAME=RUN_DIR: a `podium eval` run of a route-policy orchestrator."),
]
TrainLimitOption = Annotated[
    int | None,
    typer.Option(
        "--train-limit",
        min=1,
        help="First N train questions for the learned routers (default: all; give the orchestrator's training set "
        "to compare on equal data).",
    ),
]
PricesOption = Annotated[
    Path | None, typer.Option("--prices", help="Price sheet merged over Podium's (as the runs were priced).")
]


@app.command("compare")
def compare_command(
    orchestrator: OrchestratorOption = None,
    split: SplitOption = "test",
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="First N questions of the split.")] = None,
    train_limit: TrainLimitOption = None,
    prices: PricesOption = None,
    out: Annotated[Path | None, typer.Option("--out", help="Also write results.json and routing.html here.")] = None,
    benchmark: BenchmarkOption = "gsm8k",
    as_json: JsonOption = False,
) -> None:
    """Routers and evaluated orchestrators on one split: APGR, CPT, accuracy, USD and strong-call share."""
    from podium.costs.prices import PriceCatalog
    from podium.evaluate.report import write_routing_report
    from podium.evaluate.routing.compare import compare
    from podium.evaluate.routing.orchestrators import read_orchestrator
    from podium.evaluate.routing.routers import router_curves
    from podium.retrieval.embedding import CachedEmbeddings

    try:
        sheet = PriceCatalog.from_file(prices) if prices is not None else None
        items = load_routing(benchmark=_benchmark(benchmark), prices=sheet)
        train, test = in_split(items, "train")[:train_limit], in_split(items, _split(split))[:limit]
        runs = []
        for entry in orchestrator or []:
            name, _, run_dir = entry.partition("=")
            if not run_dir:
                raise ConfigError(f"--orchestrator: '{entry}' is not NAME=RUN_DIR")
            runs.append(read_orchestrator(name, run_dir, test))
        scored = set.intersection(*({e.item.item.id for e in run.episodes} for run in runs)) if runs else None
        test = [item for item in test if scored is None or item.item.id in scored]
        runs = [type(run)(run.name, [e for e in run.episodes if e.item in test]) for run in runs]
        errors.print(f"embedding {len(train) + len(test)} questions with MiniLM for the knn and logreg routers…")
        embedder = CachedEmbeddings()
        vectors = embedder.encode([i.question for i in train]), embedder.encode([i.question for i in test])
        comparison = compare(router_curves(train, test, *vectors), runs, test)
    except (PodiumError, ValueError) as error:
        raise fail(error) from error
    result = comparison.result()
    if out is not None:
        write_routing_report(out, comparison.curves, comparison.table)
        (out / "results.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    if not as_json:
        print_table(comparison)
    typer.echo(json.dumps(result))


def print_table(comparison: "Comparison") -> None:
    """Each system's metrics on one line, then the notes (on standard error: standard output is the JSON)."""
    from podium.evaluate.routing.compare import METRICS

    for name in comparison.curves:
        values = {metric: comparison.table[metric][name] for metric in METRICS}
        cells = "  ".join(
            f"{metric} {'-' if value is None else format(value, 'g')}" for metric, value in values.items()
        )
        errors.print(Text(printable(f"{name:18} {cells}")))
    for note in comparison.notes:
        errors.print(Text(printable(f"note: {note}")))

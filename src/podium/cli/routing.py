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
from podium.evaluate.routing.data import WEAK, Benchmark, RoutingItem, in_split, load_routing
from podium.evaluate.routing.record import record

if TYPE_CHECKING:
    from podium.costs.prices import PriceCatalog
    from podium.evaluate.routing.compare import Comparison
    from podium.evaluate.routing.orchestrators import OrchestratorRun, Worker
    from podium.evaluate.routing.priced import CostPenalty

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
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="First N questions of the split.")] = None,
    max_tokens: Annotated[int, typer.Option("--max-tokens", min=1, help="Completion budget per answer.")] = 256,
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
CalibrationOption = Annotated[
    list[str] | None,
    typer.Option(
        "--calibration",
        help="NAME=RUN_DIR: a `podium eval` run of orchestrator NAME on the validation split, which calibrates its "
        "escalation probability for --reward-from (without one it gets no NAME_priced row).",
    ),
]
RewardFromOption = Annotated[
    Path | None,
    typer.Option(
        "--reward-from",
        help="A `podium train grpo` config whose reward is cost_penalty: each probability router and each "
        "orchestrator given --calibration is also shown as NAME_priced, calling the strong model where its "
        "probability passes the break-even one at these prices (fitted on the train split's outcomes).",
    ),
]


@app.command("compare")
def compare_command(
    orchestrator: OrchestratorOption = None,
    split: SplitOption = "test",
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="First N questions of the split.")] = None,
    train_limit: TrainLimitOption = None,
    prices: PricesOption = None,
    reward_from: RewardFromOption = None,
    calibration: CalibrationOption = None,
    out: Annotated[Path | None, typer.Option("--out", help="Also write results.json and routing.html here.")] = None,
    benchmark: BenchmarkOption = "gsm8k",
    as_json: JsonOption = False,
) -> None:
    """Routers and evaluated orchestrators on one split: APGR, CPT, accuracy, USD and strong-call share."""
    from podium.evaluate.report import write_routing_report
    from podium.evaluate.routing import priced
    from podium.evaluate.routing.compare import compare
    from podium.evaluate.routing.orchestrators import read_orchestrator
    from podium.evaluate.routing.routers import priced_points, router_curves, router_scores
    from podium.retrieval.embedding import CachedEmbeddings

    try:
        sheet = price_sheet(prices)
        items = load_routing(benchmark=_benchmark(benchmark), prices=sheet)
        train, test = in_split(items, "train")[:train_limit], in_split(items, _split(split))[:limit]
        breakeven = None if reward_from is None else priced.breakeven(train, pricing_reward(reward_from))
        if calibration and breakeven is None:
            raise ConfigError("--calibration calibrates an orchestrator for --reward-from, which is not given")
        named = named_runs("--orchestrator", orchestrator)
        runs = [read_orchestrator(name, run_dir, test, sheet) for name, run_dir in named.items()]
        scored = set.intersection(*({e.item.item.id for e in run.episodes} for run in runs)) if runs else None
        test = [item for item in test if scored is None or item.item.id in scored]
        runs = [type(run)(run.name, [e for e in run.episodes if e.item in test]) for run in runs]
        calibrated = calibrated_runs(runs, named_runs("--calibration", calibration), in_split(items, "validation"))
        errors.print(f"embedding {len(train) + len(test)} questions with MiniLM for the knn and logreg routers…")
        embedder = CachedEmbeddings()
        vectors = embedder.encode([i.question for i in train]), embedder.encode([i.question for i in test])
        scores = router_scores(train, test, *vectors)
        placed = (
            None if breakeven is None else priced.Priced(breakeven, priced_points(test, scores, breakeven), calibrated)
        )
        comparison = compare(router_curves(test, scores), runs, test, placed)
    except (PodiumError, ValueError) as error:
        raise fail(error) from error
    result = comparison.result()
    if out is not None:
        write_routing_report(out, comparison.curves, comparison.table)
        (out / "results.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    if not as_json:
        print_table(comparison)
    typer.echo(json.dumps(result))


@app.command("threshold")
def threshold_command(
    reward_from: Annotated[
        Path,
        typer.Option("--reward-from", help="A `podium train grpo` config whose reward (cost_penalty) the rule serves."),
    ],
    calibration: Annotated[
        Path | None,
        typer.Option(
            "--calibration",
            help="RUN_DIR: a `podium eval` run of the orchestrator on the validation split, which calibrates its "
            "escalation probability (default: its probability read as it is).",
        ),
    ] = None,
    prices: PricesOption = None,
    train_limit: TrainLimitOption = None,
    system: Annotated[
        Path | None, typer.Option("--system", help="An escalate-policy system file to write with the threshold.")
    ] = None,
    out: Annotated[Path | None, typer.Option("--out", help="Where --system is written with escalate_above.")] = None,
    benchmark: BenchmarkOption = "gsm8k",
) -> None:
    """The escalate_above a price sheet picks: the orchestrator escalates where the probability that the weak reply
    is wrong passes the break-even one under --reward-from's reward at these prices (priced on the train split). A
    --system whose pool has several replay workers to escalate to gets one threshold per worker, each priced at its
    own price: the worker that pays most answers, where any pays."""
    from podium.evaluate.routing.orchestrators import read_orchestrator
    from podium.evaluate.routing.priced import fit_calibration, score_threshold

    if (system is None) != (out is None):
        raise fail(ConfigError("--system and --out go together: the system file to write again, and where"))
    try:
        sheet = price_sheet(prices)
        items = load_routing(benchmark=_benchmark(benchmark), prices=sheet)
        train = in_split(items, "train")[:train_limit]
        breakeven = priced_breakeven(pricing_reward(reward_from), train, system, sheet)
        fitted = None
        if calibration is not None:
            fitted = fit_calibration(read_orchestrator("orchestrator", str(calibration), in_split(items, "validation")))
        threshold = (
            score_threshold(breakeven, fitted)
            if isinstance(breakeven, float)
            else {worker: score_threshold(edge, fitted) for worker, edge in breakeven.items()}
        )
        if system is not None and out is not None:
            write_thresholded_system(system, out, threshold, prices)
    except (PodiumError, ValueError) as error:
        raise fail(error) from error
    errors.print(f"break-even probability {rounded(breakeven)}; escalate_above {rounded(threshold)}", highlight=False)
    calibrated = None if fitted is None else {"slope": fitted.slope, "bias": fitted.bias}
    print_json_line(
        {"breakeven": breakeven, "escalate_above": threshold, "calibration": calibrated, "system": out and str(out)}
    )


def rounded(value: float | dict[str, float]) -> str:
    """A probability, or one per worker, to four places."""
    if isinstance(value, float):
        return f"{value:.4f}"
    return ", ".join(f"{worker} {probability:.4f}" for worker, probability in value.items()) or "none pays"


def write_thresholded_system(system: Path, out: Path, threshold: float | dict[str, float], prices: Path | None) -> None:
    """``system`` written to ``out`` with ``escalate_above: threshold``, checked as ``podium eval`` reads it."""
    import yaml

    from podium.config import read_structured_file
    from podium.evaluate.system_config import system_config_from_dict
    from podium.runtime.config import RunConfig

    data = read_structured_file(system)
    if isinstance(data, dict):  # anything else is refused by the validation, naming the file
        data = {**data, "escalate_above": threshold}
    config = system_config_from_dict(data, source=str(system))
    if not isinstance(config, RunConfig) or config.policy != "escalate":
        raise ConfigError(f"{system}: escalate_above applies to an orchestrator with policy escalate")
    sheet = f"the prices of {prices}" if prices is not None else "Podium's prices"
    header = f"# {system} with the escalate_above that `podium routing threshold` computed\n# for {sheet}.\n"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(header + yaml.safe_dump(data, sort_keys=False), encoding="utf-8")


def price_sheet(prices: Path | None) -> "PriceCatalog | None":
    """The price sheet in the file ``prices`` (None: none given)."""
    from podium.costs.prices import PriceCatalog

    return PriceCatalog.from_file(prices) if prices is not None else None


def named_runs(option: str, entries: list[str] | None) -> dict[str, str]:
    """``NAME=RUN_DIR`` entries of ``option`` as name → run directory."""
    runs = {}
    for entry in entries or []:
        name, _, run_dir = entry.partition("=")
        if not name or not run_dir:
            raise ConfigError(f"{option}: '{entry}' is not NAME=RUN_DIR")
        if name in runs:
            raise ConfigError(f"{option}: {name} is given twice")
        runs[name] = run_dir
    return runs


def calibrated_runs(
    runs: "list[OrchestratorRun]", calibrations: dict[str, str], validation: list[RoutingItem]
) -> "dict[str, OrchestratorRun]":
    """Each orchestrator of ``calibrations`` with its escalation scores calibrated on its validation run."""
    from podium.evaluate.routing.orchestrators import read_orchestrator
    from podium.evaluate.routing.priced import calibrated, fit_calibration

    by_name = {run.name: run for run in runs}
    unknown = sorted(set(calibrations) - set(by_name))
    if unknown:
        raise ConfigError(f"--calibration: {', '.join(unknown)} is no --orchestrator")
    return {
        name: calibrated(by_name[name], fit_calibration(read_orchestrator(name, run_dir, validation)))
        for name, run_dir in calibrations.items()
    }


def pricing_reward(config: Path) -> "CostPenalty":
    """The cost_penalty reward of the GRPO config ``config``, which prices decisions."""
    from podium.evaluate.routing.priced import CostPenalty
    from podium.train.config import GRPOConfig

    reward = GRPOConfig.from_file(config).reward
    if reward.design != "cost_penalty":
        raise ConfigError(
            f"{config}: reward.design is '{reward.design}'; --reward-from prices decisions under cost_penalty only"
        )
    return CostPenalty(reward.cost_weight, reward.cost_usd_scale)


def priced_breakeven(
    reward: "CostPenalty", train: list[RoutingItem], system: Path | None, sheet: "PriceCatalog | None"
) -> float | dict[str, float]:
    """The break-even escalation probability under ``reward``, for the replay workers of ``system``'s pool at their
    prices under ``sheet`` where it names one (per worker where there are several to escalate to), else for the
    recorded weak and strong models."""
    from podium.evaluate.routing.priced import breakeven, worker_edges

    workers = system_replay_workers(system, sheet) if system is not None else {}
    if not workers:
        return breakeven(train, reward)
    edges = worker_edges(train, workers, reward)
    if len(workers) == 2:  # one worker to escalate to: one threshold, as without a pool
        (target,) = (name for name, worker in workers.items() if worker.model != WEAK)
        return edges.get(target, 1.0)
    return edges


def system_replay_workers(system: Path, sheet: "PriceCatalog | None") -> "dict[str, Worker]":
    """The replay workers of the pool ``system`` names, priced under ``sheet`` (none: it names no pool)."""
    from podium.config import read_structured_file
    from podium.evaluate.routing.orchestrators import replay_workers

    data = read_structured_file(system)
    pool = data.get("pool") if isinstance(data, dict) else None
    return replay_workers(pool, system, sheet) if pool is not None else {}


def print_table(comparison: "Comparison") -> None:
    """Each system's metrics on one line, then the notes (on standard error: standard output is the JSON)."""
    from podium.evaluate.routing.compare import METRICS

    for name in comparison.systems():
        values = {metric: comparison.table[metric][name] for metric in METRICS}
        cells = "  ".join(
            f"{metric} {'-' if value is None else format(value, 'g')}" for metric, value in values.items()
        )
        errors.print(Text(printable(f"{name:24} {cells}")))
    for note in comparison.notes:
        errors.print(Text(printable(f"note: {note}")))

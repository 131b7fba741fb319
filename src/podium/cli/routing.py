"""Routing commands: record a pool on tasks (or import RouteLLM's recordings), write a split's tasks, compare
orchestrators with routers on a recording, and price an orchestrator's escalation threshold."""

import asyncio
import json
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.text import Text

from podium.cli.common import ConfigFileOption, JsonOption, errors, fail
from podium.cli.fields import Flags, config_options, load_config
from podium.cli.output import print_json_line
from podium.core.printable import printable
from podium.errors import ConfigError, PodiumError
from podium.evaluate.routing.config import CompareConfig, ImportConfig, RecordConfig, TasksConfig, ThresholdConfig
from podium.recording import Recording

if TYPE_CHECKING:
    from podium.evaluate.routing.compare import Comparison
    from podium.evaluate.routing.priced import CostPenalty

app = typer.Typer(
    help="Routing on recordings: record a pool on tasks, write a split's tasks, compare orchestrators with routers.",
    no_args_is_help=True,
)


@app.callback()
def routing() -> None:
    """Routing on recordings: record a pool on tasks, write a split's tasks, compare orchestrators with routers."""


@app.command("record")
@config_options(
    RecordConfig,
    ("pool", "out", "tasks", "benchmark", "workers", "limit", "max_tokens", "concurrency", "per_worker", "max_run_usd",
     ("split.by", "--split-by"), ("split.key", "--split-key"), ("split.test_percent", "--test-percent"),
     ("split.validation_percent", "--validation-percent"), "grading", "data_dir", "quiet"),
)  # fmt: skip
def record_command(config: ConfigFileOption = None, as_json: JsonOption = False, *, flags: Flags) -> None:
    """Ask every worker of a pool every task, grade each reply with the task's grader and write a recording
    (resumable; failed calls recorded as failures; --max-run-usd a hard cap)."""
    from podium.evaluate.routing.record import RecordingJob

    try:
        settings = load_config(RecordConfig, config, flags)
        job = RecordingJob.prepare(settings, source=str(config or "record options"))
        runner = asyncio.run(job.run(progress=not settings.quiet and not as_json))
    except (PodiumError, ValueError) as error:
        raise fail(error) from error
    summary = job.summary(runner)
    if as_json:
        print_json_line(summary)
    else:
        errors.print(Text(printable(job.describe(summary))))
    if runner.stopped_by_budget:
        raise typer.Exit(1)


@app.command("import")
@config_options(ImportConfig, ("out", "data_dir"), arguments=("source",))
def import_command(config: ConfigFileOption = None, *, flags: Flags) -> None:
    """Write one of RouteLLM's recordings of Mixtral and GPT-4 as a Podium recording."""
    from podium.evaluate.routing.importers import import_routellm

    try:
        settings = load_config(ImportConfig, config, flags)
        out = Path(settings.out)
        written = import_routellm(settings.source, out, settings.data_dir, progress=_say)
    except PodiumError as error:
        raise fail(error) from error
    source = settings.source
    typer.echo(printable(f"{source}: {written} outcomes written to {out}" if written else f"{out} holds {source}"))


def _say(text: str) -> None:
    errors.print(text, highlight=False)


@app.command("tasks")
@config_options(TasksConfig, ("recording", "out", "split", "limit"))
def tasks_command(config: ConfigFileOption = None, *, flags: Flags) -> None:
    """Write the tasks of a recording's split as a tasks file (id, question, gold, verifier, metadata)."""
    try:
        settings = load_config(TasksConfig, config, flags)
        tasks = Recording.load(Path(settings.recording)).in_split(settings.split)[: settings.limit]
    except PodiumError as error:
        raise fail(error) from error
    if not tasks:
        raise fail(ConfigError(f"{settings.recording}: the {settings.split} split has no task"))
    out = Path(settings.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    rows = [task.model_dump(mode="json", exclude={"split"}) for task in tasks]
    out.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    typer.echo(f"{len(rows)} {settings.split} tasks in {out}")


@app.command("compare")
@config_options(
    CompareConfig,
    ("recording", "split", "limit", "train_limit", "routers", ("orchestrators", "--orchestrator"),
     ("calibrations", "--calibration"), "reward_from", "prices", "out", "seed", "bootstrap"),
)  # fmt: skip
def compare_command(config: ConfigFileOption = None, as_json: JsonOption = False, *, flags: Flags) -> None:
    """Routers and evaluated orchestrators on one split of a recording: each curve's area and thresholds, and
    accuracy, USD, calls and worker shares at one operating point; the last line printed is one JSON object."""
    from podium.evaluate.report import write_routing_report
    from podium.evaluate.routing.comparing import run_comparison

    try:
        settings = load_config(CompareConfig, config, flags)
        reward = None if settings.reward_from is None else pricing_reward(settings.reward_from)
        comparison = run_comparison(settings, reward, progress=lambda text: errors.print(text, highlight=False))
    except (PodiumError, ValueError) as error:
        raise fail(error) from error
    result = comparison.result()
    if settings.out is not None:
        out = Path(settings.out)
        write_routing_report(out, comparison.curves, comparison.table)
        (out / "results.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    if not as_json:
        print_table(comparison)
    typer.echo(json.dumps(result))


@app.command("threshold")
@config_options(
    ThresholdConfig,
    ("recording", "reward_from", "calibration", "prices", "train_limit", "system", ("system_out", "--out")),
)
def threshold_command(config: ConfigFileOption = None, *, flags: Flags) -> None:
    """The escalate_above a price sheet picks: the orchestrator escalates where the probability that the first
    reply is wrong passes the break-even one under --reward-from's reward at these prices (priced on the train
    split). A --system whose pool has several workers to escalate to gets one threshold per worker, each priced at
    its own price: the worker that pays most answers, where any pays."""
    from podium.evaluate.routing.comparing import price_threshold

    try:
        settings = load_config(ThresholdConfig, config, flags)
        found = price_threshold(settings, pricing_reward(settings.reward_from))
    except (PodiumError, ValueError) as error:
        raise fail(error) from error
    errors.print(
        f"break-even probability {rounded(found['breakeven'])}; escalate_above {rounded(found['escalate_above'])}",
        highlight=False,
    )
    print_json_line(found)


def pricing_reward(config: str) -> "CostPenalty":
    """The cost_penalty reward of the GRPO config ``config``, which prices decisions."""
    from podium.evaluate.routing.priced import CostPenalty
    from podium.train.config import GRPOConfig

    reward = GRPOConfig.from_file(config).reward
    if reward.design != "cost_penalty":
        raise ConfigError(
            f"{config}: reward.design is '{reward.design}'; pricing decisions needs reward.design cost_penalty"
        )
    return CostPenalty(reward.cost_weight, reward.cost_usd_scale)


def rounded(value: float | dict[str, float]) -> str:
    """A probability, or one per worker, to four places."""
    if isinstance(value, float):
        return f"{value:.4f}"
    return ", ".join(f"{worker} {probability:.4f}" for worker, probability in value.items()) or "none pays"


def print_table(comparison: "Comparison") -> None:
    """Each system's metrics on one line, a curve metric with its bootstrap interval, then the paired difference
    of the best orchestrator and the best router, then the notes (on standard error: standard output is the JSON)."""
    from podium.evaluate.routing.compare import METRICS

    intervals = comparison.bootstrap.intervals if comparison.bootstrap is not None else {}
    for name in comparison.systems():
        cells = []
        for metric in METRICS:
            value = comparison.table[metric][name]
            if value is None and metric not in ("apgr", "cost_apgr"):
                continue
            cell = f"{metric} {'-' if value is None else format(value, 'g')}"
            if name in intervals.get(metric, {}):
                low, high = intervals[metric][name]
                cell += f" [{low:.3f}, {high:.3f}]"
            cells.append(cell)
        errors.print(Text(printable(f"{name:24} {'  '.join(cells)}")))
    if comparison.bootstrap is not None and comparison.bootstrap.pair is not None and comparison.bootstrap.paired:
        first, second = comparison.bootstrap.pair
        differences = "  ".join(
            f"{metric} {value.difference:+.4f} [{value.low:+.3f}, {value.high:+.3f}] ahead in {value.ahead:.0%}"
            for metric, value in comparison.bootstrap.paired.items()
        )
        errors.print(Text(printable(f"{first} − {second} (paired, {comparison.bootstrap.resamples} resamples): "
                                    f"{differences}")))  # fmt: skip
    for note in comparison.notes:
        errors.print(Text(printable(f"note: {note}")))

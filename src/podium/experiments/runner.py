"""Running an experiment: for each arm, its training stages (if any) on the training items, then ``podium eval`` of
its system on the evaluation items; then a summary of every arm and the HTML report that compares them side by side.

Layout of the output directory::

    experiment.json        the experiment as run (scale, arms' systems and training)
    ARM/                   each arm's evaluation run (manifest.json, results.jsonl; resumable)
    train/ARM/             each training arm's teacher run, SFT data, checkpoints and stage records
    summary.json           per arm: metrics and training stages
    report/index.html      `podium report` over the arms' runs

Running the same command again resumes: finished evaluation samples and training stages are kept.
"""

import asyncio
import json
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from podium.datasets.benchmark import Benchmark
from podium.datasets.items import BenchmarkItem
from podium.datasets.loaders import get_benchmark
from podium.errors import ConfigError
from podium.evaluate.metrics import run_metrics
from podium.evaluate.report import build_report
from podium.evaluate.runner import load_run, run_eval
from podium.evaluate.system_config import build_system, system_config_from_dict
from podium.experiments.config import Arm, Experiment, arm_errors
from podium.experiments.training import Say, StageRecord, train_arm, trained_system

SUMMARY_FILE = "summary.json"
METRICS = (
    "items",
    "queries",
    "pass_at_1",
    "mean_at_k",
    "usd_per_query",
    "tokens_per_query",
    "latency_mean_s",
    "errors",
)


@dataclass
class ArmResult:
    """One arm's outcome."""

    arm: str
    about: str
    run: str
    """Its evaluation run directory."""
    metrics: dict[str, Any]
    """Accuracy, cost, tokens, latency, errors and calls per tool of the evaluation run."""
    training: list[StageRecord] = field(default_factory=list)


def splits(experiment: Experiment, data_dir: str | Path | None) -> tuple[Benchmark, Benchmark, list[BenchmarkItem]]:
    """The evaluation items (the benchmark's first ``limit``) and the training items (the ``train_items`` after
    them), each as a benchmark of its own; the training items also as a list."""
    benchmark = get_benchmark(experiment.benchmark)
    items = benchmark.items(data_dir=data_dir)
    settings = experiment.settings
    trains = any(arm.training is not None for arm in experiment.arms)
    if trains and settings.limit is None:
        raise ConfigError(f"scales.{experiment.scale}.limit: a training experiment needs it, training items follow")
    evaluated = items[: settings.limit]
    training = items[len(evaluated) : len(evaluated) + settings.train_items] if trains else []
    if trains and not training:
        raise ConfigError(f"{experiment.benchmark} has no items left for training after the first {settings.limit}")
    evaluation = replace(benchmark, read_local=lambda directory: iter(evaluated))
    train = replace(benchmark, name=f"{benchmark.name}-train", read_local=lambda directory: iter(training))
    return evaluation, train, training


def run_experiment(
    experiment: Experiment,
    out: str | Path,
    *,
    arms: list[str] | None = None,
    data_dir: str | Path | None = None,
    say: Say = print,
    progress: bool = True,
) -> list[ArmResult]:
    """Run ``arms`` (default: all) of ``experiment`` into ``out``, then summarise and report every arm run so far."""
    out = Path(out)
    names = [arm.name for arm in experiment.arms]
    unknown = sorted(set(arms or ()) - set(names))
    if unknown:
        raise ConfigError(f"--arm: no arm {unknown} in {experiment.name} (arms: {names})")
    chosen = replace(experiment, arms=[arm for arm in experiment.arms if not arms or arm.name in arms])
    errors = arm_errors(chosen)
    if errors:  # an arm that cannot run stops the experiment before any work
        raise errors[0]
    out.mkdir(parents=True, exist_ok=True)
    _write_plan(experiment, out)
    evaluation, train, training_items = splits(experiment, data_dir)
    results = []
    for arm in experiment.arms:
        if arms and arm.name not in arms:
            continue
        say(f"[{arm.name}] {arm.about}".rstrip())
        records = []
        system = arm.system
        if arm.training is not None:
            records = train_arm(experiment, arm, (train, training_items), out / "train" / arm.name, say)
            system = trained_system(arm.system, records[-1].path, arm.name)
        results.append(_evaluate(experiment, arm, system, evaluation, out, records, data_dir, progress, say))
    finished = [_load(arm, out) for arm in experiment.arms if (out / arm.name / "manifest.json").exists()]
    (out / SUMMARY_FILE).write_text(json.dumps([asdict(r) for r in finished], indent=2) + "\n", encoding="utf-8")
    if finished:
        index = build_report([r.run for r in finished], out / "report")
        say(f"report: {index}")
    return results


def _evaluate(
    experiment: Experiment,
    arm: Arm,
    system: dict[str, Any],
    benchmark: Benchmark,
    out: Path,
    training: list[StageRecord],
    data_dir: str | Path | None,
    progress: bool,
    say: Say,
) -> ArmResult:
    settings = experiment.settings
    built = build_system(system_config_from_dict(system, source=f"system of arm {arm.name}"))
    summary = asyncio.run(
        run_eval(
            benchmark,
            built,
            out=out / arm.name,
            samples=settings.samples,
            concurrency=settings.concurrency,
            max_run_usd=settings.max_run_usd,
            system_config=system,
            data_dir=data_dir,
            progress=progress,
        )
    )
    say(f"[{arm.name}] {summary.correct}/{summary.done} correct, ${summary.usd:.4f}, {summary.errors} errors")
    _record_training(out / arm.name, training)
    return _load(arm, out)


def _record_training(run: Path, training: list[StageRecord]) -> None:
    path = run / "training.json"
    path.write_text(json.dumps([asdict(stage) for stage in training], indent=2) + "\n", encoding="utf-8")


def _load(arm: Arm, out: Path) -> ArmResult:
    """An arm's result from its run directory (this invocation's or an earlier one's)."""
    run = out / arm.name
    _, records = load_run(run)
    metrics = run_metrics(records)
    values = {name: getattr(metrics, name) for name in METRICS}
    values["tool_calls"] = dict(metrics.tool_calls)
    stages = run / "training.json"
    training = [StageRecord(**s) for s in json.loads(stages.read_text(encoding="utf-8"))] if stages.exists() else []
    return ArmResult(arm.name, arm.about, str(run), values, training)


def _write_plan(experiment: Experiment, out: Path) -> None:
    plan = {
        "name": experiment.name,
        "about": experiment.about,
        "source": experiment.source,
        "benchmark": experiment.benchmark,
        "scale": experiment.scale,
        "settings": experiment.settings.model_dump(mode="json"),
        "arms": [
            {
                "name": arm.name,
                "about": arm.about,
                "system": arm.system,
                "training": arm.training.model_dump(mode="json") if arm.training else None,
            }
            for arm in experiment.arms
        ],
    }
    (out / "experiment.json").write_text(json.dumps(plan, indent=2) + "\n", encoding="utf-8")

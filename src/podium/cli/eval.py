"""``podium eval`` and ``podium report``.

Registered on the main app with ``app.command("eval")(eval_command)`` and ``app.command("report")(report_command)``.
Exit status: 0 done, 1 every sample failed or the run stopped at its USD cap with samples left, 2 invalid input
(config, benchmark, mismatched resume, a system that cannot produce an action).
"""

import asyncio
from pathlib import Path
from typing import Any

import typer
from rich.table import Table
from rich.text import Text

from podium.cli.common import ConfigFileOption, fail
from podium.cli.fields import Flags, config_options, load_config
from podium.cli.output import make_console, shown
from podium.core.files import write_atomically
from podium.core.preference import Preference
from podium.core.printable import printable
from podium.core.progress import ProgressBar
from podium.costs.prices import PriceCatalog
from podium.datasets.loaders import Benchmark, get_benchmark
from podium.errors import ConfigError, PodiumError
from podium.evaluate.config import EvalConfig, ReportConfig
from podium.evaluate.gate import COMPARISON_FILE, Comparison, GateConfig, compare_runs
from podium.evaluate.ray_system import solving_system
from podium.evaluate.report import build_report
from podium.evaluate.runner import EvalSummary, run_eval
from podium.evaluate.system_config import EvalSystemConfig, load_system_config
from podium.graders.grader import Grader, GradingConfig
from podium.runtime.checks import NotRunnable
from podium.sandbox import SandboxConfig
from podium.solve.jsonl import tasks_benchmark

console = make_console()
errors = make_console(stderr=True)
EVAL_FIELDS = ("system", "out", "benchmark", "tasks", "samples", "limit", "concurrency", "max_run_usd", "data_dir",
               "hub", "sandbox_config", "quiet", "ray", "tau2_results", "preferences", "prices",
               ("gate.against", "--against"), ("gate.metric", "--gate-metric"),
               ("gate.cost_usd_scale", "--gate-usd-scale"), ("gate.margin", "--gate-margin"),
               ("gate.confidence", "--gate-confidence"), ("gate.resamples", "--gate-resamples"))  # fmt: skip
"""Every field of :class:`EvalConfig`, each a flag (the gate's as ``--against`` and ``--gate-*``)."""


@config_options(EvalConfig, EVAL_FIELDS)
def eval_command(config: ConfigFileOption = None, *, flags: Flags) -> None:
    """Evaluate a system on a benchmark; results go to OUT/results.jsonl as each sample finishes. With --against,
    compare it with a baseline run on the same items (paired bootstrap intervals) and say whether it wins."""
    try:
        settings = load_config(EvalConfig, config, flags)
        if settings.gate.against is None and settings.gate.model_fields_set:
            raise ConfigError("--gate-* settings compare the run with a baseline: give --against RUN")
        summary, benchmark, system, grader = _evaluate(settings)
    except NotRunnable as error:  # a system that cannot produce an action: named with its file, nothing run
        raise fail(NotRunnable(f"{settings.system} ({error.source})", error.problems)) from error
    except PodiumError as error:
        raise fail(error) from error
    report_summary(summary, benchmark, system, settings.max_run_usd, grader)
    if settings.gate.against is not None:
        _compare(settings.gate, Path(settings.out))


def _compare(gate: GateConfig, out: Path) -> None:
    """Compare the run in ``out`` with the baseline of ``gate``; write and show the comparison."""
    try:
        comparison = compare_runs(str(gate.against), out, gate)
    except PodiumError as error:
        raise fail(error) from error
    write_atomically(out / COMPARISON_FILE, comparison.model_dump_json(indent=2) + "\n")
    report_comparison(comparison, out / COMPARISON_FILE)


def report_comparison(comparison: Comparison, path: Path) -> None:
    """The paired comparison as a table, and the gate's decision."""
    base, cand = comparison.baseline, comparison.candidate
    table = Table(title=Text(printable(f"{cand.system} against {base.system} on {comparison.items} paired items")))
    for column in ("metric", "baseline", "candidate", "difference", f"{comparison.gate.confidence:.0%} interval"):
        table.add_column(column, justify="left" if column == "metric" else "right")
    for name, metric in comparison.metrics.items():
        digits = 6 if name == "usd" else 4
        interval = metric.interval
        shown_values = (metric.baseline, metric.candidate)
        table.add_row(
            name, *(f"{value:.{digits}f}" for value in shown_values), f"{interval.difference:+.{digits}f}",
            f"[{interval.low:+.{digits}f}, {interval.high:+.{digits}f}]",
        )  # fmt: skip
    console.print(table)
    verdict = "[green]passed[/green]" if comparison.passed else "[red]not passed[/red]"
    versions = f"{base.version or 'unversioned'} → {cand.version or 'unversioned'}"
    console.print(
        f"gate {verdict} ({versions}): {shown(comparison.reason)} → {shown(path)}", highlight=False, soft_wrap=True
    )


def _evaluate(settings: EvalConfig) -> tuple[EvalSummary, str, str, str]:
    """Run the evaluation ``settings`` describe: its summary, the benchmark's, system's and grader's names."""
    chosen = _benchmark(settings.benchmark, settings.tasks)
    config = load_system_config(settings.system)
    data_dir = _path(settings.data_dir)
    grader = _grader(config.grading, _path(settings.sandbox_config), data_dir)
    sheet = PriceCatalog.from_file(settings.prices) if settings.prices is not None else None
    with solving_system(config, settings.ray, settings.concurrency, sheet) as built:
        summary = asyncio.run(
            run_eval(
                chosen,
                built,
                out=settings.out,
                samples=settings.samples,
                limit=settings.limit,
                concurrency=settings.concurrency,
                max_run_usd=settings.max_run_usd,
                system_config=_system_dump(config, sheet),
                data_dir=data_dir,
                source="hub" if settings.hub else "local",
                grader=grader,
                progress=not settings.quiet,
                preferences=_preferences(_path(settings.preferences)),
            )
        )
    _export_tau2(Path(settings.out), _path(settings.tau2_results), data_dir, settings.quiet)
    return summary, chosen.name, built.name, grader.grader_name(chosen.verifier)


def _path(value: str | None) -> Path | None:
    return None if value is None else Path(value)


def _benchmark(name: str | None, tasks: str | None) -> Benchmark:
    """The benchmark named, or the tasks file as one."""
    if (name is None) == (tasks is None):
        raise ConfigError("give --benchmark NAME or --tasks FILE (one of them)")
    return get_benchmark(name) if name is not None else tasks_benchmark(tasks)  # type: ignore[arg-type]


LATER_FIELDS = ("grading", "instructions")
"""Fields system configs gained after runs were recorded: left out of the manifest while at their defaults, so
those runs resume."""


def _system_dump(config: EvalSystemConfig, prices: PriceCatalog | None) -> dict[str, Any]:
    """What the run manifest records of the system (a resume with other settings is refused). Unset
    :data:`LATER_FIELDS` are left out, so runs recorded before them resume; ``--prices`` is part of it, so a
    resume under another sheet never mixes two price sheets in one run."""
    fields = type(config).model_fields
    unset = {name for name in LATER_FIELDS if name in fields and getattr(config, name) == fields[name].default}
    dump = config.model_dump(mode="json", exclude=unset)
    if prices is not None:
        dump["prices"] = prices.model_dump(mode="json")
    return dump


def _export_tau2(out: Path, path: Path | None, data_dir: Path | None, quiet: bool) -> None:
    """With --tau2-results, the run's tau2 conversations as a tau2 results file."""
    if path is None:
        return
    from podium.evaluate.tau2_export import export_tau2_results  # needs the tau2 extra; only this flag does

    def track(records, total):  # grading takes about a second per conversation
        with ProgressBar(console=errors, transient=True, disable=quiet) as bar:
            yield from bar.track(records, total=total, description="exporting tau2 results")

    written, left_out = export_tau2_results(out, path, data_dir=data_dir, track=track)
    errors.print(
        f"tau2 results: {written} conversations → {shown(path)} ({left_out} attempts without one)", highlight=False
    )


def _preferences(path: Path | None) -> list[Preference]:
    """The preference pairs of ``--preferences`` (none without it)."""
    if path is None:
        return []
    from podium.data.preferences import read_preferences  # the data stages load only when the flag is given

    return list(read_preferences(path))


def _grader(grading: GradingConfig | None, sandbox_config: Path | None, data_dir: Path | None) -> Grader:
    """The grader a system config's ``grading`` section asks for (each benchmark's own verifier without one)."""
    sandbox = SandboxConfig.from_file(sandbox_config) if sandbox_config else None
    return Grader.from_config(grading or GradingConfig(), sandbox_config=sandbox, data_dir=data_dir)


def report_summary(summary: EvalSummary, benchmark: str, system: str, max_run_usd: float | None, grader: str) -> None:
    """The run's totals and who graded them; exits 1 when every sample failed (naming the most common reason) or
    the USD cap stopped it before every sample ran."""
    for note in summary.repairs:  # what resuming had to set right: a torn line, a changed manifest
        errors.print(f"repaired: {shown(note)}", highlight=False, soft_wrap=True)
    console.print(
        f"{shown(benchmark)} · {shown(system)}: {summary.correct}/{summary.done} correct ({summary.accuracy:.3f}, "
        f"graded by {shown(grader)}), "
        f"{summary.done}/{summary.total} done ({summary.resumed} from earlier), {summary.errors} errors, "
        f"${summary.usd:.4f} spent → {shown(summary.out)}",
        highlight=False,
        soft_wrap=True,
    )
    if summary.done and summary.errors == summary.done:
        errors.print(
            f"[red]error:[/red] every sample failed; the most common reason: {summary.common_error}",
            highlight=False,
            soft_wrap=True,
        )
        raise typer.Exit(1)
    if summary.stopped_by_budget:
        console.print(
            f"stopped at the USD cap (${max_run_usd}): {summary.total - summary.done} samples not run; "
            "rerun with a higher --max-run-usd to finish",
            highlight=False,
            soft_wrap=True,
        )
        raise typer.Exit(1)


@config_options(ReportConfig, ("out", "baseline", "preference", "max_items"), arguments=("runs",))
def report_command(config: ConfigFileOption = None, *, flags: Flags) -> None:
    """Write a static HTML report (plots, tables, trajectory viewer) of evaluation runs."""
    try:
        settings = load_config(ReportConfig, config, flags)
        index = build_report(
            list(settings.runs),
            settings.out,
            baseline=settings.baseline,
            preference=settings.preference,
            max_items=settings.max_items,
        )
    except (PodiumError, ValueError) as error:
        raise fail(error) from error
    console.print(f"report: {shown(index)}", highlight=False)

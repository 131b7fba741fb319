"""``podium eval`` and ``podium report``.

Registered on the main app with ``app.command("eval")(eval_command)`` and ``app.command("report")(report_command)``.
Exit status: 0 done, 1 every sample failed or the run stopped at its USD cap with samples left, 2 invalid input
(config, benchmark, mismatched resume, a system that cannot produce an action).
"""

import asyncio
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from podium.cli.common import fail
from podium.cli.fields import Flags, config_options, load_config
from podium.cli.output import make_console, shown
from podium.config import read_structured_file
from podium.core.files import write_atomically
from podium.core.preference import Preference
from podium.core.printable import printable
from podium.core.progress import ProgressBar
from podium.costs.prices import PriceCatalog
from podium.datasets.loaders import Benchmark, get_benchmark
from podium.errors import ConfigError, PodiumError
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
PreferencesOption = Annotated[
    Path | None,
    typer.Option(
        "--preferences",
        help="Preference pairs (JSONL from `podium data preferences`, or a YAML/JSON list of instruction and weights): "
        "item i gets pair i mod n, its instruction appended to the task and its vector kept for rewards.",
    ),
]


BenchmarkOption = Annotated[
    str | None, typer.Option("--benchmark", help="Benchmark name (gsm8k, math500, gpqa_diamond, …).")
]
TasksOption = Annotated[
    Path | None,
    typer.Option("--tasks", help="Or a tasks file (JSONL of question, gold, verifier, optional id and metadata)."),
]
EvalPricesOption = Annotated[
    Path | None,
    typer.Option("--prices", help="Price sheet merged over the system pool's prices (evaluate under unseen prices)."),
]
SystemOption = Annotated[
    Path,
    typer.Option(
        "--system",
        help="System config file (YAML/JSON): its kind (single_model, majority_vote, self_refine, static_router, "
        "tools_model, orchestrator) and settings.",
    ),
]
Tau2ResultsOption = Annotated[
    Path | None,
    typer.Option("--tau2-results", help="Also write the run's tau2 conversations here, as `tau2 run` saves them."),
]


RayOption = Annotated[
    str | None,
    typer.Option(
        "--ray",
        help="Solve samples on Ray workers: 'local' (start Ray here), 'auto' (join this machine's cluster) or an "
        "address (HOST:6379, ray://HOST:10001); resume, lock and --max-usd stay here (needs the ray extra).",
    ),
]


GATE = (
    "against", ("metric", "--gate-metric"), ("cost_usd_scale", "--gate-usd-scale"), ("margin", "--gate-margin"),
    ("confidence", "--gate-confidence"), ("resamples", "--gate-resamples"),
)  # fmt: skip
"""How ``--against`` compares the run with a baseline run (:class:`GateConfig`)."""


@config_options(GateConfig, GATE)
def eval_command(
    system: SystemOption,
    out: Annotated[Path, typer.Option("--out", help="Run directory; rerunning with the same one resumes.")],
    benchmark: BenchmarkOption = None,
    tasks: TasksOption = None,
    samples: Annotated[int, typer.Option("--samples", min=1, help="Samples per item (k, for pass@2/mean@k).")] = 1,
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="Only the first N items.")] = None,
    concurrency: Annotated[int, typer.Option("--concurrency", min=1, help="Samples solved at once.")] = 4,
    max_usd: Annotated[
        float | None,
        typer.Option("--max-usd", min=0.0, help="Stop starting samples once the run has spent this many USD."),
    ] = None,
    data_dir: Annotated[
        Path | None, typer.Option("--data-dir", help="Benchmark data (default: $PODIUM_DATA or ../shared/data).")
    ] = None,
    hub: Annotated[
        bool, typer.Option("--hub", help="Load the benchmark from the Hugging Face hub (needs datasets).")
    ] = False,
    sandbox_config: Annotated[
        Path | None, typer.Option("--sandbox-config", help="Sandbox limits for code verifiers (SandboxConfig file).")
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", help="No progress bar.")] = False,
    ray: RayOption = None,
    tau2_results: Tau2ResultsOption = None,
    preferences: PreferencesOption = None,
    prices: EvalPricesOption = None,
    *,
    flags: Flags,
) -> None:
    """Evaluate a system on a benchmark; results go to OUT/results.jsonl as each sample finishes. With --against,
    compare it with a baseline run on the same items (paired bootstrap intervals) and say whether it wins."""
    try:
        gate = _gate(flags)
        chosen = _benchmark(benchmark, tasks)
        config = load_system_config(system)
        chosen_preferences = _preferences(preferences)
        grader = _grader(config.grading, sandbox_config, data_dir)
        sheet = PriceCatalog.from_file(prices) if prices is not None else None
        with solving_system(config, ray, concurrency, sheet) as built:
            evaluation = run_eval(
                chosen, built, out=out, samples=samples, limit=limit, concurrency=concurrency, max_usd=max_usd,
                system_config=_system_dump(config, sheet), data_dir=data_dir, source="hub" if hub else "local",
                grader=grader, progress=not quiet, preferences=chosen_preferences,
            )  # fmt: skip
            summary = asyncio.run(evaluation)
        _export_tau2(out, tau2_results, data_dir, quiet)
    except NotRunnable as error:  # a system that cannot produce an action: named with its file, nothing run
        raise fail(NotRunnable(f"{system} ({error.source})", error.problems)) from error
    except PodiumError as error:
        raise fail(error) from error
    report_summary(summary, chosen.name, built.name, max_usd, grader.grader_name(chosen.verifier))
    if gate.against is not None:
        _compare(gate, out)


def _gate(flags: Flags) -> GateConfig:
    """How ``--against`` compares the run (its options without ``--against`` are an error)."""
    gate = load_config(GateConfig, None, flags)
    if gate.against is None and flags:
        raise ConfigError(f"{', '.join(flags.names.values())} compare the run with a baseline: give --against RUN")
    return gate


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


def _benchmark(name: str | None, tasks: Path | None) -> Benchmark:
    """The benchmark named, or the tasks file as one."""
    if (name is None) == (tasks is None):
        raise ConfigError("give --benchmark NAME or --tasks FILE (one of them)")
    return get_benchmark(name) if name is not None else tasks_benchmark(tasks)  # type: ignore[arg-type]


LATER_FIELDS = ("grading", "instructions", "escalate_above", "prices_at_decision")
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


def report_summary(summary: EvalSummary, benchmark: str, system: str, max_usd: float | None, grader: str) -> None:
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
            f"stopped at the USD cap (${max_usd}): {summary.total - summary.done} samples not run; "
            "rerun with a higher --max-usd to finish",
            highlight=False,
            soft_wrap=True,
        )
        raise typer.Exit(1)


def report_command(
    runs: Annotated[
        list[Path],
        typer.Argument(help="Run directories of `podium eval`, or `podium data` stage directories / funnels."),
    ],
    out: Annotated[Path, typer.Option("--out", help="Directory for index.html, plots and trajectory pages.")],
    baseline: Annotated[
        str | None, typer.Option("--baseline", help="System name whose runs are M0 for the preference-aware score.")
    ] = None,
    preference: Annotated[
        Path | None, typer.Option("--preference", help="Preference file (YAML/JSON: instruction, weights).")
    ] = None,
    max_items: Annotated[int, typer.Option("--max-items", min=1, help="Attempts shown per trajectory page.")] = 300,
) -> None:
    """Write a static HTML report (plots, tables, trajectory viewer) of evaluation runs."""
    try:
        chosen = Preference.model_validate(read_structured_file(preference)) if preference else None
        index = build_report(runs, out, baseline=baseline, preference=chosen, max_items=max_items)
    except (PodiumError, ValueError) as error:
        raise fail(error) from error
    console.print(f"report: {shown(index)}", highlight=False)

"""``podium report``: a static HTML report of evaluation runs, readable offline.

``index.html`` holds the accuracy-versus-cost plot of each benchmark with its Pareto front, a table per
benchmark, and the tool-call distribution; ``runs/run-N.html`` is a trajectory viewer per run (turns, the
calls of a turn as a timeline, statuses, costs). Plots are SVG drawn with matplotlib's Agg backend; CSS and
JS are copied beside the pages. Nothing refers to a network resource. Funnels of ``podium data`` stages (a stage
directory or its ``funnel.json``) are shown as tables of their filters.
"""

import html
import re
import shutil
from collections import defaultdict
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import Any

from podium.charts import save_svg
from podium.core.preference import Preference
from podium.core.trajectory import Turn
from podium.errors import MissingExtraError
from podium.evaluate.funnels import funnel_sections, is_funnel
from podium.evaluate.metrics import PreferenceScore, RunMetrics, pareto_front, preference_score, run_metrics
from podium.evaluate.routing.metrics import Point
from podium.evaluate.runner import EvalRecord, RunManifest, load_run

MAX_TEXT_CHARS = 4_000
"""Longest model output or observation shown in the viewer (the rest is cut, and says so)."""
DEFAULT_PREFERENCE = Preference(weights={"outcome": 1.0, "compute": 1.0, "latency": 1.0})
"""Preference for the preference-aware score when none is given: outcome, cost and latency weigh alike."""
_STATIC = ("report.css", "index.js", "viewer.js")
"""Copied beside index.html; the trajectory pages in runs/ get their own copies of the CSS and viewer script."""


@dataclass
class Run:
    """One run directory, loaded."""

    directory: Path
    manifest: RunManifest
    records: list[EvalRecord]
    metrics: RunMetrics
    label: str
    """The system name, made unique among the runs of the report."""


def load_runs(directories: list[Path]) -> list[Run]:
    runs: list[Run] = []
    for directory in directories:
        manifest, records = load_run(directory)
        label = manifest.system
        if any(run.label == label and run.manifest.benchmark == manifest.benchmark for run in runs):
            label = f"{label} ({directory.name})"
        runs.append(Run(directory, manifest, records, run_metrics(records), label))
    return runs


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)


def _figure(width: float, height: float) -> Any:
    try:
        from matplotlib.figure import Figure  # a Figure without pyplot draws with Agg and keeps no global state
    except ImportError as error:
        raise MissingExtraError("reports need matplotlib: pip install matplotlib") from error
    return Figure(figsize=(width, height), layout="constrained")


def plot_accuracy_cost(benchmark: str, runs: list[Run], path: Path) -> None:
    """mean@k against USD per query (tokens per query when every run is free), Pareto front joined."""
    use_usd = any(run.metrics.usd_per_query > 0 for run in runs)
    points = [
        (run.metrics.usd_per_query if use_usd else run.metrics.tokens_per_query, run.metrics.mean_at_k) for run in runs
    ]
    figure = _figure(6.0, 4.0)
    axes = figure.add_subplot()
    for run, (cost, accuracy) in zip(runs, points, strict=True):
        axes.scatter([cost], [accuracy], s=40, zorder=3)
        axes.annotate(run.label, (cost, accuracy), textcoords="offset points", xytext=(5, 5), fontsize=8)
    front = pareto_front(points)
    axes.step(
        [points[i][0] for i in front],
        [points[i][1] for i in front],
        where="post",
        color="#888",
        linestyle="--",
        marker="o",
        markersize=11,
        markerfacecolor="none",
        label="Pareto front",
        zorder=2,
    )
    axes.ticklabel_format(axis="x", style="sci", scilimits=(-2, 4))
    axes.set_xlabel("USD per query" if use_usd else "tokens per query (every run is free)")
    axes.set_ylabel("accuracy (mean@k)")
    axes.set_ylim(-0.02, 1.02)
    axes.set_title(benchmark)
    axes.grid(alpha=0.3)
    axes.legend(loc="lower right", fontsize=8)
    save_svg(figure, path)


def plot_tool_calls(runs: list[Run], path: Path) -> None:
    """Calls per tool, one stacked horizontal bar per run."""
    tools = sorted({tool for run in runs for tool in run.metrics.tool_calls})
    figure = _figure(7.0, 1.0 + 0.45 * len(runs))
    axes = figure.add_subplot()
    labels = [f"{run.label} · {run.manifest.benchmark}" for run in runs]
    left = [0.0] * len(runs)
    for tool in tools:
        counts = [float(run.metrics.tool_calls.get(tool, 0)) for run in runs]
        axes.barh(labels, counts, left=left, label=tool)
        left = [a + b for a, b in zip(left, counts, strict=True)]
    axes.set_xlabel("tool calls")
    axes.invert_yaxis()
    axes.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    save_svg(figure, path)


def _fmt(value: float | None, digits: int = 3) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def _table(runs: list[Run], indices: list[int], scores: dict[int, PreferenceScore]) -> str:
    headers = [
        "system",
        "items",
        "queries",
        "pass@1",
        "pass@2",
        "mean@k",
        "USD/query",
        "tokens/query",
        "latency mean s",
        "latency p95 s",
        "errors",
        "graded by",
        "tool calls",
        "pref. score",
        "trajectories",
    ]
    rows = []
    for index in indices:
        run, m = runs[index], runs[index].metrics
        score = scores.get(index)
        cells = [
            html.escape(run.label),
            str(m.items),
            str(m.queries),
            _fmt(m.pass_at_1),
            _fmt(m.pass_at_2),
            _fmt(m.mean_at_k),
            f"{m.usd_per_query:.6f}",
            f"{m.tokens_per_query:.0f}",
            _fmt(m.latency_mean_s, 2),
            _fmt(m.latency_p95_s, 2),
            str(m.errors),
            html.escape("; ".join(m.graders) or "—"),
            str(sum(m.tool_calls.values())),
            _fmt(score.score) if score else "—",
            f'<a href="runs/run-{index}.html">view</a>',
        ]
        rows.append("<tr>" + "".join(f"<td>{cell}</td>" for cell in cells) + "</tr>")
    head = "".join(f"<th>{header}</th>" for header in headers)
    return f'<table class="metrics"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def _graders_note(runs: list[Run]) -> str:
    """Which grader decided correctness for the accuracy columns of a benchmark's table."""
    names = list(dict.fromkeys(name for run in runs for name in run.metrics.graders))
    graded = html.escape("; ".join(names)) if names else "no graded attempt"
    return f'<p class="graders">accuracy (pass@1, pass@2, mean@k): {graded}</p>'


def _clip(text: str) -> str:
    if len(text) <= MAX_TEXT_CHARS:
        return html.escape(text)
    return html.escape(text[:MAX_TEXT_CHARS]) + f"\n… ({len(text) - MAX_TEXT_CHARS} more characters)"


def _timeline(turn: Turn) -> str:
    """The turn's generation, then its calls, which were dispatched together once the generation ended."""
    generation_s = turn.usage.latency_s
    span = max([turn.wall_s, generation_s, *(generation_s + r.usage.latency_s for r in turn.results)]) or 1.0
    lanes = [
        f'<div class="lane"><div class="bar generation" style="left:0%;width:{100 * generation_s / span:.2f}%">'
        f"<span>generation {generation_s:.2f}s</span></div></div>"
    ]
    for result in turn.results:
        left, width = 100 * generation_s / span, 100 * result.usage.latency_s / span
        label = f"{result.call.name} · {result.status} · {result.usage.latency_s:.2f}s · ${result.usage.usd:.5f}"
        tip = html.escape(result.reason or result.observation[:300], quote=True)
        lanes.append(
            f'<div class="lane"><div class="bar {result.status}" title="{tip}" '
            f'style="left:{left:.2f}%;width:{width:.2f}%"><span>{html.escape(label)}</span></div></div>'
        )
    return f'<div class="timeline">{"".join(lanes)}</div>'


def _turn(turn: Turn) -> str:
    usage = turn.usage
    parts = [
        f'<div class="turn"><div class="meta">turn {turn.index} · {usage.input_tokens} in / {usage.output_tokens}'
        f" out tokens · ${usage.usd:.6f} · {turn.wall_s:.2f}s</div>",
        _timeline(turn),
        f"<pre>{_clip(turn.output)}</pre>",
    ]
    if turn.parse_error:
        parts.append(f'<div class="meta">parse error: {html.escape(turn.parse_error)}</div>')
    for result in turn.results:
        arguments = html.escape(str(result.call.arguments)[:500])
        parts.append(
            f"<details><summary>{html.escape(result.call.name)}({arguments}) → {result.status}</summary>"
            f'<div class="observation">{_clip(result.observation or str(result.reason or ""))}</div></details>'
        )
    return "".join(parts) + "</div>"


def _item(record: EvalRecord) -> str:
    state = "correct" if record.verdict.correct else "wrong"
    mark = "✓" if record.verdict.correct else "✗"
    summary = (
        f'<span class="mark">{mark}</span> {html.escape(record.item_id)} #{record.sample} · answer '
        f"{html.escape((record.answer or '—')[:80])} · gold {html.escape(record.gold[:80])} · "
        f"${record.usage.usd:.6f} · {record.usage.tokens} tokens · {record.wall_s:.2f}s"
    )
    trajectory = record.trajectory
    notes = [f"stop: {trajectory.stop_reason or '—'}"]
    if record.verdict.reason:
        notes.append(f"verdict: {record.verdict.reason}")
    if record.error:
        notes.append(f"error: {record.error}")
    body = f'<div class="meta">{html.escape(" · ".join(notes))}</div><pre>{_clip(trajectory.question)}</pre>' + "".join(
        _turn(turn) for turn in trajectory.turns
    )
    return f'<details class="item {state}"><summary>{summary}</summary>{body}</details>'


def _page(title: str, body: str, script: str, prefix: str = "") -> str:
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        f'<link rel="stylesheet" href="{prefix}report.css"></head><body>{body}'
        f'<script src="{prefix}{script}"></script></body></html>\n'
    )


def _viewer(run: Run, max_items: int) -> str:
    records = sorted(run.records, key=lambda record: record.key)
    shown = records[:max_items]
    notice = ""
    if run.manifest.benchmark.startswith("gpqa"):
        notice = (
            '<p class="notice">This page holds GPQA questions in plain text: keep it private; the GPQA authors '
            "ask that the questions not be put online.</p>"
        )
    if len(records) > len(shown):
        notice += f'<p class="notice">Showing the first {len(shown)} of {len(records)} attempts.</p>'
    body = (
        f'<p><a href="../index.html">← report</a></p><h1>{html.escape(run.label)} · '
        f"{html.escape(run.manifest.benchmark)}</h1>{notice}"
        '<div class="controls"><input id="search" type="search" placeholder="filter by text"> '
        '<label><input id="wrong-only" type="checkbox"> wrong only</label> <span id="shown"></span></div>'
        + "".join(_item(record) for record in shown)
    )
    return _page(f"{run.label} · {run.manifest.benchmark}", body, "viewer.js", prefix="../")


def _preference_scores(runs: list[Run], baseline: str | None, preference: Preference) -> dict[int, PreferenceScore]:
    if baseline is None:
        return {}
    tools = sorted(set(preference.weights) - {"outcome", "compute", "latency"})
    references = {run.manifest.benchmark: run.records for run in runs if run.manifest.system == baseline}
    return {
        index: preference_score(run.records, references[run.manifest.benchmark], tools, preference)
        for index, run in enumerate(runs)
        if run.manifest.benchmark in references
    }


def build_report(
    run_dirs: list[str | Path],
    out: str | Path,
    *,
    baseline: str | None = None,
    preference: Preference | None = None,
    max_items: int = 300,
) -> Path:
    """Write the report for ``run_dirs`` into ``out``; returns the index page.

    With ``baseline`` (a system name), each run is also scored with ToolOrchestra's preference-aware score
    against that system's run on the same benchmark.
    """
    sources = [Path(directory) for directory in run_dirs]
    runs = load_runs([source for source in sources if not is_funnel(source)])
    preference = preference or DEFAULT_PREFERENCE
    scores = _preference_scores(runs, baseline, preference)
    out = Path(out)
    (out / "plots").mkdir(parents=True, exist_ok=True)
    (out / "runs").mkdir(exist_ok=True)
    static = files("podium.evaluate") / "report_static"
    for name in _STATIC:
        shutil.copyfile(str(static / name), out / name)
    by_benchmark: dict[str, list[int]] = defaultdict(list)
    for name in ("report.css", "viewer.js"):
        shutil.copyfile(out / name, out / "runs" / name)
    for index, run in enumerate(runs):
        by_benchmark[run.manifest.benchmark].append(index)
        (out / "runs" / f"run-{index}.html").write_text(_viewer(run, max_items), encoding="utf-8")
    sections = []
    for benchmark, indices in sorted(by_benchmark.items()):
        plot = f"plots/cost_{_slug(benchmark)}.svg"
        plot_accuracy_cost(benchmark, [runs[index] for index in indices], out / plot)
        table = _table(runs, indices, scores)
        sections.append(
            f'<section class="benchmark"><h2>{html.escape(benchmark)}</h2>'
            f'<img class="plot" src="{plot}" alt="accuracy against cost on {html.escape(benchmark)}">'
            f"{_graders_note([runs[index] for index in indices])}{table}</section>"
        )
    if any(run.metrics.tool_calls for run in runs):
        plot_tool_calls(runs, out / "plots" / "tool_calls.svg")
        tools = '<img class="plot" src="plots/tool_calls.svg" alt="tool-call distribution">'
    else:
        tools = "<p>No run made tool calls.</p>"
    preference_note = (
        f"<p>pref. score: ToolOrchestra's preference-aware score R<sup>e</sup> summed over attempts, each against "
        f"<b>{html.escape(baseline)}</b>'s attempt at the same item; "
        f"weights {html.escape(str(preference.weights))}.</p>"
        if baseline
        else ""
    )
    body = (
        f'<h1>Podium evaluation report</h1><p id="plot-status"></p>{preference_note}{"".join(sections)}'
        f'<section id="tool-calls"><h2>Tool-call distribution</h2>{tools}</section>'
        f"{funnel_sections([source for source in sources if is_funnel(source)])}"
    )
    index_page = out / "index.html"
    index_page.write_text(_page("Podium evaluation report", body, "index.js"), encoding="utf-8")
    return index_page


def plot_routing(curves: dict[str, list[Point]], path: Path, title: str = "cost against accuracy") -> None:
    """Every routing system's accuracy against USD per question: routers as their threshold sweeps, one-point
    systems (single models, oracle, orchestrators) as labelled markers."""
    figure = _figure(6.5, 4.2)
    axes = figure.add_subplot()
    for name, unsorted in curves.items():
        points = sorted(unsorted, key=lambda point: (point.usd_per_question, point.accuracy))
        costs = [point.usd_per_question for point in points]
        accuracies = [point.accuracy for point in points]
        if len(points) > 1:
            axes.plot(costs, accuracies, label=name, linewidth=1.2, marker=".", markersize=3)
        else:
            axes.scatter(costs, accuracies, s=45, zorder=3, marker="*" if name.startswith("orch") else "o")
            axes.annotate(name, (costs[0], accuracies[0]), textcoords="offset points", xytext=(5, -10), fontsize=8)
    axes.set_xlabel("USD per question")
    axes.set_ylabel("accuracy")
    axes.set_title(title)
    axes.grid(alpha=0.3)
    axes.legend(loc="lower right", fontsize=8)
    save_svg(figure, path)


def write_routing_report(
    out: str | Path, curves: dict[str, list[Point]], table: dict[str, dict[str, float | None]]
) -> Path:
    """``out/routing.html``: the cost-accuracy chart of every curve and the metrics table (rows: its systems, those
    without a curve of their own included)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    plot_routing(curves, out / "routing.svg")
    metrics = list(table)
    systems = list(table[metrics[0]])
    head = "".join(f"<th>{html.escape(metric)}</th>" for metric in metrics)
    rows = "".join(
        f"<tr><td>{html.escape(system)}</td>"
        + "".join(f"<td>{_fmt(table[metric].get(system), 4)}</td>" for metric in metrics)
        + "</tr>"
        for system in systems
    )
    body = (
        '<h1>Routing: cost against accuracy</h1><img class="plot" src="routing.svg" alt="cost against accuracy">'
        f"<table><tr><th>system</th>{head}</tr>{rows}</table>"
    )
    page = out / "routing.html"
    page.write_text(
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>Podium routing report</title></head>'
        f"<body>{body}</body></html>\n",
        encoding="utf-8",
    )
    return page

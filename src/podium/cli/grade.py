"""``podium grade``: grade a JSONL file of responses with the graders evaluation and training use.

Each row holds a ``response`` and either an ``id`` (an item of ``--benchmark``: the loader's id such as
``math500-test/algebra/1.json``, or the item's own id field, or its 0-based line number where the data has none)
or a ``gold`` graded with the grader ``--kind`` names; ``question`` is optional context. ``--kind judge`` has a
model of the pool (``--judge-model``) grade every row, also rows looked up in ``--benchmark``.

Exit status: 0 every row was graded (right or wrong); 1 some rows could not be graded (malformed, unknown id,
judge failure; each still has its output line, with the reason); 2 invalid invocation (unreadable file, unknown
benchmark, conflicting options).
"""

import asyncio
from pathlib import Path

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from podium.cli.common import ConfigFileOption, JsonOption, console, fail, open_pool
from podium.cli.fields import Flags, config_options, load_config
from podium.cli.output import print_json_line, shown
from podium.core.progress import ProgressBar
from podium.datasets.items import BenchmarkItem
from podium.datasets.loaders import get_benchmark
from podium.errors import ConfigError, PodiumError
from podium.graders.grader import Grader
from podium.graders.judge import JudgeVerifier
from podium.graders.responses import (
    GradeConfig,
    GradedRow,
    GradeKind,
    grade_lines,
    item_index,
    read_lines,
    summarise,
)
from podium.graders.text import TokenF1Verifier
from podium.graders.verdict import Verifier
from podium.sandbox import SandboxConfig

MAX_CELL_CHARS = 60
"""Longest extracted answer or reason shown in the table (``--json`` gives them whole)."""


def _items(benchmark: str | None, kind: GradeKind | None, data_dir: Path | None) -> dict[str, BenchmarkItem] | None:
    if benchmark is None:
        return None
    chosen = get_benchmark(benchmark)
    if chosen.verifier == "environment":
        raise ConfigError(f"{benchmark} items are graded from trajectories, not text responses (see `podium env`)")
    if kind not in (None, "judge"):
        raise ConfigError("--kind with --benchmark must be judge (the benchmark's items name their own grader)")
    return item_index(chosen.items(data_dir=data_dir))


def _override(
    kind: GradeKind | None, judge_model: str | None, pool: str | None, f1_threshold: float
) -> Verifier | None:
    if kind == "f1":
        return TokenF1Verifier(f1_threshold)
    if kind != "judge":
        if judge_model is not None:
            raise ConfigError("--judge-model needs --kind judge")
        return None
    if judge_model is None:
        raise ConfigError("--kind judge needs --judge-model (a worker of --pool)")
    built = open_pool(None if pool is None else Path(pool))
    if judge_model not in built.backends:
        raise ConfigError(f"--judge-model: no worker '{judge_model}' (workers: {', '.join(built.backends)})")
    return JudgeVerifier(built.backends[judge_model])


def _sandbox(path: str | None, allow_unisolated: bool) -> SandboxConfig:
    config = SandboxConfig.from_file(path) if path else SandboxConfig()
    if allow_unisolated:
        config.allow_unisolated = True
    return config


def _grade(grader: Grader, lines: list[tuple[int, str]], kind, items, concurrency: int, quiet: bool) -> list[GradedRow]:
    progress = ProgressBar(
        TextColumn("[bold]grading"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=Console(stderr=True), transient=True, disable=quiet,
    )  # fmt: skip
    with progress:
        task = progress.add_task("grading", total=len(lines))
        return asyncio.run(
            grade_lines(
                grader, lines, kind=kind, items=items, concurrency=concurrency,
                on_done=lambda _: progress.advance(task),
            )
        )  # fmt: skip


def _clip(text: str | None) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= MAX_CELL_CHARS else text[: MAX_CELL_CHARS - 1] + "…"


def print_table(results: list[GradedRow]) -> None:
    """The results as a table, then the summary line."""
    table = Table()
    for column in ("line", "id", "correct", "extracted", "reason"):
        table.add_column(column, overflow="fold")
    for result in results:
        mark = "[green]✓[/green]" if result.correct else "[red]✗[/red]"
        if result.error:
            mark = "[yellow]not graded[/yellow]"
        row = (result.id or "", _clip(result.extracted), _clip(result.reason))
        table.add_row(str(result.line), shown(row[0]), mark, shown(row[1]), shown(row[2]))
    console.print(table)
    summary = summarise(results)
    graders = sorted({result.grader for result in results if result.grader})
    console.print(
        f"{summary.rows} rows: {summary.correct} correct, {summary.wrong} wrong, {summary.failed} not graded; "
        f"accuracy {summary.accuracy:.3f} over graded rows; graded by {shown('; '.join(graders) or '—')}",
        highlight=False,
        soft_wrap=True,
    )


def print_json(results: list[GradedRow]) -> None:
    """One JSON object per input row, in input order; ``id`` only where the row gave one."""
    for result in results:
        fields = result.model_dump(mode="json", exclude={"id"} if result.id is None else None)
        print_json_line(fields)


GRADE_FIELDS = ("responses", "benchmark", "kind", "judge_model", "pool", "f1_threshold", "data_dir", "sandbox_config",
                "allow_unisolated", "concurrency", "quiet")  # fmt: skip
"""Every field of :class:`GradeConfig`, each a flag."""


@config_options(GradeConfig, GRADE_FIELDS)
def grade_command(config: ConfigFileOption = None, as_json: JsonOption = False, *, flags: Flags) -> None:
    """Grade a JSONL file of responses against benchmark items (--benchmark) or their own golds (--kind)."""
    try:
        settings = load_config(GradeConfig, config, flags)
        if settings.benchmark is None and settings.kind is None:
            raise ConfigError("give --benchmark (rows name item ids) or --kind (rows carry a gold), or both")
        lines = read_lines(Path(settings.responses))
        data_dir = None if settings.data_dir is None else Path(settings.data_dir)
        items = _items(settings.benchmark, settings.kind, data_dir)
        override = _override(settings.kind, settings.judge_model, settings.pool, settings.f1_threshold)
        sandbox = _sandbox(settings.sandbox_config, settings.allow_unisolated)
        grader = Grader(sandbox_config=sandbox, data_dir=data_dir, override=override)
    except OSError as error:
        raise fail(ConfigError(f"cannot read {settings.responses}: {error.strerror}")) from error
    except (PodiumError, ValueError) as error:
        raise fail(error) from error
    results = _grade(grader, lines, settings.kind, items, settings.concurrency, settings.quiet)
    (print_json if as_json else print_table)(results)
    if summarise(results).failed:
        raise typer.Exit(1)

"""``podium data``: the stages that make training data (collect, filter-rl, curriculum, classify-failures,
preferences). Each writes JSONL into ``--out``, resumes when rerun with the same ``--out``, stops starting work at
``--max-usd``, shows progress on stderr and ends with its funnel (a table, or JSON Lines with ``--json``).

Every option has the field of the stage's config behind it; ``--config FILE`` (YAML/JSON) gives any of them, and
flags that are given override the file. Exit status: 0 done, 1 the USD cap left work undone (rerun with a higher
cap to finish), 2 invalid input.
"""

import asyncio
from collections.abc import Awaitable
from pathlib import Path
from typing import Annotated, Any

import typer

from podium.backends.base import BackendError
from podium.cli.common import JsonOption, fail, field_option, report_funnel, stage_config
from podium.config import read_structured_file
from podium.data import (
    ClassifyConfig,
    CollectConfig,
    CurriculumConfig,
    DifficultyConfig,
    PreferenceConfig,
    classify_failures,
    collect,
    curriculum,
    filter_rl,
    propose_preferences,
)
from podium.data.latencies import measured_latencies
from podium.data.solver import worker_solver
from podium.errors import PodiumError
from podium.solve.records import Funnel

app = typer.Typer(help="Make training data: teacher trajectories, RL sets, curricula, failure classes, preferences.")

ConfigFile = Annotated[Path | None, typer.Option("--config", help="Stage config (YAML/JSON); flags override it.")]
Quiet = Annotated[bool, typer.Option("--quiet", help="No progress bar.")]


def _run(work: Awaitable[Funnel], as_json: bool) -> None:
    try:
        funnel = asyncio.run(work)
    except (PodiumError, BackendError) as error:
        raise fail(error) from error
    report_funnel(funnel, as_json)


def _config(kind: Any, path: Path | None, flags: dict[str, Any]) -> Any:
    try:
        return stage_config(kind, path, flags)
    except PodiumError as error:
        raise fail(error) from error


def _solver(path: Path | None) -> dict[str, Any] | None:
    """A solver file (a ``podium eval`` orchestrator system file serves) as config data."""
    if path is None:
        return None
    try:
        return read_structured_file(path)
    except PodiumError as error:
        raise fail(error) from error


def _temperatures(text: str | None) -> list[float] | None:
    if text is None:
        return None
    try:
        return [float(part) for part in text.split(",") if part.strip()]
    except ValueError as error:
        raise fail(ValueError(f"temperatures must be numbers separated by commas, got {text!r}")) from error


@app.command("collect")
def collect_command(
    out: Annotated[str | None, field_option(CollectConfig, "out", "--out")] = None,
    teacher: Annotated[
        Path | None,
        typer.Option(
            "--teacher",
            help="Teacher solver file (pool + run config; an "
            "eval orchestrator system file works) (default: the embedded offline pool).",
        ),
    ] = None,
    benchmark: Annotated[str | None, field_option(CollectConfig, "benchmark", "--benchmark")] = None,
    tasks: Annotated[str | None, field_option(CollectConfig, "tasks", "--tasks")] = None,
    from_eval: Annotated[list[str] | None, field_option(CollectConfig, "from_eval", "--from-eval")] = None,
    limit: Annotated[int | None, field_option(CollectConfig, "limit", "--limit", min=1)] = None,
    samples: Annotated[int | None, field_option(CollectConfig, "samples", "--samples", min=1)] = None,
    temperature: Annotated[float | None, field_option(CollectConfig, "temperature", "--temperature", min=0)] = None,
    per_question: Annotated[int | None, field_option(CollectConfig, "per_question", "--per-question", min=1)] = None,
    max_tool_share: Annotated[float | None, field_option(CollectConfig, "max_tool_share", "--max-tool-share")] = None,
    prefer_recovered: Annotated[
        bool | None, field_option(CollectConfig, "prefer_recovered", "--prefer-recovered/--no-prefer-recovered")
    ] = None,
    constraints: Annotated[str | None, field_option(CollectConfig, "constraints", "--constraints")] = None,
    exclude: Annotated[list[str] | None, field_option(CollectConfig, "exclude", "--exclude")] = None,
    data_dir: Annotated[str | None, field_option(CollectConfig, "data_dir", "--data-dir")] = None,
    concurrency: Annotated[int | None, field_option(CollectConfig, "concurrency", "--concurrency", min=1)] = None,
    max_usd: Annotated[float | None, field_option(CollectConfig, "max_usd", "--max-usd", min=0)] = None,
    seed: Annotated[int | None, field_option(CollectConfig, "seed", "--seed")] = None,
    config: ConfigFile = None,
    as_json: JsonOption = False,
    quiet: Quiet = False,
) -> None:
    """Teacher trajectories for SFT (ParaManager): n attempts per question, graded, filtered, balanced."""
    flags = {
        "out": out, "teacher": _solver(teacher), "benchmark": benchmark, "tasks": tasks, "from_eval": from_eval,
        "limit": limit, "samples": samples, "temperature": temperature, "per_question": per_question,
        "max_tool_share": max_tool_share, "prefer_recovered": prefer_recovered, "constraints": constraints,
        "exclude": exclude, "data_dir": data_dir, "concurrency": concurrency, "max_usd": max_usd, "seed": seed,
    }  # fmt: skip
    settings = _config(CollectConfig, config, flags)
    _run(collect(settings, progress=not quiet), as_json)


@app.command("filter-rl")
def filter_rl_command(
    out: Annotated[str | None, field_option(DifficultyConfig, "out", "--out")] = None,
    solver: Annotated[
        Path | None,
        typer.Option(
            "--solver",
            help="Solver file that answers (pool + run config) (default: --worker alone: no tools, one turn).",
        ),
    ] = None,
    pool: Annotated[Path | None, typer.Option("--pool", help="Pool YAML of --worker (default: embedded).")] = None,
    worker: Annotated[str | None, typer.Option("--worker", help="Worker that answers (default: the first).")] = None,
    benchmark: Annotated[str | None, field_option(DifficultyConfig, "benchmark", "--benchmark")] = None,
    tasks: Annotated[str | None, field_option(DifficultyConfig, "tasks", "--tasks")] = None,
    limit: Annotated[int | None, field_option(DifficultyConfig, "limit", "--limit", min=1)] = None,
    samples: Annotated[int | None, field_option(DifficultyConfig, "samples", "--samples", min=1)] = None,
    temperature: Annotated[float | None, field_option(DifficultyConfig, "temperature", "--temperature", min=0)] = None,
    min_rate: Annotated[float | None, field_option(DifficultyConfig, "min_rate", "--min-rate")] = None,
    max_rate: Annotated[float | None, field_option(DifficultyConfig, "max_rate", "--max-rate")] = None,
    preferences: Annotated[str | None, field_option(DifficultyConfig, "preferences", "--preferences")] = None,
    exclude: Annotated[list[str] | None, field_option(DifficultyConfig, "exclude", "--exclude")] = None,
    data_dir: Annotated[str | None, field_option(DifficultyConfig, "data_dir", "--data-dir")] = None,
    concurrency: Annotated[int | None, field_option(DifficultyConfig, "concurrency", "--concurrency", min=1)] = None,
    max_usd: Annotated[float | None, field_option(DifficultyConfig, "max_usd", "--max-usd", min=0)] = None,
    seed: Annotated[int | None, field_option(DifficultyConfig, "seed", "--seed")] = None,
    config: ConfigFile = None,
    as_json: JsonOption = False,
    quiet: Quiet = False,
) -> None:
    """The RL set (ParaManager): keep questions a worker solves sometimes, never always or never."""
    chosen = _solver(solver)
    if chosen is None and (pool is not None or worker is not None):
        chosen = worker_solver(str(pool) if pool else None, worker).model_dump(exclude_defaults=True)
    flags = {
        "out": out, "solver": chosen, "benchmark": benchmark, "tasks": tasks, "limit": limit, "samples": samples,
        "temperature": temperature, "min_rate": min_rate, "max_rate": max_rate, "preferences": preferences,
        "exclude": exclude, "data_dir": data_dir, "concurrency": concurrency, "max_usd": max_usd, "seed": seed,
    }  # fmt: skip
    settings = _config(DifficultyConfig, config, flags)
    _run(filter_rl(settings, progress=not quiet), as_json)


@app.command("curriculum")
def curriculum_command(
    out: Annotated[str | None, field_option(CurriculumConfig, "out", "--out")] = None,
    cold_start: Annotated[Path | None, typer.Option("--cold-start", help="π0 solver file (default: embedded).")] = None,
    teacher: Annotated[Path | None, typer.Option("--teacher", help="π* solver file (default: embedded).")] = None,
    fallback: Annotated[
        list[Path] | None,
        typer.Option("--fallback", help="Fallback teacher solver file; repeat in cascade order (strongest last)."),
    ] = None,
    benchmark: Annotated[str | None, field_option(CurriculumConfig, "benchmark", "--benchmark")] = None,
    tasks: Annotated[str | None, field_option(CurriculumConfig, "tasks", "--tasks")] = None,
    limit: Annotated[int | None, field_option(CurriculumConfig, "limit", "--limit", min=1)] = None,
    attempts: Annotated[int | None, field_option(CurriculumConfig, "attempts", "--attempts", min=1)] = None,
    probe_temperature: Annotated[
        float | None, field_option(CurriculumConfig, "probe_temperature", "--probe-temperature", min=0)
    ] = None,
    sft_temperatures: Annotated[
        str | None, field_option(CurriculumConfig, "sft_temperatures", "--sft-temperatures", metavar="T1,T2")
    ] = None,
    rl_temperatures: Annotated[
        str | None, field_option(CurriculumConfig, "rl_temperatures", "--rl-temperatures", metavar="T1,T2,T3")
    ] = None,
    constraints: Annotated[str | None, field_option(CurriculumConfig, "constraints", "--constraints")] = None,
    preferences: Annotated[str | None, field_option(CurriculumConfig, "preferences", "--preferences")] = None,
    exclude: Annotated[list[str] | None, field_option(CurriculumConfig, "exclude", "--exclude")] = None,
    data_dir: Annotated[str | None, field_option(CurriculumConfig, "data_dir", "--data-dir")] = None,
    concurrency: Annotated[int | None, field_option(CurriculumConfig, "concurrency", "--concurrency", min=1)] = None,
    max_usd: Annotated[float | None, field_option(CurriculumConfig, "max_usd", "--max-usd", min=0)] = None,
    seed: Annotated[int | None, field_option(CurriculumConfig, "seed", "--seed")] = None,
    config: ConfigFile = None,
    as_json: JsonOption = False,
    quiet: Quiet = False,
) -> None:
    """Uno's verifier-gated curriculum: π0 and π* at pass@k split the tasks into SFT and RL data."""
    flags = {
        "out": out, "cold_start": _solver(cold_start), "teacher": _solver(teacher),
        "fallback": [_solver(path) for path in fallback] if fallback else None, "benchmark": benchmark,
        "tasks": tasks, "limit": limit, "attempts": attempts, "probe_temperature": probe_temperature,
        "sft_temperatures": _temperatures(sft_temperatures), "rl_temperatures": _temperatures(rl_temperatures),
        "constraints": constraints, "preferences": preferences, "exclude": exclude, "data_dir": data_dir,
        "concurrency": concurrency, "max_usd": max_usd, "seed": seed,
    }  # fmt: skip
    settings = _config(CurriculumConfig, config, flags)
    _run(curriculum(settings, progress=not quiet), as_json)


@app.command("classify-failures")
def classify_failures_command(
    inputs: Annotated[
        list[str] | None, typer.Argument(help="failures.jsonl files, eval runs or results files.")
    ] = None,
    out: Annotated[str | None, field_option(ClassifyConfig, "out", "--out")] = None,
    pool: Annotated[str | None, field_option(ClassifyConfig, "pool", "--pool")] = None,
    worker: Annotated[str | None, field_option(ClassifyConfig, "worker", "--worker")] = None,
    max_words: Annotated[int | None, field_option(ClassifyConfig, "max_words", "--max-words", min=1)] = None,
    min_count: Annotated[int | None, field_option(ClassifyConfig, "min_count", "--min-count", min=1)] = None,
    attempts: Annotated[int | None, field_option(ClassifyConfig, "attempts", "--attempts", min=1)] = None,
    max_tokens: Annotated[int | None, field_option(ClassifyConfig, "max_tokens", "--max-tokens", min=1)] = None,
    concurrency: Annotated[int | None, field_option(ClassifyConfig, "concurrency", "--concurrency", min=1)] = None,
    max_usd: Annotated[float | None, field_option(ClassifyConfig, "max_usd", "--max-usd", min=0)] = None,
    config: ConfigFile = None,
    as_json: JsonOption = False,
    quiet: Quiet = False,
) -> None:
    """Uno's failure classifier: a root cause, evidence and a constraint for each failed trajectory."""
    flags = {
        "inputs": inputs or None, "out": out, "pool": pool, "worker": worker, "max_words": max_words,
        "min_count": min_count, "attempts": attempts, "max_tokens": max_tokens, "concurrency": concurrency,
        "max_usd": max_usd,
    }  # fmt: skip
    settings = _config(ClassifyConfig, config, flags)
    _run(classify_failures(settings, progress=not quiet), as_json)


@app.command("preferences")
def preferences_command(
    out: Annotated[str | None, field_option(PreferenceConfig, "out", "--out")] = None,
    pool: Annotated[str | None, field_option(PreferenceConfig, "pool", "--pool")] = None,
    llm_pool: Annotated[str | None, field_option(PreferenceConfig, "llm_pool", "--llm-pool")] = None,
    proposer: Annotated[str | None, field_option(PreferenceConfig, "proposer", "--proposer")] = None,
    validator: Annotated[str | None, field_option(PreferenceConfig, "validator", "--validator")] = None,
    pairs: Annotated[int | None, field_option(PreferenceConfig, "pairs", "--pairs", min=1)] = None,
    per_request: Annotated[int | None, field_option(PreferenceConfig, "per_request", "--per-request", min=1)] = None,
    eval_fraction: Annotated[float | None, field_option(PreferenceConfig, "eval_fraction", "--eval-fraction")] = None,
    latencies_from: Annotated[
        list[Path] | None,
        typer.Option(
            "--latencies-from",
            help="`podium eval` runs whose mean latency per tool is shown to the proposer (repeatable).",
        ),
    ] = None,
    concurrency: Annotated[int | None, field_option(PreferenceConfig, "concurrency", "--concurrency", min=1)] = None,
    max_usd: Annotated[float | None, field_option(PreferenceConfig, "max_usd", "--max-usd", min=0)] = None,
    seed: Annotated[int | None, field_option(PreferenceConfig, "seed", "--seed")] = None,
    config: ConfigFile = None,
    as_json: JsonOption = False,
    quiet: Quiet = False,
) -> None:
    """ToolOrchestra's preference pairs: proposed from the pool, checked by rules and a second LLM, split."""
    try:
        latencies = measured_latencies(latencies_from) if latencies_from else None
    except PodiumError as error:
        raise fail(error) from error
    flags = {
        "out": out, "pool": pool, "llm_pool": llm_pool, "proposer": proposer, "validator": validator, "pairs": pairs,
        "per_request": per_request, "eval_fraction": eval_fraction, "latencies": latencies,
        "concurrency": concurrency, "max_usd": max_usd, "seed": seed,
    }  # fmt: skip
    settings = _config(PreferenceConfig, config, flags)
    _run(propose_preferences(settings, progress=not quiet), as_json)

"""Resumable evaluation runs: items × samples solved concurrently, each result appended as it finishes.

A run directory holds ``manifest.json`` (benchmark, system, settings) and ``results.jsonl`` (one
:class:`~podium.graders.records.GradedTrajectory` per finished (item, sample)). Rerunning the same command
resumes: finished samples are skipped and never written twice. A process killed mid-write leaves at most a
torn last line; it is detected and dropped (the file is rewritten without it) before anything new is appended.
"""

import asyncio
import os
import time
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from podium.benchmarks.items import BenchmarkItem
from podium.benchmarks.loaders import Benchmark
from podium.core.budget import StopReason
from podium.core.preference import Preference
from podium.core.record import Record
from podium.core.trajectory import Trajectory, to_json_line
from podium.errors import PodiumError
from podium.evaluate.systems import System
from podium.graders.grader import Grader, gold_text
from podium.graders.records import GradedTrajectory as EvalRecord
from podium.graders.records import read_graded as read_results
from podium.graders.verdict import Verdict

MANIFEST_FILE = "manifest.json"
RESULTS_FILE = "results.jsonl"


class EvalError(PodiumError):
    """An evaluation cannot start or resume (mismatched settings, unsupported benchmark)."""


class RunManifest(Record):
    """What a run directory holds; a resume must match it."""

    benchmark: str
    """Benchmark name."""
    source: Literal["local", "hub"] = "local"
    """Where the items came from."""
    system: str
    """System name."""
    system_config: dict[str, Any] = Field(default_factory=dict)
    """The system's config as given (empty for systems built in code)."""
    samples: int
    """Samples per item."""
    preferences: list[Preference] = Field(default_factory=list)
    """User preferences given to the items (item i gets preference i mod n); empty when none."""


class EvalSummary(Record):
    """What a run did."""

    out: str
    """The run directory."""
    total: int
    """Samples selected (items × samples)."""
    done: int
    """Samples with a result, old and new."""
    resumed: int
    """Samples already done when this invocation started."""
    correct: int
    """Correct samples among ``done``."""
    errors: int
    """Samples whose system failed."""
    usd: float
    """Spend of the whole run (every invocation)."""
    dropped_lines: int = 0
    """Torn or duplicate lines removed from ``results.jsonl`` before resuming."""
    stopped_by_budget: bool = False
    """Whether samples were left unlaunched because the USD cap was reached."""

    @property
    def accuracy(self) -> float:
        return self.correct / self.done if self.done else 0.0


def repair_results(path: str | Path) -> tuple[list[EvalRecord], int]:
    """Read a results file and, if any line was unusable or the last line unterminated, rewrite it atomically
    with only the good records, so new lines are never appended to a torn one."""
    path = Path(path)
    records, dropped = read_results(path)
    if path.exists() and (dropped or (path.stat().st_size and not path.read_bytes().endswith(b"\n"))):
        temporary = path.with_suffix(".jsonl.repair")
        temporary.write_text("".join(to_json_line(record) for record in records), encoding="utf-8")
        os.replace(temporary, path)
    return records, dropped


def check_manifest(out: Path, manifest: RunManifest) -> None:
    """Save the manifest of a new run, or refuse to resume a run made with other settings."""
    path = out / MANIFEST_FILE
    if not path.exists():
        path.write_text(manifest.model_dump_json(indent=2) + "\n", encoding="utf-8")
        return
    saved = RunManifest.model_validate_json(path.read_text(encoding="utf-8"))
    changed = [name for name in RunManifest.model_fields if getattr(saved, name) != getattr(manifest, name)]
    if changed:
        details = "; ".join(
            f"{name}: was {getattr(saved, name)!r}, now {getattr(manifest, name)!r}" for name in changed
        )
        raise EvalError(f"{out} holds a run with other settings ({details}); use another --out to start a new run")


def with_preferences(items: list[BenchmarkItem], preferences: Sequence[Preference]) -> list[BenchmarkItem]:
    """Item i with preference i mod n in its metadata (``preference``); the items unchanged without any."""
    if not preferences:
        return items
    return [
        item.model_copy(
            update={"metadata": {**item.metadata, "preference": preferences[i % len(preferences)].model_dump()}}
        )
        for i, item in enumerate(items)
    ]


def _failed_trajectory(item: BenchmarkItem, error: Exception, wall_s: float) -> Trajectory:
    return Trajectory(
        question=item.question,
        stop_reason=StopReason.ERROR,
        wall_s=wall_s,
        metadata={"item_id": item.id, "error": f"{type(error).__name__}: {error}"},
    )


async def attempt(system: System, item: BenchmarkItem, sample: int, grader: Grader, benchmark: str) -> EvalRecord:
    """Solve and grade one sample; a system failure (a :class:`PodiumError`) becomes an error record."""
    started = time.perf_counter()
    error: str | None = None
    try:
        trajectory = await system.solve(item)
    except PodiumError as failure:
        trajectory = _failed_trajectory(item, failure, time.perf_counter() - started)
        error = trajectory.metadata["error"]
        verdict = Verdict.binary(False, reason=f"system failed: {error}")
    else:
        verdict = await grader.grade(item, trajectory)
    return EvalRecord(
        benchmark=benchmark,
        system=system.name,
        item_id=item.id,
        sample=sample,
        answer=trajectory.answer,
        gold=gold_text(item.gold),
        verdict=verdict,
        usage=trajectory.usage,
        wall_s=trajectory.wall_s,
        error=error,
        trajectory=trajectory,
    )


def _progress(enabled: bool) -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("acc {task.fields[accuracy]:.3f}  ${task.fields[usd]:.4f}"),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        disable=not enabled,
    )


async def run_eval(
    benchmark: Benchmark,
    system: System,
    *,
    out: str | Path,
    samples: int = 1,
    limit: int | None = None,
    concurrency: int = 4,
    max_usd: float | None = None,
    system_config: dict[str, Any] | None = None,
    data_dir: str | Path | None = None,
    source: Literal["local", "hub"] = "local",
    grader: Grader | None = None,
    progress: bool = True,
    preferences: Sequence[Preference] = (),
) -> EvalSummary:
    """Evaluate ``system`` on the first ``limit`` items of ``benchmark``, ``samples`` times each, resuming
    whatever ``out`` already holds.

    ``limit``, ``concurrency`` and ``max_usd`` may change between invocations; the benchmark, system, its
    config, ``samples`` and ``preferences`` (item i gets preference i mod n) may not. Spend counts every invocation
    of the run; once it reaches ``max_usd`` no new sample starts (those in flight finish).
    """
    if samples < 1 or concurrency < 1:
        raise EvalError("samples and concurrency must be at least 1")
    if not system.supports(benchmark.verifier):
        raise EvalError(f"system {system.name} cannot attempt {benchmark.name} ({benchmark.verifier} items)")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    manifest = RunManifest(
        benchmark=benchmark.name, source=source, system=system.name, system_config=system_config or {}, samples=samples
    )
    manifest.preferences = list(preferences)  # runtime systems append the instruction and keep the vector
    check_manifest(out, manifest)
    items = with_preferences(benchmark.items(data_dir=data_dir, source=source)[:limit], preferences)
    results_path = out / RESULTS_FILE
    previous, dropped = repair_results(results_path)
    selected = {(item.id, sample) for item in items for sample in range(samples)}
    finished = {record.key: record for record in previous if record.key in selected}
    queue = deque((item, sample) for item in items for sample in range(samples) if (item.id, sample) not in finished)
    spent = sum(record.usage.usd for record in previous)
    resumed = len(finished)
    grader = grader or Grader(data_dir=data_dir)
    budget_hit = False

    with _progress(progress) as bar, results_path.open("ab") as handle:
        correct = sum(record.verdict.correct for record in finished.values())
        task = bar.add_task(
            f"{benchmark.name} · {system.name}",
            total=len(selected),
            completed=resumed,
            accuracy=correct / resumed if resumed else 0.0,
            usd=spent,
        )

        async def worker() -> None:
            nonlocal spent, budget_hit, correct
            while queue:
                if max_usd is not None and spent >= max_usd:
                    budget_hit = True
                    return
                item, sample = queue.popleft()
                record = await attempt(system, item, sample, grader, benchmark.name)
                # One write per record, flushed and synced, so a kill can only tear the line being written.
                handle.write(to_json_line(record).encode("utf-8"))
                handle.flush()
                os.fsync(handle.fileno())
                finished[record.key] = record
                spent += record.usage.usd
                correct += record.verdict.correct
                bar.update(task, advance=1, accuracy=correct / len(finished), usd=spent)

        workers = [asyncio.create_task(worker()) for _ in range(min(concurrency, len(queue)))]
        try:
            await asyncio.gather(*workers)
        finally:
            # A bug in one attempt stops the run: the others are cancelled before they can write again.
            for running in workers:
                running.cancel()

    return EvalSummary(
        out=str(out),
        total=len(selected),
        done=len(finished),
        resumed=resumed,
        correct=correct,
        errors=sum(record.error is not None for record in finished.values()),
        usd=spent,
        dropped_lines=dropped,
        stopped_by_budget=budget_hit and bool(queue),
    )


def load_run(out: str | Path) -> tuple[RunManifest, list[EvalRecord]]:
    """A run directory's manifest and records (read-only: a torn last line is skipped, not repaired)."""
    out = Path(out)
    manifest_path = out / MANIFEST_FILE
    if not manifest_path.exists():
        raise EvalError(f"{out} is not a run directory (no {MANIFEST_FILE})")
    try:
        manifest = RunManifest.model_validate_json(manifest_path.read_text(encoding="utf-8"))
    except ValidationError as error:
        raise EvalError(f"{manifest_path} is not a run manifest: {error}") from error
    return manifest, read_results(out / RESULTS_FILE)[0]

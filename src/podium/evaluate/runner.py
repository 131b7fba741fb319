"""Resumable evaluation runs: items × samples solved concurrently, each result appended as it finishes.

A run directory holds ``manifest.json`` (benchmark, system, settings) and ``results.jsonl`` (one
:class:`EvalRecord` per finished (item, sample)). Rerunning the same command resumes: finished samples are
skipped and never written twice. A process killed mid-write leaves at most a torn last line; it is detected
and dropped (the file is rewritten without it) before anything new is appended.

One process at a time evaluates into a directory (``eval.lock``; a second one stops and names the holder), an
unreadable manifest is rewritten from the run's settings when the results it keeps belong to them, and every
record is checked to read back before it is written, so no attempt is re-run and paid again on each resume
because its line cannot be read (:mod:`podium.evaluate.rundir`).
"""

import asyncio
import logging
import os
import time
from collections import deque
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, NonNegativeFloat, NonNegativeInt, ValidationError
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from podium.benchmarks.items import BenchmarkItem
from podium.benchmarks.loaders import Benchmark
from podium.core.budget import StopReason
from podium.core.calls import CallUsage
from podium.core.record import Record
from podium.core.trajectory import Trajectory, to_json_line
from podium.errors import PodiumError
from podium.evaluate.rundir import REJECTED_FILE, hold_run_directory, set_aside, write_atomically
from podium.evaluate.systems import System
from podium.graders.grader import Grader, gold_text
from podium.graders.verdict import Verdict

MANIFEST_FILE = "manifest.json"
RESULTS_FILE = "results.jsonl"
log = logging.getLogger(__name__)


class EvalError(PodiumError):
    """An evaluation cannot start or resume (mismatched settings, unsupported benchmark)."""


class EvalRecord(Record):
    """One finished (item, sample)."""

    benchmark: str
    """Benchmark name."""
    system: str
    """System name."""
    item_id: str
    """The item's id within the benchmark."""
    sample: NonNegativeInt
    """Sample index, from 0."""
    answer: str | None
    """The system's final answer."""
    gold: str
    """The gold, as text."""
    verdict: Verdict
    """The verifier's judgement."""
    usage: CallUsage
    """Total tokens, USD and latency of the attempt."""
    wall_s: NonNegativeFloat
    """Wall-clock seconds of the attempt."""
    error: str | None = None
    """Set when the system failed (backend down…); the sample then counts as wrong."""
    trajectory: Trajectory
    """The full attempt."""

    @property
    def key(self) -> tuple[str, int]:
        return self.item_id, self.sample


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
    repairs: list[str] = Field(default_factory=list)
    """What was found broken in the run directory and how it was repaired."""

    @property
    def accuracy(self) -> float:
        return self.correct / self.done if self.done else 0.0


def read_results(path: str | Path) -> tuple[list[EvalRecord], int]:
    """Records of a results file and how many lines were unusable (torn, corrupt or duplicate keys).

    Reading never changes the file; :func:`repair_results` does.
    """
    records, unusable = _scan(Path(path))
    return records, len(unusable)


def _scan(path: Path) -> tuple[list[EvalRecord], list[bytes]]:
    """The records of a results file and its unusable lines (unreadable, or repeating a key)."""
    if not path.exists():
        return [], []
    records: list[EvalRecord] = []
    seen: set[tuple[str, int]] = set()
    unusable: list[bytes] = []
    for raw in path.read_bytes().split(b"\n"):
        if not raw.strip():
            continue
        try:
            record = EvalRecord.model_validate_json(raw)
        except ValidationError:
            unusable.append(raw)
            continue
        if record.key in seen:
            unusable.append(raw)
            continue
        seen.add(record.key)
        records.append(record)
    return records, unusable


def repair_results(path: str | Path) -> tuple[list[EvalRecord], int]:
    """Read a results file and, if any line was unusable or the last line unterminated, rewrite it atomically
    with only the good records, so new lines are never appended to a torn one; unusable lines are kept in
    ``results.rejected.jsonl``."""
    path = Path(path)
    records, unusable = _scan(path)
    if path.exists() and (unusable or (path.stat().st_size and not path.read_bytes().endswith(b"\n"))):
        set_aside(path.parent, unusable)
        write_atomically(path, "".join(to_json_line(record) for record in records))
    return records, len(unusable)


def check_manifest(out: Path, manifest: RunManifest, records: list[EvalRecord] | None = None) -> str | None:
    """Save the manifest of a new run, or refuse to resume a run made with other settings. An unreadable
    manifest (empty, torn) is rewritten from ``manifest`` when the ``records`` kept are all of this benchmark,
    system and sample count, and the repair is returned; otherwise the run is refused."""
    path = out / MANIFEST_FILE
    repair = None
    if path.exists():
        try:
            saved = RunManifest.model_validate_json(path.read_bytes())
        except ValidationError as error:
            problem = "it is empty" if not path.stat().st_size else f"it is not a manifest ({error.errors()[0]['msg']})"
            foreign = [
                r for r in records or []
                if (r.benchmark, r.system) != (manifest.benchmark, manifest.system) or r.sample >= manifest.samples
            ]  # fmt: skip
            if foreign:
                raise EvalError(
                    f"{path} cannot be read ({problem}) and {out} holds results of other settings (e.g. "
                    f"{foreign[0].benchmark} · {foreign[0].system}); use another --out"
                ) from error
            repair = f"{path} could not be read ({problem}); rewrote it from this run's settings"
        else:
            _same_settings(out, saved, manifest)
            return None
    write_atomically(path, manifest.model_dump_json(indent=2) + "\n")
    return repair


def _same_settings(out: Path, saved: RunManifest, manifest: RunManifest) -> None:
    changed = [name for name in RunManifest.model_fields if getattr(saved, name) != getattr(manifest, name)]
    if changed:
        details = "; ".join(
            f"{name}: was {getattr(saved, name)!r}, now {getattr(manifest, name)!r}" for name in changed
        )
        raise EvalError(f"{out} holds a run with other settings ({details}); use another --out to start a new run")


def storable_line(record: EvalRecord) -> str:
    """The JSON line of ``record``, checked to read back. A record that would not (a trajectory holding a value
    JSON cannot carry) is stored with an empty trajectory that says why, keeping its answer and verdict, so
    that resuming does not run and pay for it again."""
    try:
        line = to_json_line(record)
        EvalRecord.model_validate_json(line)
        return line
    except ValueError as error:  # pydantic's serialization and validation errors are ValueErrors
        reason = f"the trajectory could not be stored: {str(error)[:300]}"
        log.warning("%s, sample %s: %s", record.item_id, record.sample, reason)
        stub = Trajectory(question=record.trajectory.question, answer=record.answer, metadata={"storage_error": reason})
        return to_json_line(record.model_copy(update={"trajectory": stub}))


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
) -> EvalSummary:
    """Evaluate ``system`` on the first ``limit`` items of ``benchmark``, ``samples`` times each, resuming
    whatever ``out`` already holds.

    ``limit``, ``concurrency`` and ``max_usd`` may change between invocations; the benchmark, system, its
    config and ``samples`` may not. Spend counts every invocation of the run; once it reaches ``max_usd`` no
    new sample starts (those in flight finish).
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
    items = benchmark.items(data_dir=data_dir, source=source)[:limit]
    with hold_run_directory(out):
        previous, dropped = repair_results(out / RESULTS_FILE)
        repairs = [note for note in [check_manifest(out, manifest, previous)] if note]
        if dropped:
            repairs.append(f"moved {dropped} torn or duplicate line(s) of {RESULTS_FILE} to {REJECTED_FILE}")
        for note in repairs:
            log.warning("%s", note)
        grader = grader or Grader(data_dir=data_dir)
        summary = await _evaluate(
            system, benchmark.name, items, samples, previous, out, concurrency, max_usd, grader, progress
        )
    return summary.model_copy(update={"dropped_lines": dropped, "repairs": repairs})


async def _evaluate(
    system: System,
    benchmark: str,
    items: list[BenchmarkItem],
    samples: int,
    previous: list[EvalRecord],
    out: Path,
    concurrency: int,
    max_usd: float | None,
    grader: Grader,
    progress: bool,
) -> EvalSummary:
    """Attempt every selected (item, sample) not in ``previous``, appending each record as it finishes."""
    selected = {(item.id, sample) for item in items for sample in range(samples)}
    finished = {record.key: record for record in previous if record.key in selected}
    queue = deque((item, sample) for item in items for sample in range(samples) if (item.id, sample) not in finished)
    spent = sum(record.usage.usd for record in previous)
    resumed = len(finished)
    budget_hit = False

    with _progress(progress) as bar, (out / RESULTS_FILE).open("ab") as handle:
        correct = sum(record.verdict.correct for record in finished.values())
        task = bar.add_task(
            f"{benchmark} · {system.name}",
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
                record = await attempt(system, item, sample, grader, benchmark)
                # One write per record, flushed and synced, so a kill can only tear the line being written.
                handle.write(storable_line(record).encode("utf-8"))
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

    errors = sum(record.error is not None for record in finished.values())
    stopped = budget_hit and bool(queue)
    return EvalSummary(out=str(out), total=len(selected), done=len(finished), resumed=resumed, correct=correct,
                       errors=errors, usd=spent, stopped_by_budget=stopped)  # fmt: skip


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

"""Resumable evaluation runs: items × samples solved concurrently, each result appended as it finishes.

A run directory holds ``manifest.json`` (benchmark, system, settings) and ``results.jsonl`` (one
:class:`~podium.solve.records.GradedTrajectory` per finished (item, sample)). Rerunning the same command
resumes: finished samples are skipped and never written twice. A process killed mid-write leaves at most a torn
last line; it is detected and dropped (the file is rewritten without it) before anything new is appended.

One process at a time evaluates into a directory (``eval.lock``; a second one stops and names the holder), an
unreadable manifest is rewritten from the run's settings when the results it keeps belong to them, and every
record is checked to read back before it is written, so no attempt is re-run and paid again on each resume
because its line cannot be read (:mod:`podium.evaluate.rundir`).
"""

import asyncio
import logging
import os
import time
from collections import Counter, deque
from collections.abc import Sequence
from pathlib import Path
from typing import Any, BinaryIO, Literal

from pydantic import Field, ValidationError
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from podium.core.budget import StopReason
from podium.core.preference import Preference
from podium.core.record import Record
from podium.core.trajectory import Trajectory, to_json_line
from podium.costs.ledger import RunCap
from podium.datasets.items import BenchmarkItem
from podium.datasets.loaders import Benchmark
from podium.errors import PodiumError
from podium.evaluate.rundir import REJECTED_FILE, hold_run_directory, set_aside, write_atomically
from podium.evaluate.systems import System, attempt_bound
from podium.graders.grader import Grader, gold_text
from podium.graders.verdict import Verdict
from podium.solve.jsonl import scan_jsonl
from podium.solve.records import GradedTrajectory as EvalRecord
from podium.solve.records import read_graded as read_results

MANIFEST_FILE = "manifest.json"
RESULTS_FILE = "results.jsonl"
log = logging.getLogger(__name__)


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
    common_error: str | None = None
    """The most common failure of the run's samples and how many had it (``None`` when none failed)."""
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


def repair_results(path: str | Path) -> tuple[list[EvalRecord], int]:
    """Read a results file and, if any line was unusable or the last line unterminated, rewrite it atomically
    with only the good records, so new lines are never appended to a torn one; unusable lines are kept in
    ``results.rejected.jsonl``."""
    path = Path(path)
    found, unusable = scan_jsonl(path, EvalRecord, lambda record: record.key)
    records = list(found.values())
    if path.exists() and (unusable or (path.stat().st_size and not path.read_bytes().endswith(b"\n"))):
        set_aside(path.parent, unusable)
        write_atomically(path, "".join(to_json_line(record) for record in records))
    return records, len(unusable)


def check_manifest(out: Path, manifest: RunManifest, records: list[EvalRecord]) -> str | None:
    """Save the manifest of a new run, or refuse to resume a run made with other settings; a run with no
    ``records`` yet (one that failed before its first result) is taken over. An unreadable manifest (empty,
    torn) is rewritten from ``manifest`` when the ``records`` kept are all of this benchmark, system and sample
    count, and the repair is returned; otherwise the run is refused."""
    path = out / MANIFEST_FILE
    repair = None
    if path.exists():
        try:
            saved = RunManifest.model_validate_json(path.read_bytes())
        except ValidationError as error:
            problem = "it is empty" if not path.stat().st_size else f"it is not a manifest ({error.errors()[0]['msg']})"
            foreign = [
                r for r in records
                if (r.benchmark, r.system) != (manifest.benchmark, manifest.system) or r.sample >= manifest.samples
            ]  # fmt: skip
            if foreign:
                raise EvalError(
                    f"{path} cannot be read ({problem}) and {out} holds results of other settings (e.g. "
                    f"{foreign[0].benchmark} · {foreign[0].system}); use another --out"
                ) from error
            repair = f"{path} could not be read ({problem}); rewrote it from this run's settings"
        else:
            if records:  # a run that failed before its first result may be taken over by other settings
                _same_settings(out, saved, manifest)
                return None
            if saved == manifest:
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
    """The bar of a run on stderr: done/total, accuracy so far, USD spent, elapsed time and ETA."""
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("acc {task.fields[accuracy]:.3f}  ${task.fields[usd]:.4f}"),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
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
    of the run; ``max_usd`` is a hard cap: a sample starts only when its cost bound fits what the spend and the
    bounds of the samples in flight leave (:class:`~podium.costs.ledger.RunCap`).
    """
    if samples < 1 or concurrency < 1:
        raise EvalError("samples and concurrency must be at least 1")
    if not system.supports(benchmark.verifier):
        raise EvalError(f"system {system.name} cannot attempt {benchmark.name} ({benchmark.verifier} items)")
    out = Path(out)
    manifest = RunManifest(
        benchmark=benchmark.name, source=source, system=system.name, system_config=system_config or {}, samples=samples
    )
    manifest.preferences = list(preferences)  # runtime systems append the instruction and keep the vector
    items = with_preferences(benchmark.items(data_dir=data_dir, source=source)[:limit], preferences)
    bounds = sample_bounds(system, items, max_usd)
    out.mkdir(parents=True, exist_ok=True)  # only once the inputs are good: a failed start leaves nothing behind
    with hold_run_directory(out):
        previous, dropped = repair_results(out / RESULTS_FILE)
        repairs = [note for note in [check_manifest(out, manifest, previous)] if note]
        if dropped:
            repairs.append(f"moved {dropped} torn or duplicate line(s) of {RESULTS_FILE} to {REJECTED_FILE}")
        for note in repairs:
            log.warning("%s", note)
        run = _Run(system, benchmark.name, grader or Grader(data_dir=data_dir), out, RunCap(max_usd), bounds)
        summary = await run.attempt_all(items, samples, previous, concurrency, progress)
    return summary.model_copy(update={"dropped_lines": dropped, "repairs": repairs})


def sample_bounds(system: System, items: Sequence[BenchmarkItem], max_usd: float | None) -> dict[str, float | None]:
    """Item id → the most one sample can cost. Under a USD cap every bound must be known, or the cap could not
    hold: a system that cannot bound a sample's cost is refused before anything runs."""
    bounds = {item.id: attempt_bound(system, item) for item in items}
    if max_usd is not None and None in bounds.values():
        raise EvalError(
            f"--max-usd {max_usd} is a hard cap, so each sample's cost must be bounded before it starts, and system "
            f"{system.name} cannot bound it: give the system its own max_usd (the most one episode may spend)"
        )
    return bounds


class _Run:
    """One invocation of a run: the samples left, the spend and the score so far, the results file."""

    def __init__(
        self, system: System, benchmark: str, grader: Grader, out: Path, cap: RunCap, bounds: dict[str, float | None]
    ) -> None:
        self.system, self.benchmark, self.grader, self.out, self.cap, self.bounds = (
            system, benchmark, grader, out, cap, bounds,
        )  # fmt: skip
        self.finished: dict[tuple[str, int], EvalRecord] = {}
        self.queue: deque[tuple[BenchmarkItem, int]] = deque()
        self.correct = 0

    async def attempt_all(
        self, items: list[BenchmarkItem], samples: int, previous: list[EvalRecord], concurrency: int, progress: bool
    ) -> EvalSummary:
        """Attempt every selected (item, sample) not in ``previous``, appending each record as it finishes."""
        selected = {(item.id, sample) for item in items for sample in range(samples)}
        self.finished = {record.key: record for record in previous if record.key in selected}
        self.queue.extend((i, k) for i in items for k in range(samples) if (i.id, k) not in self.finished)
        self.cap.charge(sum(record.usage.usd for record in previous))
        self.correct = sum(record.verdict.correct for record in self.finished.values())
        resumed = len(self.finished)
        with _progress(progress) as bar, (self.out / RESULTS_FILE).open("ab") as handle:
            task = bar.add_task(
                f"{self.benchmark} · {self.system.name}",
                total=len(selected),
                completed=resumed,
                accuracy=self.correct / resumed if resumed else 0.0,
                usd=self.cap.spent,
            )
            workers = [
                asyncio.create_task(self._worker(handle, bar, task)) for _ in range(min(concurrency, len(self.queue)))
            ]
            try:
                await asyncio.gather(*workers)
            finally:
                # A bug in one attempt stops the run: the others are cancelled before they can write again.
                for running in workers:
                    running.cancel()
        return EvalSummary(
            out=str(self.out),
            total=len(selected),
            done=len(self.finished),
            resumed=resumed,
            correct=self.correct,
            errors=sum(record.error is not None for record in self.finished.values()),
            common_error=common_error(list(self.finished.values())),
            usd=self.cap.spent,
            stopped_by_budget=self.cap.refused and bool(self.queue),
        )

    async def _worker(self, handle: BinaryIO, bar: Progress, task: TaskID) -> None:
        while self.queue:
            item, sample = self.queue.popleft()
            bound = self.bounds[item.id]
            if not await self.cap.acquire(bound):  # its cost bound does not fit what the cap leaves
                self.queue.appendleft((item, sample))
                return
            usd = 0.0
            try:
                record = await attempt(self.system, item, sample, self.grader, self.benchmark)
                usd = record.usage.usd
            finally:
                await self.cap.release(bound, usd)
            # One write per record, flushed and synced, so a kill can only tear the line being written.
            handle.write(storable_line(record).encode("utf-8"))
            handle.flush()
            os.fsync(handle.fileno())
            self.finished[record.key] = record
            self.correct += record.verdict.correct
            bar.update(task, advance=1, accuracy=self.correct / len(self.finished), usd=self.cap.spent)


def common_error(records: Sequence[EvalRecord]) -> str | None:
    """The most common error of ``records`` (the item's id taken out, so that equal causes count together),
    with how many records had it."""
    reasons = Counter(
        record.error.replace(f"item {record.item_id}: ", "") for record in records if record.error is not None
    )
    if not reasons:
        return None
    reason, count = reasons.most_common(1)[0]
    return f"{reason} ({count} of {len(records)} samples)"


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

"""Resumable evaluation runs: items × samples solved concurrently, each result appended as it finishes.

A run directory holds ``manifest.json`` (benchmark, system, settings) and ``results.jsonl`` (one
:class:`~podium.solve.records.GradedTrajectory` per finished (item, sample)), the log of a
:class:`~podium.solve.runner.BatchRunner`. Rerunning the same command resumes: finished samples are skipped and
never written twice. A process killed mid-write leaves at most a torn last line; it is detected and set aside in
``results.rejected.jsonl`` (the file is rewritten without it) before anything new is appended.

One process at a time evaluates into a directory (``eval.lock``; a second one stops and names the holder), an
unreadable manifest is rewritten from the run's settings when the results it keeps belong to them, and every
record is checked to read back before it is written, so no attempt is re-run and paid again on each resume
because its line cannot be read (:mod:`podium.evaluate.rundir`).
"""

import logging
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError

from podium.core.budget import StopReason
from podium.core.files import write_atomically
from podium.core.preference import Preference
from podium.core.record import Record
from podium.core.trajectory import Trajectory
from podium.datasets.benchmark import Benchmark
from podium.datasets.items import BenchmarkItem
from podium.errors import PodiumError
from podium.evaluate.rundir import hold_run_directory
from podium.evaluate.systems import ItemSolver, attempt_bound, attempt_seed
from podium.graders.grader import Grader, gold_text
from podium.graders.verdict import Verdict
from podium.solve.jsonl import JsonlLog, rejected_path
from podium.solve.records import RUN_MANIFEST, RUN_RESULTS, RunManifest
from podium.solve.records import GradedTrajectory as EvalRecord
from podium.solve.records import read_graded as read_results
from podium.solve.runner import BatchRunner

MANIFEST_FILE = RUN_MANIFEST
RESULTS_FILE = RUN_RESULTS
log = logging.getLogger(__name__)


class EvalError(PodiumError):
    """An evaluation cannot start or resume (mismatched settings, unsupported benchmark)."""


class SystemRunError(PodiumError):
    """A system could not finish an attempt for infrastructure reasons (the orchestrator's backend failed)."""


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


def storable(record: EvalRecord, error: str) -> EvalRecord:
    """A record whose line would not read back (a trajectory holding a value JSON cannot carry), stored with an
    empty trajectory that says why, keeping its answer and verdict, so that resuming does not run and pay for it
    again."""
    reason = f"the trajectory could not be stored: {error}"
    log.warning("%s, sample %s: %s", record.item_id, record.sample, reason)
    stub = Trajectory(question=record.trajectory.question, answer=record.answer, metadata={"storage_error": reason})
    return record.model_copy(update={"trajectory": stub})


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


async def attempt(system: ItemSolver, item: BenchmarkItem, sample: int, grader: Grader, benchmark: str) -> EvalRecord:
    """Solve and grade one sample; a system failure (a :class:`PodiumError`, or an episode its backend ended with
    ``error``) becomes an error record. A system that draws per attempt (a blind pool's labels) draws from the
    item and the sample, so each attempt sees its own mapping and a resumed run the same ones."""
    started = time.perf_counter()
    error: str | None = None
    seed = attempt_seed(system, item.id, sample)
    try:
        trajectory = await (system.solve(item) if seed is None else system.solve(item, seed=seed))  # type: ignore[call-arg]
        if trajectory.stop_reason is StopReason.ERROR:
            raise SystemRunError(f"item {item.id}: {trajectory.metadata.get('error', 'the orchestrator failed')}")
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


async def run_eval(
    benchmark: Benchmark,
    system: ItemSolver,
    *,
    out: str | Path,
    samples: int = 1,
    limit: int | None = None,
    concurrency: int = 4,
    max_run_usd: float | None = None,
    system_config: dict[str, Any] | None = None,
    data_dir: str | Path | None = None,
    source: Literal["local", "hub"] = "local",
    grader: Grader | None = None,
    progress: bool = True,
    preferences: Sequence[Preference] = (),
) -> EvalSummary:
    """Evaluate ``system`` on the first ``limit`` items of ``benchmark``, ``samples`` times each, resuming
    whatever ``out`` already holds.

    ``limit``, ``concurrency`` and ``max_run_usd`` may change between invocations; the benchmark, system, its
    config, ``samples`` and ``preferences`` (item i gets preference i mod n) may not. Spend counts every invocation
    of the run; ``max_run_usd`` is a hard cap: a sample starts only when its cost bound fits what the spend and the
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
    bounds = sample_bounds(system, items, max_run_usd)
    out.mkdir(parents=True, exist_ok=True)  # only once the inputs are good: a failed start leaves nothing behind
    with hold_run_directory(out):
        results = JsonlLog(out / RESULTS_FILE, EvalRecord, lambda record: record.key, storable=storable)
        repairs = [note for note in [check_manifest(out, manifest, results.values())] if note]
        if results.dropped:
            rejected = rejected_path(results.path).name
            repairs.append(f"moved {results.dropped} torn or duplicate line(s) of {RESULTS_FILE} to {rejected}")
        for note in repairs:
            log.warning("%s", note)
        runner = BatchRunner(concurrency=concurrency, max_usd=max_run_usd, progress=progress)
        chosen = grader or Grader(data_dir=data_dir)
        summary = await _attempt_all(system, benchmark.name, chosen, results, runner, items, samples, bounds)
    return summary.model_copy(update={"dropped_lines": results.dropped, "repairs": repairs})


def sample_bounds(
    system: ItemSolver, items: Sequence[BenchmarkItem], max_run_usd: float | None
) -> dict[str, float | None]:
    """Item id → the most one sample can cost. Under a USD cap every bound must be known, or the cap could not
    hold: a system that cannot bound a sample's cost is refused before anything runs."""
    bounds = {item.id: attempt_bound(system, item) for item in items}
    if max_run_usd is not None and None in bounds.values():
        raise EvalError(
            f"--max-run-usd {max_run_usd} is a hard cap, so each sample's cost must be bounded before it starts, and "
            f"system {system.name} cannot bound it: give the system its own max_episode_usd (the most one episode "
            "may spend)"
        )
    return bounds


async def _attempt_all(
    system: ItemSolver, benchmark: str, grader: Grader, results: JsonlLog[EvalRecord], runner: BatchRunner,
    items: list[BenchmarkItem], samples: int, bounds: dict[str, float | None],
) -> EvalSummary:  # fmt: skip
    """Attempt every selected (item, sample) the results lack, appending each record as it finishes."""
    units = [(item, sample) for item in items for sample in range(samples)]
    runner.charge(sum(record.usage.usd for record in results.values()))
    resumed = sum((item.id, sample) in results for item, sample in units)
    finished = await runner.run(
        f"{benchmark} · {system.name}",
        units,
        lambda unit: (unit[0].id, unit[1]),
        lambda unit: attempt(system, unit[0], unit[1], grader, benchmark),
        results,
        cost=lambda record: record.usage.usd,
        bound=lambda unit: bounds[unit[0].id],
        correct=lambda record: record.verdict.correct,
    )
    return EvalSummary(
        out=str(results.path.parent),
        total=len(units),
        done=len(finished),
        resumed=resumed,
        correct=sum(record.verdict.correct for record in finished),
        errors=sum(record.error is not None for record in finished),
        common_error=common_error(finished),
        usd=runner.spent,
        stopped_by_budget=runner.stopped_by_budget,
    )


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

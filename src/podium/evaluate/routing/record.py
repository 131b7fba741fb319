"""Recording a pool on tasks (``podium routing record``): every worker asked every task, concurrently (at most
``per_worker`` calls to one worker at once), each reply graded by the task's own grader (math, multiple choice, exact
match / F1, code tests in the sandbox, an LLM judge, recorded outcome) and appended to the recording as it finishes.

The run is resumable: outcomes are appended one synced line at a time, a torn last line is set aside when the
recording is opened again, and the (task, worker) pairs it holds are not asked again. ``max_run_usd`` is a hard cap: a
call starts only when its cost bound (its prompt and ``max_tokens`` at the worker's price) fits what the spend and
the calls in flight leave. A call that fails is recorded as failed, with its reason, never as a wrong answer.

Resuming checks that the recording is of the same workers (model and price) and tasks; a changed pool or tasks file
is refused, naming what changed.
"""

import asyncio
import hashlib
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from podium.backends.base import BackendError, ChatBackend
from podium.backends.factory import build_backend
from podium.core.answers import ANSWER_INSTRUCTIONS, extract_answer
from podium.core.files import write_atomically
from podium.core.messages import Message
from podium.datasets.loaders import get_benchmark
from podium.errors import ConfigError
from podium.evaluate.routing.config import RecordConfig
from podium.graders.grader import Grader, GradingConfig
from podium.pool.pool import load_pool_config, pool_catalog
from podium.recording import (
    MANIFEST,
    OUTCOMES,
    TASKS,
    RecordedOutcome,
    RecordedTask,
    RecordedWorker,
    RecordingManifest,
)
from podium.solve.jsonl import JsonlLog, read_tasks, write_jsonl
from podium.solve.runner import BatchRunner


def now() -> str:
    """The time now, ISO 8601 in UTC."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def file_digest(path: str | Path) -> str:
    """sha256 of a file's bytes (provenance)."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


class RecordingWriter:
    """A recording directory being written: its manifest and tasks (written once, checked on resume) and the log of
    outcomes (:class:`~podium.solve.jsonl.JsonlLog`: resumable after a kill)."""

    def __init__(self, out: Path, manifest: RecordingManifest, tasks: Sequence[RecordedTask]) -> None:
        out.mkdir(parents=True, exist_ok=True)
        existing = out / MANIFEST
        if existing.is_file():
            check_resumable(out, RecordingManifest.model_validate_json(existing.read_bytes()), manifest, tasks)
            manifest = RecordingManifest.model_validate_json(existing.read_bytes())
        else:
            write_jsonl(out / TASKS, tasks)
            write_atomically(existing, manifest.model_dump_json(indent=1) + "\n")
        self.out = out
        self.manifest = manifest
        self.log = JsonlLog(out / OUTCOMES, RecordedOutcome, lambda outcome: outcome.key)

    def extend(self, outcomes: Sequence[RecordedOutcome]) -> int:
        """Add the outcomes the recording lacks (all at once into an empty one); returns how many were added."""
        missing = [outcome for outcome in outcomes if outcome.key not in self.log]
        if len(self.log) == 0 and missing:
            write_jsonl(self.out / OUTCOMES, missing)
            self.log = JsonlLog(self.out / OUTCOMES, RecordedOutcome, lambda outcome: outcome.key)
        else:
            for outcome in missing:
                self.log.append(outcome)
        return len(missing)


def check_resumable(out: Path, old: RecordingManifest, new: RecordingManifest, tasks: Sequence[RecordedTask]) -> None:
    """Refuse to resume a recording of other workers, prices, tasks or split."""
    problems = []
    before = {worker.name: (worker.model, worker.price.input_per_mtok, worker.price.output_per_mtok)
              for worker in old.workers}  # fmt: skip
    after = {worker.name: (worker.model, worker.price.input_per_mtok, worker.price.output_per_mtok)
             for worker in new.workers}  # fmt: skip
    if before != after:
        problems.append(f"workers (model, price) were {before}, now {after}")
    if old.split != new.split:
        problems.append(f"split was {old.split.model_dump()}, now {new.split.model_dump()}")
    recorded = [
        RecordedTask.model_validate_json(line) for line in (out / TASKS).read_text("utf-8").splitlines() if line
    ]
    if [task.model_dump() for task in recorded] != [task.model_dump() for task in tasks]:
        problems.append(f"tasks differ ({len(recorded)} recorded, {len(tasks)} now)")
    if problems:
        raise ConfigError(f"{out} holds another recording: {'; '.join(problems)}; give another out directory")


@dataclass(frozen=True)
class Pair:
    """One unit of a recording: a task and the worker asked."""

    task: RecordedTask
    worker: str


async def record_pool(
    writer: RecordingWriter,
    backends: dict[str, ChatBackend],
    grader: Grader,
    *,
    max_tokens: int,
    concurrency: int = 8,
    per_worker: int = 4,
    max_usd: float | None = None,
    progress: bool = True,
) -> BatchRunner:
    """Ask every worker of ``backends`` every task of the recording that it has not answered yet (see the module
    notes); returns the runner (its spend, and whether the cap stopped it)."""
    tasks = [RecordedTask.model_validate_json(line) for line in (writer.out / TASKS).read_text("utf-8").splitlines()
             if line]  # fmt: skip
    pairs = [Pair(task, name) for task in tasks for name in backends]
    runner = BatchRunner(concurrency=concurrency, max_usd=max_usd, progress=progress)
    runner.charge(sum(outcome.usd for outcome in writer.log.values()))
    limits = {name: asyncio.Semaphore(per_worker) for name in backends}

    def bound(pair: Pair) -> float:
        return backends[pair.worker].generation_bound(messages(pair.task), max_tokens).usd

    async def ask(pair: Pair) -> RecordedOutcome:
        async with limits[pair.worker]:
            return await answer(backends[pair.worker], pair, grader, max_tokens)

    await runner.run(
        "recording",
        pairs,
        key=lambda pair: (pair.task.id, pair.worker),
        work=ask,
        log=writer.log,
        cost=lambda outcome: outcome.usd,
        bound=bound,
        correct=lambda outcome: bool(outcome.correct),
    )
    return runner


def messages(task: RecordedTask) -> list[Message]:
    """What a worker is asked: the answer format of the task's verifier, then the task."""
    return [
        Message(role="system", content=ANSWER_INSTRUCTIONS[task.verifier]),
        Message(role="user", content=task.question),
    ]


async def answer(backend: ChatBackend, pair: Pair, grader: Grader, max_tokens: int) -> RecordedOutcome:
    """One worker's graded answer to one task, or its failure."""
    started = time.perf_counter()
    base: dict[str, Any] = {"task_id": pair.task.id, "worker": pair.worker}
    try:
        generation = await backend.generate(messages(pair.task), max_tokens=max_tokens)
    except BackendError as error:
        latency = time.perf_counter() - started
        return RecordedOutcome(**base, status="failed", reason=str(error), latency_s=latency, recorded_at=now())
    # graded as `podium eval` grades a model's reply: the answer its verifier expects, extracted first
    verdict = await grader.grade_answer(pair.task, extract_answer(generation.text, pair.task.verifier))
    return RecordedOutcome(
        **base,
        status="ok",
        reason=verdict.error or verdict.reason,
        reply=generation.text,
        correct=None if verdict.error else verdict.correct,
        score=None if verdict.error else verdict.score,
        input_tokens=generation.input_tokens,
        output_tokens=generation.output_tokens,
        usd=generation.usd,
        latency_s=generation.latency_s,
        recorded_at=now(),
    )


def recorded_workers(
    names: Sequence[str], backends: dict[str, ChatBackend], kinds: dict[str, str]
) -> list[RecordedWorker]:
    """The manifest's entries of the workers ``names``: model, backend kind and price (with its source)."""
    return [RecordedWorker(name=name, model=backends[name].model, backend=kinds[name], price=backends[name].price)
            for name in names]  # fmt: skip


def new_manifest(workers: list[RecordedWorker], **fields: Any) -> RecordingManifest:
    """A manifest started now, with the Podium version in its source."""
    from podium import __version__

    source = {**fields.pop("source", {}), "podium": __version__}
    return RecordingManifest(workers=workers, source=source, created_at=now(), **fields)


RECORDABLE = ("math", "qa", "multiple_choice", "code")
"""The answer kinds whose replies a recording grades by the task's own verifier (an LLM judge grades any but
tool use)."""


@dataclass
class RecordingJob:
    """A recording checked and ready to run: nothing is written until every input is valid."""

    settings: RecordConfig
    backends: dict[str, ChatBackend]
    writer: RecordingWriter
    grader: Grader

    @classmethod
    def prepare(cls, settings: RecordConfig, source: str) -> "RecordingJob":
        """Check the pool, the workers, the tasks and their graders and every worker's price, then open the
        recording (a new one, or one to resume); each problem names its file and field."""
        pool = load_pool_config(settings.pool)
        names = settings.workers or [worker.name for worker in pool.workers]
        unknown = sorted(set(names) - {worker.name for worker in pool.workers})
        if unknown:
            raise ConfigError(f"{source}: workers: {unknown} are not workers of {settings.pool}")
        if len(set(names)) < 2:
            raise ConfigError(f"{settings.pool}: workers: routing needs two or more workers to record, not {names}")
        tasks = recorded_tasks(settings)
        catalog = pool_catalog(pool)
        backends, kinds = {}, {}
        for index, worker in enumerate(pool.workers):
            if worker.name in names:
                try:
                    backends[worker.name] = build_backend(worker.backend, catalog)
                except ConfigError as error:
                    raise ConfigError(f"{settings.pool}: workers.{index} ({worker.name}): {error}") from error
                kinds[worker.name] = worker.backend.kind
        ordered = [name for name in (w.name for w in pool.workers) if name in names]
        manifest = new_manifest(
            recorded_workers(ordered, backends, kinds),
            split=settings.split,
            max_tokens=settings.max_tokens,
            source={
                "pool": {"path": settings.pool, "sha256": file_digest(settings.pool)},
                "tasks": tasks_source(settings),
            },
        )
        grader = Grader.from_config(settings.grading or GradingConfig(), data_dir=settings.data_dir)
        writer = RecordingWriter(Path(settings.out), manifest, tasks)
        return cls(settings, {name: backends[name] for name in ordered}, writer, grader)

    async def run(self, *, progress: bool = True) -> BatchRunner:
        """Ask what the recording lacks."""
        settings = self.settings
        return await record_pool(self.writer, self.backends, self.grader, max_tokens=settings.max_tokens,
                                 concurrency=settings.concurrency, per_worker=settings.per_worker,
                                 max_usd=settings.max_run_usd, progress=progress)  # fmt: skip

    def summary(self, runner: BatchRunner) -> dict[str, Any]:
        """Per worker: outcomes recorded, failed, right, and USD; then the totals."""
        outcomes = self.writer.log.values()
        workers = {}
        for name in self.backends:
            mine = [outcome for outcome in outcomes if outcome.worker == name]
            workers[name] = {
                "recorded": len(mine),
                "failed": sum(outcome.status == "failed" for outcome in mine),
                "correct": sum(bool(outcome.correct) for outcome in mine),
                "usd": round(sum(outcome.usd for outcome in mine), 6),
            }
        tasks = (self.writer.out / TASKS).read_text("utf-8").count("\n")
        return {"out": str(self.writer.out), "tasks": tasks, "workers": workers, "usd": round(runner.spent, 6),
                "stopped_by_budget": runner.stopped_by_budget}  # fmt: skip

    @staticmethod
    def describe(summary: dict[str, Any]) -> str:
        """The summary as lines for a person."""
        lines = [f"{summary['tasks']} tasks × {len(summary['workers'])} workers → {summary['out']}"]
        for name, counts in summary["workers"].items():
            lines.append(f"  {name}: {counts['correct']}/{counts['recorded']} right, {counts['failed']} failed, "
                         f"${counts['usd']:.6f}")  # fmt: skip
        lines.append(f"spent ${summary['usd']:.6f}")
        if summary["stopped_by_budget"]:
            lines.append("stopped at the USD cap: rerun with a higher --max-run-usd to finish")
        return "\n".join(lines)


def recorded_tasks(settings: RecordConfig) -> list[RecordedTask]:
    """The tasks to record, split, each checked to have a grader (see :data:`RECORDABLE`)."""
    if settings.tasks is not None:
        items, where = read_tasks(settings.tasks), settings.tasks
    else:
        items, where = get_benchmark(str(settings.benchmark)).items(data_dir=settings.data_dir), "benchmark"
    items = items[: settings.limit]
    if not items:
        raise ConfigError(f"{where}: no task to record")
    judged = settings.grading is not None and settings.grading.verifier == "judge"
    for item in items:
        if item.verifier == "environment" or (item.verifier not in RECORDABLE and not judged):
            raise ConfigError(
                f"{where}: task {item.id}: verifier: '{item.verifier}' has no grader for a recording (recordable: "
                f"{', '.join(RECORDABLE)}, or any but environment with grading: {{verifier: judge}})"
            )
    return [RecordedTask(**item.model_dump(), split=settings.split.split(item)) for item in items]


def tasks_source(settings: RecordConfig) -> dict[str, Any]:
    """Where the tasks came from, for the manifest."""
    if settings.tasks is not None:
        return {"path": settings.tasks, "sha256": file_digest(settings.tasks), "limit": settings.limit}
    return {"benchmark": settings.benchmark, "limit": settings.limit}

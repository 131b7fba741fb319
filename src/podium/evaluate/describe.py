"""Model descriptions written from evidence (ToolOrchestra §3.1): run the model on sampled tasks, then let a
describer model read the instructions, outputs and success flags and write what the model is good at. The result
is recorded, with its provenance, in a descriptions file that pools load (:mod:`podium.pool.descriptions`);
refreshing re-describes every worker of a pool on the same sample (ParaManager §5.5: when the pool changes).

A description is grounded in what was measured: the worker's figures (solved / attempted, per task kind, USD and
seconds per task) are recorded beside the text, and the describer's sentences that contradict them (an accuracy
figure the sample rules out, praise for a worker that mostly failed) are left out and kept aside as rejected."""

import hashlib
import json
import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

import yaml
from pydantic import Field, PositiveInt

from podium.backends.base import BackendError, ChatBackend
from podium.config import Config
from podium.core.answers import extract_answer
from podium.core.files import write_atomically
from podium.core.messages import Message
from podium.errors import ConfigError
from podium.graders.math import MathVerifier
from podium.graders.text import MultipleChoiceVerifier, QAVerifier
from podium.graders.verdict import Verifier
from podium.pool.descriptions import (
    Figures,
    KindFigures,
    Provenance,
    WorkerDescription,
    read_descriptions,
    worker_fingerprint,
)
from podium.pool.pool import Pool

DESCRIBER_PROMPT = (
    "You write short, factual descriptions of language models for an orchestrator that decides which model "
    "to call. You are shown tasks a model was given, its outputs and whether each output was correct. In at "
    "most 80 words, describe the model's strengths, weaknesses and the kinds of task it should or should not "
    "be given. Do not mention the model's name, and claim no accuracy the results do not show."
)
MAX_OUTPUT_CHARS = 1500
VERIFIERS: dict[str, Callable[[], Verifier]] = {"qa": QAVerifier, "math": MathVerifier, "mc": MultipleChoiceVerifier}
"""How a description's tasks may be checked."""
Progress = Callable[[str], None]


@dataclass(frozen=True)
class TaskRow:
    """One task of a tasks file: its line number (from 1), question, gold answer and kind (``None``: not given)."""

    line: int
    question: str
    answer: str
    kind: str | None = None


@dataclass(frozen=True)
class DescribedTask:
    """One task and how the model did on it, what it cost and how long it took."""

    question: str
    output: str
    correct: bool
    usd: float = 0.0
    seconds: float = 0.0
    kind: str = "qa"


def read_tasks(path: str | Path) -> list[TaskRow]:
    """The tasks of a JSONL file with ``question`` and ``answer`` fields; a bad line is a ConfigError naming it."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as error:
        raise ConfigError(f"cannot read {path}: {error.strerror}") from error
    rows = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            kind = None if record.get("kind") is None else str(record["kind"])
            rows.append(TaskRow(number, str(record["question"]), str(record["answer"]), kind))
        except (json.JSONDecodeError, KeyError, TypeError) as error:
            raise ConfigError(f"{path}:{number}: needs a JSON object with 'question' and 'answer'") from error
    if not rows:
        raise ConfigError(f"{path}: no tasks")
    return rows


async def run_tasks(
    model: ChatBackend,
    tasks: list[tuple[str, str, str]],
    verifier: Verifier,
    *,
    max_tokens: int = 512,
    progress: Progress | None = None,
) -> list[DescribedTask]:
    """Run ``model`` on (question, gold, kind) tasks, judge each answer and measure its cost and time; a failed
    call counts as incorrect."""
    runs = []
    for index, (question, gold, kind) in enumerate(tasks, 1):
        if progress is not None:
            progress(f"task {index}/{len(tasks)}")
        started = time.perf_counter()
        try:
            generation = await model.generate([Message(role="user", content=question)], max_tokens=max_tokens)
        except BackendError as error:
            failed = f"[call failed: {error}]"
            runs.append(DescribedTask(question, failed, False, seconds=time.perf_counter() - started, kind=kind))
            continue
        seconds = time.perf_counter() - started
        verdict = await verifier.verify(extract_answer(generation.text) or "", gold)
        runs.append(DescribedTask(question, generation.text, verdict.correct, generation.usd, seconds, kind))
    return runs


def measured(runs: list[DescribedTask]) -> Figures:
    """The figures of ``runs``: solved / attempted overall and per kind, mean USD and seconds per task."""
    count = max(len(runs), 1)
    kinds: dict[str, list[DescribedTask]] = {}
    for run in runs:
        kinds.setdefault(run.kind, []).append(run)
    return Figures(
        solved=sum(run.correct for run in runs),
        attempted=len(runs),
        usd_per_task=sum(run.usd for run in runs) / count,
        seconds_per_task=sum(run.seconds for run in runs) / count,
        by_kind={
            kind: KindFigures(solved=sum(run.correct for run in of_kind), attempted=len(of_kind))
            for kind, of_kind in kinds.items()
        },
    )


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_PERCENT = re.compile(r"(\d+(?:\.\d+)?)\s*(?:%|percent\b)", re.IGNORECASE)
_ABOUT_SUCCESS = re.compile(r"accura|correct|success|solv|reliab|right|score|perform", re.IGNORECASE)
_PRAISE = re.compile(
    r"\b(?:exceptional\w*|excellent|outstanding|superb|perfect\w*|flawless\w*|near-perfect|impeccabl\w*|"
    r"(?:highly|very|extremely|remarkably) (?:accurate|reliable|capable|strong)|always (?:correct|right|accurate)|"
    r"never (?:wrong|fails?|errs)|state-of-the-art|top-tier|expert)\b",
    re.IGNORECASE,
)
PRAISE_BELOW = 0.5
"""Praise ("exceptional", "highly accurate") contradicts a worker that solved fewer than this share of its tasks."""


def contradiction(sentence: str, figures: Figures) -> str | None:
    """How ``sentence`` contradicts the measured figures, or None: an accuracy figure farther from the measured
    rate than the sample can tell apart (one task's share, at least ten points), or praise for a worker that
    solved fewer than half its tasks."""
    rate, margin = figures.rate, max(0.1, 1 / max(figures.attempted, 1))
    measured_text = f"it solved {figures.solved} of {figures.attempted}"
    if _ABOUT_SUCCESS.search(sentence):
        for claim in _PERCENT.finditer(sentence):
            if abs(float(claim[1]) / 100 - rate) > margin:
                return f"claims {claim[0]} where {measured_text}"
    praise = _PRAISE.search(sentence)
    if praise and rate < PRAISE_BELOW:
        return f"calls it '{praise[0]}' where {measured_text}"
    return None


def grounded(text: str, figures: Figures) -> tuple[str, list[str]]:
    """``text`` without its sentences that contradict ``figures``, and those sentences (each with why); when no
    sentence is left, the figures said plainly."""
    kept, rejected = [], []
    for sentence in _SENTENCE_END.split(text.strip()):
        reason = contradiction(sentence, figures)
        if reason is None:
            kept.append(sentence)
        else:
            rejected.append(f"{sentence} [{reason}]")
    plain = f"Solved {figures.solved} of {figures.attempted} sampled tasks."
    return " ".join(kept).strip() or plain, rejected


async def write_description(describer: ChatBackend, runs: list[DescribedTask], *, max_tokens: int = 256) -> str:
    """The describer's description of the model behind ``runs``."""
    evidence = "\n".join(
        f"<task>\n<instruction>{run.question}</instruction>\n<output>{run.output[:MAX_OUTPUT_CHARS]}</output>\n"
        f"<success>{'yes' if run.correct else 'no'}</success>\n</task>"
        for run in runs
    )
    solved = sum(run.correct for run in runs)
    user = f"The model solved {solved} of {len(runs)} tasks.\n{evidence}\nWrite the description."
    generation = await describer.generate(
        [Message(role="system", content=DESCRIBER_PROMPT), Message(role="user", content=user)], max_tokens=max_tokens
    )
    return generation.text.strip()


class DescriptionRequest(Config):
    """What to describe workers on: a tasks file, how many to sample and how to judge them, and who writes."""

    tasks: str
    """JSONL of tasks with 'question' and 'answer' fields."""
    describer: str | None = None
    """The worker that writes the descriptions (default: the pool's role worker, else its first worker)."""
    n: PositiveInt = 10
    """Tasks sampled (the same sample for every worker described)."""
    verifier: Literal["qa", "math", "mc"] = "qa"
    """How answers are checked: qa, math or mc."""
    seed: int = 0
    """Seed of the task sample."""

    def sample(self) -> list[TaskRow]:
        """The seeded sample of ``n`` tasks (the same for every worker of a refresh)."""
        rows = read_tasks(Path(self.tasks))
        return random.Random(self.seed).sample(rows, min(self.n, len(rows)))


class DescribeConfig(DescriptionRequest):
    """``podium describe-model`` and ``podium pool refresh-descriptions``: which workers of which pool are
    described, on what, and where their descriptions are recorded."""

    pool: str | None = None
    """Pool file (PoolConfig); default: the embedded offline pool."""
    workers: list[str] = Field(default_factory=list)
    """The workers described (default: every worker of the pool)."""
    out: str | None = None
    """Descriptions file the descriptions are recorded in (default: the pool's descriptions file)."""


async def describe_worker(
    pool: Pool, worker: str, request: DescriptionRequest, progress: Progress | None = None
) -> WorkerDescription:
    """Run ``worker`` on the request's sample and have the describer write its description, with provenance."""
    describer = request.describer or pool.config.role_worker or pool.config.workers[0].name
    for name in (worker, describer):
        if name not in pool.backends:
            raise ConfigError(f"no worker '{name}' (workers: {', '.join(pool.backends)})")
    sample = request.sample()
    tasks = [(row.question, row.answer, row.kind or request.verifier) for row in sample]
    runs = await run_tasks(pool.backends[worker], tasks, VERIFIERS[request.verifier](), progress=progress)
    written = await write_description(pool.backends[describer], runs)
    if not written:
        raise BackendError(f"the describer '{describer}' wrote an empty description")
    figures = measured(runs)
    text, rejected = grounded(written, figures)
    provenance = Provenance(
        tasks=str(request.tasks),
        tasks_sha256=hashlib.sha256(Path(request.tasks).read_bytes()).hexdigest(),
        task_ids=[row.line for row in sample],
        solved=sum(run.correct for run in runs),
        verifier=request.verifier,
        describer=f"{describer} ({pool.backends[describer].model})",
        written_at=datetime.now(tz=UTC).isoformat(timespec="seconds"),
        worker_sha256=worker_fingerprint(pool.workers[worker]),
    )
    return WorkerDescription(description=text, provenance=provenance, figures=figures, rejected=rejected)


def record_description(path: str | Path, worker: str, entry: WorkerDescription) -> None:
    """Write ``entry`` for ``worker`` into the descriptions file at ``path`` (YAML, or JSON for a ``.json`` name),
    keeping the other workers' entries; the file is replaced atomically."""
    path = Path(path)
    descriptions = read_descriptions(path)
    descriptions.workers[worker] = entry
    path.parent.mkdir(parents=True, exist_ok=True)
    data = descriptions.model_dump(mode="json")
    as_json = path.suffix.lower() == ".json"
    text = json.dumps(data, indent=2) + "\n" if as_json else yaml.safe_dump(data, sort_keys=False)
    write_atomically(path, text)

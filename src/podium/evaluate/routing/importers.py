"""RouteLLM's recordings of Mixtral-8x7B-Instruct and GPT-4-1106-preview as Podium recordings (``podium routing
import``), so routers and orchestrators are compared on them as on any recording:

- ``routellm-gsm8k``: their full responses to the 1,319 GSM8K test questions (``routing/gsm8k_responses.csv``);
- ``routellm-mmlu``: whether each was right on the 14,042 MMLU test questions (57 subjects, ``routing/mmlu``),
  without the responses, so an orchestrator routes from the question alone (the ``recorded`` verifier grades a
  replayed answer by the recording).

**Outcomes.** Each recorded GSM8K response is graded by Podium's own math verifier (its final answer, as the
``escalate`` policy reads it, against the GSM8K gold), so routers and orchestrators are judged by one grader. This
agrees with RouteLLM's recorded True/False on 2,580 of the 2,638 responses (Mixtral 1,310 / 1,319; GPT-4 1,270
/ 1,319, where Podium accepts 47 answers that RouteLLM's grader rejected and rejects 2 it accepted). MMLU's outcomes
are RouteLLM's recorded True/False.

**Cost.** What a replay worker charges (``podium.backends.replay``): cl100k tokens of the recorded question and
response at the model's list price (MMLU: the question and one output token, the option letter).

**Split.** GSM8K by a hash of the normalised question, MMLU by a hash of the subject, so its test subjects are
unseen in training (:class:`~podium.recording.SplitRule`): about 20 / 10 / 70 % test / validation / train.
GSM8K: 270 / 139 / 910 questions. MMLU: 9 test subjects with 1,521 questions (business ethics, college mathematics,
medicine and physics, elementary mathematics, high-school European history, nutrition, sociology, US foreign
policy), 1,310 validation, 10,999 train. GSM8K tasks keep the dataset's order; MMLU tasks are ordered by a hash of
the question, so the first N of a split mix its subjects. The 106 MMLU questions recorded twice (212 rows, in two
subjects each) are left out: a replay cannot tell them apart.
"""

import hashlib
import json
from collections import Counter
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path

from podium import core
from podium.backends.replay import (
    OUTCOME_ONLY_OUTPUT_TOKENS,
    Recorded,
    ReplayBackend,
    count_tokens,
    load_recordings,
)
from podium.cache import cache_dir
from podium.core.answers import extract_answer
from podium.core.files import write_atomically
from podium.costs.prices import PriceCatalog
from podium.datasets.benchmark import shared_data_dir
from podium.datasets.items import BenchmarkItem
from podium.datasets.loaders import get_benchmark
from podium.errors import ConfigError, PodiumError
from podium.evaluate.routing.config import Source
from podium.evaluate.routing.record import RecordingWriter, file_digest, new_manifest, now
from podium.graders import math as math_grader
from podium.graders import math_rules
from podium.graders.math import math_equivalent
from podium.recording import (
    MANIFEST,
    RecordedOutcome,
    RecordedTask,
    RecordedWorker,
    Recording,
    SplitRule,
    normalise,
    read_manifest,
)

MIXTRAL = "mistralai/Mixtral-8x7B-Instruct-v0.1"
GPT4 = "gpt-4-1106-preview"
WORKERS = {"mixtral": MIXTRAL, "gpt4": GPT4}
"""RouteLLM's recorded models, under the names the claim's pool gives them."""
GSM8K_RECORDING = "routing/gsm8k_responses.csv"
MMLU_RECORDING = "routing/mmlu"
GSM8K_FILE = "math/gsm8k_test.jsonl"
GRADING_CODE = (math_grader, math_rules, core.answers)
"""Modules whose code decides a grade (their bytes key the cache of grades)."""
Progress = Callable[[str], None]


def graded(response: str, gold: str) -> bool:
    """Whether ``response`` states the gold answer, by Podium's math verifier."""
    answer = extract_answer(response, "math")
    return bool(answer) and math_equivalent(answer, gold)


def import_routellm(
    source: Source, out: Path, data_dir: str | Path | None = None, progress: Progress | None = None
) -> int:
    """Write RouteLLM's recording ``source`` as a Podium recording in ``out``; returns the outcomes written. A
    finished import is kept (importing again writes nothing)."""
    if (out / MANIFEST).is_file() and read_manifest(out).source.get("import") == source:
        recording = Recording.load(out)
        if recording.tasks and not recording.missing():
            return 0  # imported already
    shared = shared_data_dir(data_dir)
    catalog = PriceCatalog.default()
    workers = [RecordedWorker(name=name, model=model, backend="replay", price=catalog.model_price(model))
               for name, model in WORKERS.items()]  # fmt: skip
    if source == "routellm-gsm8k":
        path, split = shared / GSM8K_RECORDING, SplitRule()
        tasks, outcomes = _gsm8k(path, shared / GSM8K_FILE, workers, data_dir, progress)
    else:
        path, split = shared / MMLU_RECORDING, SplitRule(key="metadata.subject")
        tasks, outcomes = _mmlu(path, workers)
    digest = file_digest(path) if path.is_file() else "directory"
    manifest = new_manifest(workers, split=split, source={"import": source, "path": str(path), "sha256": digest})
    return RecordingWriter(out, manifest, tasks).extend(outcomes)


def _gsm8k(
    path: Path, golds: Path, workers: list[RecordedWorker], data_dir: str | Path | None, progress: Progress | None
) -> tuple[list[RecordedTask], list[RecordedOutcome]]:
    """The GSM8K tasks and each worker's graded response."""
    if not path.is_file():
        raise ConfigError(f"{path}: RouteLLM's GSM8K recording is not there (give --data-dir)")
    replays = {worker.name: ReplayBackend.from_file(path, worker.model) for worker in workers}
    questions = get_benchmark("gsm8k").items(data_dir=data_dir)
    split = SplitRule()
    grades = GradedCache(path, golds, tuple(worker.model for worker in workers))
    tasks, outcomes = [], []
    for count, item in enumerate(questions, 1):
        task = RecordedTask(**item.model_dump(), split=split.split(item))
        tasks.append(task)
        for worker in workers:
            record = replays[worker.name].index.find(item.question)
            if record is None:
                raise PodiumError(f"{path}: no recorded answer of {worker.model} for GSM8K item {item.id}")
            correct, tokens_in, tokens_out = grades.outcome(item.id, str(item.gold), worker.model, record)
            outcomes.append(_outcome(task.id, worker, record.response, correct, tokens_in, tokens_out))
        if progress is not None and count % 100 == 0:
            progress(f"imported {count}/{len(questions)} questions")
    grades.save()
    return tasks, outcomes


def _mmlu(directory: Path, workers: list[RecordedWorker]) -> tuple[list[RecordedTask], list[RecordedOutcome]]:
    """The MMLU tasks (outcome-only) and each worker's recorded outcome."""
    files = sorted(directory.glob("mmlu_*.csv"))
    if not files:
        raise ConfigError(f"{directory}: no MMLU recording (mmlu_<subject>.csv files)")
    models = [worker.model for worker in workers]
    rows: list[tuple[str, int, str, list[Recorded]]] = []
    for file in files:
        by_model = load_recordings(file, models)
        for index, records in enumerate(zip(*by_model.values(), strict=True)):
            rows.append((file.stem.removeprefix("mmlu_"), index, normalise(records[0].question), list(records)))
    times = Counter(key for _, _, key, _ in rows)
    split = SplitRule(key="metadata.subject")
    tasks, outcomes = [], []
    for subject, index, key, records in sorted(rows, key=lambda row: hashlib.sha256(row[2].encode()).digest()):
        if times[key] > 1:
            continue
        question = records[0].question
        item = {"id": f"mmlu-{subject}-{index}", "question": question, "verifier": "recorded",
                "gold": [model for model, record in zip(models, records, strict=True) if record.correct],
                "metadata": {"subject": subject}}  # fmt: skip
        task = RecordedTask(**item, split=split.split(BenchmarkItem.model_validate(item)))
        tasks.append(task)
        tokens_in = count_tokens(question)
        for worker, record in zip(workers, records, strict=True):
            outcomes.append(_outcome(task.id, worker, None, record.correct, tokens_in, OUTCOME_ONLY_OUTPUT_TOKENS))
    return tasks, outcomes


def _outcome(task_id: str, worker: RecordedWorker, reply: str | None, correct: bool, tokens_in: int,
             tokens_out: int) -> RecordedOutcome:  # fmt: skip
    return RecordedOutcome(
        task_id=task_id, worker=worker.name, status="ok", reply=reply, correct=correct, score=float(correct),
        input_tokens=tokens_in, output_tokens=tokens_out, usd=worker.price.cost(tokens_in, tokens_out),
        recorded_at=now(),
    )  # fmt: skip


class GradedCache:
    """The grades and token counts of a recording's responses, kept in Podium's cache: grading 2,638 responses
    with math-verify takes most of a minute. The cache file is keyed by the bytes of the recording, of the gold
    answers and of the grading code, so any change to one grades again."""

    def __init__(self, recording: Path, golds: Path, models: tuple[str, ...]) -> None:
        digest = hashlib.sha256()
        for source in (recording, golds, *(Path(module.__file__ or "") for module in GRADING_CODE)):
            digest.update(source.read_bytes() if source.is_file() else str(source).encode())
        digest.update(json.dumps([models, version("math-verify")]).encode())
        self.path = cache_dir("routing") / f"graded-{digest.hexdigest()[:24]}.json"
        self.entries: dict[str, list] = json.loads(self.path.read_text()) if self.path.is_file() else {}
        self.changed = False

    def outcome(self, item_id: str, gold: str, model: str, record: Recorded) -> tuple[bool, int, int]:
        """(correct, question tokens, response tokens) of ``model``'s recorded response to the item."""
        key = f"{item_id}\t{model}"
        if key not in self.entries:
            response = record.response or ""
            self.entries[key] = [graded(response, gold), count_tokens(record.question), count_tokens(response)]
            self.changed = True
        correct, tokens_in, tokens_out = self.entries[key]
        return bool(correct), int(tokens_in), int(tokens_out)

    def save(self) -> None:
        """Write the cache file (atomically) when something was graded."""
        if self.changed:
            write_atomically(self.path, json.dumps(self.entries))

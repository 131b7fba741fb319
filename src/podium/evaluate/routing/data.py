"""The routing setting (RouteLLM's): per question, what each recorded model would have answered, whether that is
right, what it costs; and the fixed train / validation / test split. Two recordings of Mixtral and GPT-4:

- ``gsm8k``: their full responses to the 1,319 GSM8K test questions;
- ``mmlu``: whether each was right on the 14,042 MMLU test questions (57 subjects), without the responses, so an
  orchestrator routes from the question alone (the ``recorded`` verifier grades a replayed answer by the recording).

**Outcomes.** Each recorded GSM8K response is graded by Podium's own math verifier (its final answer, as the
``escalate`` policy reads it, against the GSM8K gold), so routers and orchestrators are judged by one grader. This
agrees with RouteLLM's recorded True/False on 2,580 of the 2,638 responses (Mixtral 1,310 / 1,319; GPT-4 1,270
/ 1,319, where Podium accepts 47 answers that RouteLLM's grader rejected and rejects 2 it accepted). MMLU's outcomes
are RouteLLM's recorded True/False.

**Cost.** What a replay worker charges (``podium.backends.replay``): cl100k tokens of the recorded question
and response at the model's list price (MMLU: the question and one output token, the option letter).

**Split.** GSM8K by a hash of the normalised question, MMLU by a hash of the subject, so its test subjects are
unseen in training (sha256, first 8 hex digits as an integer, modulo 100): 0-19 test, 20-29 validation, 30-99
train — fixed, independent of file order. GSM8K: about 20 / 10 / 70 % of the questions. MMLU: 9 test subjects with
1,521 questions (business ethics, college mathematics, medicine and physics, elementary mathematics, high-school
European history, nutrition, sociology, US foreign policy), 1,310 validation, 10,999 train. GSM8K items keep the
dataset's order; MMLU items are ordered by a hash of the question, so the first N of a split mix its subjects. The
106 MMLU questions recorded twice (212 rows, in two subjects each) are left out: a replay cannot tell them apart.
"""

import hashlib
import json
from collections import Counter
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Literal

from podium import core
from podium.backends.replay import (
    OUTCOME_ONLY_OUTPUT_TOKENS,
    Recorded,
    ReplayBackend,
    count_tokens,
    load_recordings,
    normalise,
)
from podium.cache import cache_dir
from podium.core.answers import extract_answer
from podium.core.files import write_atomically
from podium.costs.prices import ModelPrice, PriceCatalog
from podium.datasets.items import BenchmarkItem
from podium.datasets.loaders import get_benchmark, shared_data_dir
from podium.errors import PodiumError
from podium.graders import math as math_grader
from podium.graders import math_rules
from podium.graders.math import math_equivalent

WEAK = "mistralai/Mixtral-8x7B-Instruct-v0.1"
"""The cheap recorded model."""
STRONG = "gpt-4-1106-preview"
"""The dear recorded model."""
RECORDING = "routing/gsm8k_responses.csv"
"""The recording, relative to the shared data directory."""
MMLU_RECORDING = "routing/mmlu"
"""RouteLLM's MMLU outcomes, one CSV per subject, relative to the shared data directory."""
GSM8K_FILE = "math/gsm8k_test.jsonl"
"""The gold answers, relative to the shared data directory."""
GRADING_CODE = (math_grader, math_rules, core.answers)
"""Modules whose code decides a grade (their bytes key the cache of grades)."""
Split = Literal["train", "validation", "test"]
Benchmark = Literal["gsm8k", "mmlu"]


@dataclass(frozen=True)
class Outcome:
    """One model's replayed answer to one question."""

    correct: bool
    usd: float
    """What the recorded model charges for it at the sheet's price."""
    response: str | None
    """The recorded reply (None where only the outcome is recorded)."""
    tokens: tuple[int, int]
    """(question tokens, reply tokens), to price it at another worker's price."""


@dataclass(frozen=True)
class RoutingItem:
    """A question with every model's outcome on it."""

    item: BenchmarkItem
    split: Split
    outcomes: dict[str, Outcome]
    """Model → outcome."""

    @property
    def question(self) -> str:
        return self.item.question


def split_of(key: str) -> Split:
    """The split of a question (GSM8K) or subject (MMLU) ``key`` (see the module notes)."""
    bucket = int(hashlib.sha256(normalise(key).encode()).hexdigest()[:8], 16) % 100
    return "test" if bucket < 20 else "validation" if bucket < 30 else "train"


def recording_path(data_dir: str | Path | None = None) -> Path:
    """Where the GSM8K recording is."""
    return shared_data_dir(data_dir) / RECORDING


def graded(response: str, gold: str) -> bool:
    """Whether ``response`` states the gold answer, by Podium's math verifier."""
    answer = extract_answer(response, "math")
    return bool(answer) and math_equivalent(answer, gold)


def load_routing(
    models: tuple[str, ...] = (WEAK, STRONG),
    *,
    benchmark: Benchmark = "gsm8k",
    data_dir: str | Path | None = None,
    recording: str | Path | None = None,
    prices: PriceCatalog | None = None,
) -> list[RoutingItem]:
    """Every question of ``benchmark`` with the outcomes of ``models`` in ``recording`` (default: RouteLLM's),
    priced by Podium's sheet merged with ``prices``."""
    catalog = PriceCatalog.default().merged(prices) if prices is not None else PriceCatalog.default()
    price: dict[str, ModelPrice] = {model: catalog.model_price(model) for model in models}
    if benchmark == "mmlu":
        return _load_mmlu(Path(recording or shared_data_dir(data_dir) / MMLU_RECORDING), price)
    path = Path(recording or recording_path(data_dir))
    replays = {model: ReplayBackend.from_file(path, model) for model in models}
    questions = get_benchmark("gsm8k").items(data_dir=data_dir)
    records = {}
    for item in questions:
        for model, replay in replays.items():
            record = replay.index.find(item.question)
            if record is None:
                raise PodiumError(f"{path}: no recorded answer of {model} for GSM8K item {item.id}")
            records[item.id, model] = record
    graded_by = GradedCache(path, shared_data_dir(data_dir) / GSM8K_FILE, models)
    items = []
    for item in questions:
        outcomes = {}
        for model in models:
            record = records[item.id, model]
            correct, tokens_in, tokens_out = graded_by.outcome(item, model, record.question, record.response)
            outcomes[model] = Outcome(
                correct, price[model].cost(tokens_in, tokens_out), record.response, (tokens_in, tokens_out)
            )
        items.append(RoutingItem(item, split_of(item.question), outcomes))
    graded_by.save()
    return items


def _load_mmlu(directory: Path, price: dict[str, ModelPrice]) -> list[RoutingItem]:
    """The MMLU outcomes of the models in ``price``, one CSV per subject in ``directory`` (module notes)."""
    files = sorted(directory.glob("mmlu_*.csv"))
    if not files:
        raise PodiumError(f"{directory}: no MMLU recording (mmlu_<subject>.csv files)")
    rows: list[tuple[str, int, str, dict[str, Recorded]]] = []
    for file in files:
        by_model = load_recordings(file, list(price))
        for index, records in enumerate(zip(*by_model.values(), strict=True)):
            key = normalise(records[0].question)
            rows.append((file.stem.removeprefix("mmlu_"), index, key, dict(zip(by_model, records, strict=True))))
    times = Counter(key for _, _, key, _ in rows)
    items = []
    for subject, index, key, records in sorted(rows, key=lambda row: hashlib.sha256(row[2].encode()).digest()):
        if times[key] > 1:
            continue
        question = next(iter(records.values())).question
        tokens_in = count_tokens(question)
        item = BenchmarkItem(
            id=f"mmlu-{subject}-{index}",
            question=question,
            gold=[model for model, record in records.items() if record.correct],
            verifier="recorded",
            metadata={"subject": subject},
        )
        tokens = (tokens_in, OUTCOME_ONLY_OUTPUT_TOKENS)
        outcomes = {m: Outcome(r.correct, price[m].cost(*tokens), None, tokens) for m, r in records.items()}
        items.append(RoutingItem(item, split_of(subject), outcomes))
    return items


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

    def outcome(self, item: BenchmarkItem, model: str, question: str, response: str) -> tuple[bool, int, int]:
        """(correct, question tokens, response tokens) of ``model``'s recorded response to ``item``."""
        key = f"{item.id}\t{model}"
        if key not in self.entries:
            self.entries[key] = [graded(response, str(item.gold)), count_tokens(question), count_tokens(response)]
            self.changed = True
        correct, tokens_in, tokens_out = self.entries[key]
        return bool(correct), int(tokens_in), int(tokens_out)

    def save(self) -> None:
        """Write the cache file (atomically) when something was graded."""
        if self.changed:
            write_atomically(self.path, json.dumps(self.entries))


def in_split(items: list[RoutingItem], split: Split) -> list[RoutingItem]:
    """The items of one split, in dataset order."""
    return [item for item in items if item.split == split]

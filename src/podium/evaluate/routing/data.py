"""The routing setting (RouteLLM's) on GSM8K: per question, what each recorded model would have answered,
whether that is right, what it costs; and the fixed train / validation / test split.

**Outcomes.** Each recorded response is graded by Podium's own math verifier (its final answer, as the
``escalate`` policy reads it, against the GSM8K gold), so routers and orchestrators are judged by one grader. This
agrees with RouteLLM's recorded True/False on 2,580 of the 2,638 responses (Mixtral 1,310 / 1,319; GPT-4 1,270
/ 1,319, where Podium accepts 47 answers that RouteLLM's grader rejected and rejects 2 it accepted).

**Cost.** What a replay worker charges (``podium.backends.replay``): cl100k tokens of the recorded question
and response at the model's list price.

**Split.** By a hash of the normalised question (sha256, first 8 hex digits as an integer, modulo 100):
0-19 test, 20-29 validation, 30-99 train — fixed, independent of file order, about 20 / 10 / 70 %.
"""

import hashlib
import json
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Literal

from podium import core
from podium.backends.replay import ReplayBackend, count_tokens, normalise
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
GSM8K_FILE = "math/gsm8k_test.jsonl"
"""The gold answers, relative to the shared data directory."""
GRADING_CODE = (math_grader, math_rules, core.answers)
"""Modules whose code decides a grade (their bytes key the cache of grades)."""
Split = Literal["train", "validation", "test"]


@dataclass(frozen=True)
class Outcome:
    """One model's replayed answer to one question."""

    correct: bool
    usd: float
    response: str


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


def split_of(question: str) -> Split:
    """The question's split (see the module notes)."""
    bucket = int(hashlib.sha256(normalise(question).encode()).hexdigest()[:8], 16) % 100
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
    data_dir: str | Path | None = None,
    recording: str | Path | None = None,
    prices: PriceCatalog | None = None,
) -> list[RoutingItem]:
    """Every GSM8K test question with the outcomes of ``models`` in ``recording`` (default: RouteLLM's), priced
    by Podium's sheet merged with ``prices``."""
    catalog = PriceCatalog.default().merged(prices) if prices is not None else PriceCatalog.default()
    path = Path(recording or recording_path(data_dir))
    replays = {model: ReplayBackend.from_file(path, model) for model in models}
    price: dict[str, ModelPrice] = {model: catalog.model_price(model) for model in models}
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
            outcomes[model] = Outcome(correct, price[model].cost(tokens_in, tokens_out), record.response)
        items.append(RoutingItem(item, split_of(item.question), outcomes))
    graded_by.save()
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

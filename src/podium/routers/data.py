"""A recording read for routing: per task, each worker's graded outcome and what it costs under a price sheet.

A worker's price is a given sheet's entry for its model where the sheet names it, else the price it was recorded at,
so one recording is priced under any sheet (``--prices``). Tasks on which some worker's call failed, or whose reply
the grader could not decide, are left out (no router could be scored on them), each leaving a note that says why.
"""

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from podium.core.answers import VerifierKind
from podium.costs.prices import ModelPrice, PriceCatalog
from podium.errors import ConfigError
from podium.recording import RecordedTask, Recording, Split


@dataclass(frozen=True)
class Outcome:
    """One worker's recorded answer to one task, priced."""

    correct: bool
    usd: float
    """What it costs at the worker's price under the sheet."""
    response: str | None
    """The recorded reply (None where only the outcome is recorded)."""
    tokens: tuple[int, int]
    """(prompt tokens, completion tokens), to price it at another price."""


class Priced:
    """A worker with a price: what a recorded outcome's tokens cost at that price."""

    price: ModelPrice

    def usd(self, outcome: Outcome) -> float:
        """What it charges for ``outcome``'s tokens."""
        return self.price.cost(*outcome.tokens)


@dataclass(frozen=True)
class RoutedWorker(Priced):
    """A recorded worker and its price under the sheet."""

    name: str
    model: str
    price: ModelPrice


@dataclass(frozen=True)
class RoutingItem:
    """A task with every worker's outcome on it."""

    item: RecordedTask
    outcomes: dict[str, Outcome]
    """Worker name → outcome."""

    @property
    def question(self) -> str:
        return self.item.question

    @property
    def split(self) -> Split:
        return self.item.split


@dataclass
class RoutingSet:
    """The tasks a recording can score routers on, its workers and why the others were left out."""

    items: list[RoutingItem]
    workers: dict[str, RoutedWorker]
    """Name → worker, in the recording's order."""
    answer_kind: VerifierKind
    notes: list[str] = field(default_factory=list)

    def split(self, name: Split) -> list[RoutingItem]:
        """The items of one split, in recording order."""
        return [item for item in self.items if item.split == name]


def worker_price(model: str, recorded: ModelPrice, sheet: PriceCatalog | None) -> ModelPrice:
    """The price of a recorded model under ``sheet``: the sheet's entry where it names the model, else the price
    it was recorded at."""
    if sheet is not None and model in sheet.models:
        return sheet.models[model]
    return recorded


def routing_set(recording: Recording, prices: PriceCatalog | None = None) -> RoutingSet:
    """The recording's scorable tasks, priced under ``prices`` (see the module notes)."""
    workers = {w.name: RoutedWorker(w.name, w.model, worker_price(w.model, w.price, prices))
               for w in recording.manifest.workers}  # fmt: skip
    if len(workers) < 2:
        raise ConfigError(f"{recording.directory}: routing needs at least two recorded workers, it has {list(workers)}")
    kinds = sorted({task.verifier for task in recording.tasks})
    if len(kinds) != 1:
        raise ConfigError(f"{recording.directory}: routing needs tasks of one answer kind, it has {kinds or 'none'}")
    items, unscored = [], Counter[str]()
    for task in recording.tasks:
        outcomes = {}
        for name, worker in workers.items():
            recorded = recording.outcomes.get((task.id, name))
            if recorded is None:
                unscored[f"{name} has no outcome yet"] += 1
                break
            if recorded.status == "failed":
                unscored[f"{name}'s call failed"] += 1
                break
            if recorded.correct is None:
                unscored[f"the grader could not decide {name}'s reply"] += 1
                break
            tokens = (recorded.input_tokens, recorded.output_tokens)
            outcomes[name] = Outcome(recorded.correct, worker.price.cost(*tokens), recorded.reply, tokens)
        else:
            items.append(RoutingItem(task, outcomes))
    notes = [f"{count} tasks left out: {reason}" for reason, count in unscored.most_common()]
    if not items:
        raise ConfigError(f"{recording.directory}: no task has a graded outcome of every worker ({'; '.join(notes)})")
    return RoutingSet(items, workers, kinds[0], notes)  # type: ignore[arg-type]


def mean_costs(items: Sequence[RoutingItem], workers: Sequence[str]) -> list[float]:
    """Each worker's mean USD per task over ``items``."""
    return [sum(item.outcomes[name].usd for item in items) / len(items) for name in workers]

"""An orchestrator evaluated with ``podium eval`` on recorded outcomes, read as a router: its greedy operating
point, and the curve its escalation probability traces when thresholded (the routers' own APGR definition).

The orchestrator plays the ``escalate`` policy over replay workers: it names a worker, reads the reply, then accepts
or escalates. Its trajectory records the probability of every word at each turn. At the first decision after a
reply, ``1 − P(accept)`` is its escalation score; sweeping a threshold over the scores (escalate where the score
reaches it, to the worker it ranks first) gives one operating point per threshold, each question's outcome read
from the recording of the worker it would then have accepted (every alternative's outcome is recorded, so no
episode is re-run) and priced at that worker's price as the run's pool priced it: a worker's inline price counts, so
a worker that replays GPT-4 at another price is drawn at its own. Questions on which it called the dear model first
count as strong calls at every threshold. Under a blind pool the words are each episode's labels, read back through
the mapping the episode recorded.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from podium.costs.prices import ModelPrice, PriceCatalog
from podium.evaluate.routing.data import STRONG, WEAK, Outcome, RoutingItem
from podium.evaluate.routing.metrics import Point
from podium.evaluate.runner import EvalRecord, load_run
from podium.policies.escalate import ACCEPT, ROLE
from podium.pool.config import PoolConfig
from podium.pool.pool import load_pool_config, worker_prices


@dataclass(frozen=True)
class Worker:
    """A replay worker of the evaluated pool."""

    name: str
    model: str
    """The recorded model it replays."""
    price: ModelPrice
    """Its price in the run (a given sheet's entry, else its inline price, else the pool's sheet)."""

    def usd(self, outcome: Outcome) -> float:
        """What it charges for replaying ``outcome``."""
        return self.price.cost(*outcome.tokens)


@dataclass(frozen=True)
class Episode:
    """What one orchestrated question tells: which workers it asked, in order, and the escalation score."""

    item: RoutingItem
    asked: list[Worker]
    """The workers asked, in order."""
    escalation: float | None
    """1 − P(accept) at the first decision after a reply (None when it never got there or could only accept)."""
    escalate_to: Worker | None
    """The worker it ranked first among the escalations at that decision."""
    correct: bool
    usd: float

    def asked_model(self, model: str) -> bool:
        """Whether it asked a worker that replays ``model``."""
        return any(worker.model == model for worker in self.asked)


@dataclass(frozen=True)
class OrchestratorRun:
    """One evaluated orchestrator."""

    name: str
    episodes: list[Episode]

    def greedy(self) -> Point:
        """The operating point it reached when run (greedy decoding)."""
        count = len(self.episodes)
        return Point(
            strong_share=sum(episode.asked_model(STRONG) for episode in self.episodes) / count,
            accuracy=sum(episode.correct for episode in self.episodes) / count,
            usd_per_question=sum(episode.usd for episode in self.episodes) / count,
        )

    def calls(self) -> float:
        """Worker calls per question."""
        return sum(len(episode.asked) for episode in self.episodes) / len(self.episodes)

    def share(self, model: str) -> float:
        """Share of questions on which it asked ``model``."""
        return sum(episode.asked_model(model) for episode in self.episodes) / len(self.episodes)

    def curve(self) -> list[Point]:
        """The operating points of every threshold on its escalation score (see the module notes)."""
        scores = self.scores()
        thresholds = sorted({score for score in scores if score is not None}, reverse=True)
        none = self._point([False] * len(scores))
        return [none, *(self._point([s is not None and s >= t for s in scores]) for t in thresholds)]

    def above(self, threshold: float) -> tuple[Point, float]:
        """The operating point, and worker calls per question, of escalating exactly where the score exceeds
        ``threshold`` (a price sheet's break-even probability, :mod:`podium.evaluate.routing.priced`)."""
        escalate = [score is not None and score > threshold for score in self.scores()]
        asked = sum(1 + up for episode, up in zip(self.episodes, escalate, strict=True) if episode.asked)
        return self._point(escalate), asked / len(self.episodes)

    def scores(self) -> list[float | None]:
        """Each question's escalation score where the weak model answered first (None elsewhere: no decision)."""
        return [e.escalation if e.asked and e.asked[0].model == WEAK else None for e in self.episodes]

    def _point(self, escalate: Sequence[bool]) -> Point:
        correct, usd, strong = 0, 0.0, 0
        for episode, up in zip(self.episodes, escalate, strict=True):
            outcomes = episode.item.outcomes
            if not episode.asked:  # answered without a worker: read as the weak model's reply
                correct, usd = correct + outcomes[WEAK].correct, usd + outcomes[WEAK].usd
                continue
            first = episode.asked[0]
            final = episode.escalate_to if up and episode.escalate_to is not None else first
            correct += outcomes[final.model].correct
            usd += final.usd(outcomes[final.model]) + (first.usd(outcomes[first.model]) if final != first else 0.0)
            strong += STRONG in (first.model, final.model)
        count = len(self.episodes)
        return Point(strong_share=strong / count, accuracy=correct / count, usd_per_question=usd / count)


def read_orchestrator(
    name: str, run_dir: str | Path, items: Sequence[RoutingItem], prices: PriceCatalog | None = None
) -> OrchestratorRun:
    """The evaluated orchestrator in ``run_dir`` (a ``podium eval`` run of a route-policy system over replay
    workers, on a tasks file of ``podium routing tasks``, under the sheet ``prices``) on ``items``, matched by
    item id."""
    manifest, records = load_run(run_dir)
    workers = replay_workers(manifest.system_config.get("pool"), Path(run_dir), prices)
    by_id = {item.item.id: item for item in items}
    episodes = [episode(record, by_id[record.item_id], workers) for record in records if record.item_id in by_id]
    if not episodes:
        raise ValueError(f"{run_dir}: none of its {len(records)} results is an item of the routing split")
    return OrchestratorRun(name, episodes)


def replay_workers(pool: object, run_dir: Path, prices: PriceCatalog | None = None) -> dict[str, Worker]:
    """Worker label → replay worker, from the system config's pool (a path or an inline pool), priced as
    ``podium eval`` prices it under the sheet ``prices``."""
    if isinstance(pool, str):
        config = load_pool_config(pool)
    elif isinstance(pool, dict):
        config = PoolConfig.from_dict(pool, source=f"{run_dir} system pool")
    else:
        raise ValueError(f"{run_dir}: the system config names no pool of replay workers")
    price = worker_prices(config, prices)
    return {w.name: Worker(w.name, w.model, price[w.name]) for w in config.workers if w.backend == "replay"}


def episode(record: EvalRecord, item: RoutingItem, workers: dict[str, Worker]) -> Episode:
    """One result as an :class:`Episode`; a blind pool's labels are read back through the episode's mapping."""
    trajectory = record.trajectory
    blind = {label: name for name, label in (trajectory.metadata.get("labels") or {}).items()}
    workers = workers | {label: workers[name] for label, name in blind.items() if name in workers}
    labels = [str(result.call.arguments.get("model")) for result in trajectory.results
              if result.call.name == ROLE and isinstance(result.call.arguments, dict)]  # fmt: skip
    asked = [replay_worker(workers, label, record.item_id) for label in labels]
    escalation, escalate_to = None, None
    for turn in trajectory.turns:
        if turn.choice_probs and ACCEPT in turn.choice_probs:
            others = {word: p for word, p in turn.choice_probs.items() if word != ACCEPT}
            if others:
                escalation = 1.0 - turn.choice_probs[ACCEPT] / sum(turn.choice_probs.values())
                escalate_to = replay_worker(workers, max(others, key=others.__getitem__), record.item_id)
            break
    return Episode(
        item,
        asked,
        escalation,
        escalate_to,
        bool(record.verdict.correct),
        trajectory.usage.usd,
    )


def replay_worker(workers: dict[str, Worker], label: str, item_id: str) -> Worker:
    """The replay worker named ``label``; an error where the pool has none (its outcome is not recorded)."""
    if label not in workers:
        raise ValueError(f"item {item_id}: the orchestrator names '{label}', which is no replay worker of its pool")
    return workers[label]

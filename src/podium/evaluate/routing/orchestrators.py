"""An orchestrator evaluated with ``podium eval`` over replay workers of a recording, read as a router: its greedy
operating point, and the curve its escalation probability traces when thresholded (the routers' own definition).

The orchestrator plays the ``escalate`` policy: it names a worker, reads the reply, then accepts or escalates. Its
trajectory records the probability of every word at each turn. At the first decision after a reply, ``1 −
P(accept)`` is its escalation score; sweeping a threshold over the scores (escalate where the score reaches it, to
the worker it ranks first) gives one operating point per threshold, each task's outcome read from the
recording of the worker it would then have accepted (every alternative's outcome is recorded, so no episode is
re-run) and priced at that worker's price as the run's pool priced it: a worker's inline price counts, so a worker
that replays GPT-4 at another price is drawn at its own. A task whose first worker is the dearest has no score: it
keeps its first reply at every threshold. Under a blind pool the words are each episode's labels, read back through
the mapping the episode recorded.

Each replay worker of the run's pool stands for a recorded worker: the one of its own name where it replays the
recording's directory, else the one that ran its model. A run that asked a worker standing for none (a stranger
recorded elsewhere) has its greedy point but no curve.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from podium.backends.factory import ReplayBackendSpec
from podium.costs.prices import ModelPrice, PriceCatalog
from podium.evaluate.routing.metrics import Point, tally
from podium.evaluate.runner import EvalRecord, load_run
from podium.policies.escalate import ACCEPT, ROLE
from podium.pool.pool import worker_prices
from podium.routers.data import Priced, RoutingItem, RoutingSet
from podium.solve.config import SystemConfig


@dataclass(frozen=True)
class Worker(Priced):
    """A replay worker of the evaluated pool and the recorded worker it stands for."""

    name: str
    recorded: str | None
    """The recorded worker whose outcomes it replays (None: it stands for none of them)."""
    price: ModelPrice
    """Its price in the run (a given sheet's entry, else its inline price, else the pool's sheet)."""


@dataclass(frozen=True)
class Episode:
    """What one orchestrated task tells: which workers it asked, in order, and the escalation score."""

    item: RoutingItem
    asked: list[Worker]
    """The workers asked, in order."""
    escalation: float | None
    """1 − P(accept) at the first decision after a reply (None when it never got there or could only accept)."""
    escalate_to: Worker | None
    """The worker it ranked first among the escalations at that decision."""
    correct: bool
    usd: float


@dataclass(frozen=True)
class OrchestratorRun:
    """One evaluated orchestrator."""

    name: str
    episodes: list[Episode]
    dearest: str
    """The recorded worker with the highest mean cost: a task that asked it first has no escalation score."""
    workers: list[Worker]
    """The replay workers of its pool."""

    def greedy(self) -> Point:
        """The operating point it reached when run (greedy decoding)."""
        return tally(
            [episode.correct for episode in self.episodes],
            [episode.usd for episode in self.episodes],
            [{worker.recorded or worker.name for worker in episode.asked} for episode in self.episodes],
            sum(len(episode.asked) for episode in self.episodes),
        )

    @property
    def traceable(self) -> bool:
        """Whether every worker it asked stands for a recorded worker, so that its curve can be traced."""
        return all(worker.recorded is not None for episode in self.episodes for worker in episode.asked)

    def curve(self) -> list[Point]:
        """The operating points of every threshold on its escalation score (see the module notes); only its greedy
        point where it is not :attr:`traceable`."""
        if not self.traceable:
            return [self.greedy()]
        scores = self.scores()
        thresholds = sorted({score for score in scores if score is not None}, reverse=True)
        none = self.point([None] * len(scores))
        pairs = list(zip(self.episodes, scores, strict=True))
        escalations = ([e.escalate_to if s is not None and s >= t else None for e, s in pairs] for t in thresholds)
        return [none, *(self.point(targets) for targets in escalations)]

    def scores(self) -> list[float | None]:
        """Each task's escalation score where it has one (None elsewhere: no decision to threshold)."""
        return [e.escalation if e.asked and e.escalate_to is not None and e.asked[0].recorded != self.dearest
                else None for e in self.episodes]  # fmt: skip

    def point(self, escalations: Sequence[Worker | None]) -> Point:
        """The point reached by escalating each task to the given worker (None: keeping the first reply)."""
        correct, usd, called, calls = [], [], [], 0
        for episode, target in zip(self.episodes, escalations, strict=True):
            outcomes = episode.item.outcomes
            if not episode.asked:  # answered without a worker: read as the cheapest worker's reply
                cheapest = min(outcomes, key=lambda name: outcomes[name].usd)
                correct.append(outcomes[cheapest].correct)
                usd.append(outcomes[cheapest].usd)
                called.append(set())
                continue
            first = episode.asked[0]
            route = [first] if target is None or target == first else [first, target]
            correct.append(outcomes[str(route[-1].recorded)].correct)
            usd.append(sum(worker.usd(outcomes[str(worker.recorded)]) for worker in route))
            called.append({str(worker.recorded) for worker in route})
            calls += len(route)
        return tally(correct, usd, called, calls)


def read_orchestrator(
    name: str, run_dir: str | Path, data: RoutingSet, items: Sequence[RoutingItem], prices: PriceCatalog | None = None
) -> OrchestratorRun:
    """The evaluated orchestrator in ``run_dir`` (a ``podium eval`` run of an escalate-policy system over replay
    workers, on tasks of the recording, under the sheet ``prices``) on ``items``, matched by task id."""
    manifest, records = load_run(run_dir)
    workers = replay_workers(manifest.system_config, Path(run_dir), data, prices)
    by_id = {item.item.id: item for item in items}
    episodes = [episode(record, by_id[record.item_id], workers) for record in records if record.item_id in by_id]
    if not episodes:
        raise ValueError(f"{run_dir}: none of its {len(records)} results is a task of the recording's split")
    means = {w: sum(e.item.outcomes[w].usd for e in episodes) / len(episodes) for w in data.workers}
    return OrchestratorRun(name, episodes, max(means, key=means.__getitem__), list(workers.values()))


def replay_workers(
    system: dict[str, Any], source: Path, data: RoutingSet, prices: PriceCatalog | None = None
) -> dict[str, Worker]:
    """Worker label → each replay worker of a system config's pool (a path or an inline pool, its ``replay``
    recording applied), with the recorded worker of ``data`` it stands for, priced as ``podium eval`` prices it
    under the sheet ``prices``."""
    if system.get("pool") is None:
        raise ValueError(f"{source}: the system config names no pool of replay workers")
    config = SystemConfig.from_dict({"pool": system["pool"], "replay": system.get("replay")},
                                    source=f"{source} system").pool_config()  # fmt: skip
    price = worker_prices(config, prices)
    by_model: dict[str, list[str]] = {}
    for recorded in data.workers.values():
        by_model.setdefault(recorded.model, []).append(recorded.name)
    workers = {}
    for worker in config.workers:
        if not isinstance(worker.backend, ReplayBackendSpec):
            continue
        recorded = None
        if worker.name in data.workers and Path(worker.backend.path).is_dir():
            recorded = worker.name
        elif len(by_model.get(worker.model, [])) == 1:
            recorded = by_model[worker.model][0]
        workers[worker.name] = Worker(worker.name, recorded, price[worker.name])
    return workers


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
            others = {word: p for word, p in turn.choice_probs.items() if word != ACCEPT and word in workers}
            if others:
                escalation = 1.0 - turn.choice_probs[ACCEPT] / sum(turn.choice_probs.values())
                escalate_to = workers[max(others, key=others.__getitem__)]
            break
    return Episode(item, asked, escalation, escalate_to, bool(record.verdict.correct), trajectory.usage.usd)


def replay_worker(workers: dict[str, Worker], label: str, item_id: str) -> Worker:
    """The replay worker named ``label``; an error where the pool has none (its outcome is not recorded)."""
    if label not in workers:
        raise ValueError(f"item {item_id}: the orchestrator names '{label}', which is no replay worker of its pool")
    return workers[label]

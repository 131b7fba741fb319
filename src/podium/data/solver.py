"""Solvers: an orchestrator system (a teacher, a cold-start policy, a worker sampled for pass rates) attempting
items through :meth:`podium.solve.system.System.solve`, the code path of ``podium eval``, rollouts and serving;
and the grading of each attempt into a :class:`~podium.solve.records.DataRow` with its provenance."""

from collections.abc import Sequence

from podium.backends.base import BackendError
from podium.core.budget import StopReason
from podium.core.trajectory import Trajectory
from podium.data.pools import PoolCache, shared_pool
from podium.data.provenance import podium_version, pool_hash, prices_hash
from podium.data.sources import SourcedItem
from podium.data.store import DataError
from podium.errors import PodiumError
from podium.graders.grader import Grader, gold_text
from podium.graders.verdict import Verdict
from podium.policies import conversing_policies
from podium.pool.config import PoolConfig
from podium.solve.config import SystemConfig
from podium.solve.records import DataRow, Provenance
from podium.solve.system import System

CONSTRAINTS_HEADER = "Constraints learned from earlier failed attempts (follow them):"


def worker_solver(pool: str | PoolConfig | None, worker: str | None, **settings: object) -> SystemConfig:
    """A worker answering alone: the worker as orchestrator, no tools, one turn, unconstrained."""
    return SystemConfig(
        pool=pool,
        orchestrator=worker,
        allow=[],
        max_turns=1,
        constrained="never",
        **settings,  # type: ignore[arg-type]
    )


def constraint_text(constraints: Sequence[str]) -> str:
    """The block of learned constraints joined to a system prompt."""
    return "\n".join([CONSTRAINTS_HEADER, *(f"- {constraint}" for constraint in constraints)])


class Solver:
    """A system as a data stage uses it: its attempts at sourced items and the provenance of its rows."""

    def __init__(
        self, config: SystemConfig, *, constraints: Sequence[str] = (), pools: PoolCache | None = None
    ) -> None:
        chosen = config.pool_config()
        if constraints:
            joined = "\n\n".join(filter(None, [config.instructions, constraint_text(constraints)]))
            config = config.model_copy(update={"instructions": joined})
        self.config = config
        self.system = System.build(config, pool=shared_pool(chosen, pools))
        self.name = self.system.name
        self.model = self.system.model
        self.pool_hash = pool_hash(chosen)
        self.prices_hash = prices_hash(self.system.pool.prices)

    def check(self, items: Sequence[SourcedItem]) -> None:
        """Refuse up front items this solver cannot attempt (tool-use items need a conversational policy)."""
        if any(not self.system.supports(entry.item.verifier) for entry in items):
            policies = sorted(conversing_policies())
            raise DataError(f"solver {self.name}: tool-use items need the policy {policies}")

    async def attempt(self, entry: SourcedItem, *, temperature: float, seed: int) -> Trajectory:
        """One episode on the item; a failing simulated user gives a trajectory that stopped with ``error``."""
        try:
            return await self.system.solve(entry.item, seed=seed, temperature=temperature, metadata=self._source(entry))
        except BackendError as error:
            return Trajectory(
                question=entry.item.question, stop_reason=StopReason.ERROR, metadata={"error": str(error)}
            )

    async def explore(self, entry: SourcedItem, *, seed: int) -> list[Trajectory]:
        """Every path of the item's action tree, each played once (:mod:`podium.runtime.explore`)."""
        return await self.system.explore(entry.item, seed=seed, temperature=0.0, metadata=self._source(entry))

    @staticmethod
    def _source(entry: SourcedItem) -> dict[str, str]:
        return {"source": entry.source}

    def provenance(self, stage: str, entry: SourcedItem, *, temperature: float, seed: int, **extra: str) -> Provenance:
        return Provenance(
            stage=stage,
            source=entry.source,
            item_id=entry.item.id,
            model=self.model,
            solver=self.name,
            temperature=temperature,
            seed=seed,
            policy=self.system.config.policy.name,
            pool_hash=self.pool_hash,
            prices_hash=self.prices_hash,
            podium_version=podium_version(),
            system_version=self.system.version,
            **extra,
        )


async def grade(grader: Grader, entry: SourcedItem, trajectory: Trajectory) -> Verdict:
    """The verifier's verdict; an attempt whose infrastructure failed is wrong, with the failure as reason."""
    if trajectory.stop_reason is StopReason.ERROR:
        return Verdict.binary(False, reason=f"attempt failed: {trajectory.metadata.get('error', 'backend error')}")
    try:
        return await grader.grade(entry.item, trajectory)
    except (PodiumError, KeyError, ValueError) as error:
        return Verdict.undecided(f"grading failed: {type(error).__name__}: {error}")


def data_row(
    row_id: str, entry: SourcedItem, sample: int, trajectory: Trajectory, verdict: Verdict, provenance: Provenance
) -> DataRow:
    """A graded attempt as a data row."""
    item = entry.item
    return DataRow(
        id=row_id,
        item_id=item.id,
        benchmark=entry.source,
        question=item.question,
        gold=gold_text(item.gold),
        verifier=item.verifier,
        sample=sample,
        answer=trajectory.answer,
        correct=verdict.correct,
        score=verdict.score,
        reason=verdict.reason or verdict.error or "",
        messages=list(trajectory.messages),
        trajectory=trajectory,
        provenance=provenance,
    )

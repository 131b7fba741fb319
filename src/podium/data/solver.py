"""Solvers: an orchestrator over a pool (a teacher, a cold-start policy, a worker sampled for pass rates) that
attempts items through :class:`podium.runtime.Executor`, the code path of ``podium run`` and ``podium eval``; and
the grading of each attempt into a :class:`~podium.solve.records.DataRow` with its provenance.

Tool-use (tau2) items are played as a conversation with the simulated user, as evaluation plays them.
"""

from collections.abc import Sequence
from typing import Literal

from pydantic import Field

from podium.backends.base import BackendError, ChatBackend
from podium.core.answers import ANSWER_INSTRUCTIONS, extract_answer
from podium.core.budget import StopReason
from podium.core.trajectory import Trajectory
from podium.data.pools import PoolCache, pool_config, shared_pool
from podium.data.provenance import podium_version, pool_hash, prices_hash
from podium.data.sources import SourcedItem
from podium.data.store import DataError
from podium.envs.conversation import CONVERSATION_POLICIES, UserSimulatorConfig, run_task
from podium.envs.domain import load_domain
from podium.errors import PodiumError
from podium.graders.grader import Grader, gold_text
from podium.graders.verdict import Verdict
from podium.pool.config import PoolConfig
from podium.runtime import Executor, RunConfig
from podium.runtime.checks import require_runnable
from podium.runtime.explore import explore
from podium.solve.records import DataRow, Provenance

CONSTRAINTS_HEADER = "Constraints learned from earlier failed attempts (follow them):"


class SolverConfig(RunConfig):
    """An orchestrator over a pool: every field of the run config, the pool and the simulated user. A
    ``podium eval`` system file of kind ``orchestrator`` is a valid solver file."""

    kind: Literal["orchestrator"] = "orchestrator"
    """Accepted so that an evaluation system file serves here unchanged."""
    name: str | None = None
    """Name in provenance; default ``<policy>:<orchestrator model>``."""
    pool: str | PoolConfig | None = None
    """Pool YAML path or an inline pool; default: the embedded offline pool."""
    user: UserSimulatorConfig = Field(default_factory=UserSimulatorConfig)
    """The simulated user of tool-use (tau2) items."""
    instructions: str | None = None
    """Text added to the orchestrator's system prompt (for instance a domain note)."""


def worker_solver(pool: str | PoolConfig | None, worker: str | None, **settings: object) -> SolverConfig:
    """A worker answering alone: the worker as orchestrator, no tools, one turn, unconstrained."""
    return SolverConfig(
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
    """Attempts items with one orchestrator configuration."""

    def __init__(
        self, config: SolverConfig, *, constraints: Sequence[str] = (), pools: PoolCache | None = None
    ) -> None:
        chosen = pool_config(config.pool)
        self.config = config
        self.pool = shared_pool(chosen, pools)
        self.run_config = RunConfig.model_validate(config.model_dump(include=set(RunConfig.model_fields)))
        executor = Executor(self.pool, self.run_config)  # checks the orchestrator and summarizer names now
        self.model = executor.orchestrator.model
        self.name = config.name or f"{self.run_config.policy}:{self.model}"
        require_runnable(self.pool, self.run_config, f"solver {self.name}")
        notes = [text for text in (config.instructions, constraint_text(constraints) if constraints else None) if text]
        self.instructions = "\n\n".join(notes) or None
        self.pool_hash = pool_hash(chosen)
        self.prices_hash = prices_hash(self.pool.prices)

    def check(self, items: Sequence[SourcedItem]) -> None:
        """Refuse up front items this solver cannot attempt (tool-use items need a conversational policy)."""
        if self.run_config.policy not in CONVERSATION_POLICIES and any(
            entry.item.verifier == "environment" for entry in items
        ):
            raise DataError(f"solver {self.name}: tool-use items need the policy {sorted(CONVERSATION_POLICIES)}")

    async def attempt(
        self, entry: SourcedItem, *, temperature: float, seed: int, orchestrator: ChatBackend | None = None
    ) -> Trajectory:
        """One episode on the item (``orchestrator`` in place of the configured one, as exploring does); a failing
        backend gives a trajectory that stopped with ``error``."""
        update: dict[str, object] = {"temperature": temperature}
        if orchestrator is not None:
            update["constrained"] = "always"  # a path follower offers the policy's choices, not free text
        config = self.run_config.model_copy(update=update)
        item = entry.item
        metadata = {"item_id": item.id, "source": entry.source}
        try:
            if item.verifier == "environment":
                domain = load_domain(item.metadata["domain"], item.metadata.get("tau2_dir"))
                guidance = "\n\n".join(filter(None, [ANSWER_INSTRUCTIONS["environment"], self.instructions]))
                episode = await run_task(
                    self.pool,
                    config,
                    domain,
                    domain.task(str(item.gold)),
                    user=self.config.user,
                    guidance=guidance,
                    metadata=metadata,
                )
                return episode.trajectory
            trajectory = await Executor(self.pool, config, orchestrator=orchestrator).run(
                f"{item.question}\n\n{ANSWER_INSTRUCTIONS[item.verifier]}",
                seed=seed,
                instructions=self.instructions,
                metadata=metadata,
            )
        except BackendError as error:  # the simulated user's model failed
            return Trajectory(question=item.question, stop_reason=StopReason.ERROR, metadata={"error": str(error)})
        raw = trajectory.answer
        trajectory.answer = None if raw is None else extract_answer(raw, item.verifier)
        trajectory.metadata["raw_answer"] = raw
        return trajectory

    async def explore(self, entry: SourcedItem, *, seed: int) -> list[Trajectory]:
        """Every path of the item's action tree, each played once (:mod:`podium.runtime.explore`)."""
        if entry.item.verifier == "environment":
            raise DataError(f"item {entry.item.id}: tool-use episodes cannot be explored path by path")

        async def play(backend: ChatBackend) -> Trajectory:
            return await self.attempt(entry, temperature=0.0, seed=seed, orchestrator=backend)

        return await explore(play)

    def provenance(self, stage: str, entry: SourcedItem, *, temperature: float, seed: int, **extra: str) -> Provenance:
        return Provenance(
            stage=stage,
            source=entry.source,
            item_id=entry.item.id,
            model=self.model,
            solver=self.name,
            temperature=temperature,
            seed=seed,
            policy=self.run_config.policy,
            pool_hash=self.pool_hash,
            prices_hash=self.prices_hash,
            podium_version=podium_version(),
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


def sample_seed(base: int, item_id: str, sample: int) -> int:
    """A seed per (item, sample) that does not depend on Python's string hashing."""
    return (base * 1_000_003 + sum(ord(char) * 31**i for i, char in enumerate(item_id[:32])) + sample) % 2**31

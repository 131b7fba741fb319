"""Running many units (evaluation samples, data-stage units, GRPO rollouts) concurrently under a USD cap, each appended
to its log as it finishes, with a progress bar on stderr.

One unit is one async function call (an item's sample, an item's attempts, a failed trajectory's classification, a
synthesis step, a GRPO rollout), so units can be spread over machines later without changing what a unit does. Units
whose key the log already holds are skipped (resume). Spend counts every invocation of the run. When a unit's cost
is bounded in advance (an episode with a USD cap of its own, a generation of known length) it starts only if its
bound fits what is left, counting the bounds of the units in flight, so the cap is never crossed
(:class:`~podium.costs.ledger.RunCap`); a unit of unknown cost starts while the spend is below the cap.
"""

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable, Hashable, Sequence
from typing import Generic, Protocol, TypeVar

from pydantic import BaseModel
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    ProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from podium.core.progress import ProgressBar
from podium.costs.ledger import RunCap

T = TypeVar("T", bound=BaseModel)
U = TypeVar("U")


class UnitLog(Protocol[T]):
    """Where a run keeps its finished units: a :class:`~podium.solve.jsonl.JsonlLog` (resumable) or a
    :class:`MemoryLog`."""

    done: dict[Hashable, T]

    def __contains__(self, key: object) -> bool: ...

    def append(self, value: T) -> T: ...


class MemoryLog(Generic[T]):
    """Finished units kept in memory, for a run that is never resumed (a generation batch of GRPO rollouts)."""

    def __init__(self, key: Callable[[T], Hashable]) -> None:
        self.key = key
        self.done: dict[Hashable, T] = {}

    def __contains__(self, key: object) -> bool:
        return key in self.done

    def append(self, value: T) -> T:
        self.done[self.key(value)] = value
        return value


class BatchRunner:
    """The spend, concurrency and progress display of one invocation of a run (shared by its phases)."""

    def __init__(
        self, *, concurrency: int = 4, max_usd: float | None = None, progress: bool = True, spent: float = 0.0
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.concurrency = concurrency
        self.cap = RunCap(max_usd, spent)
        """The run's USD cap: spend so far (earlier invocations included) and the bounds of units in flight."""
        self.progress = progress
        self.started = time.perf_counter()

    @property
    def spent(self) -> float:
        """USD spent by the run so far, earlier invocations included."""
        return self.cap.spent

    @property
    def stopped_by_budget(self) -> bool:
        """Whether some unit was left unstarted because of the cap."""
        return self.cap.refused

    @property
    def wall_s(self) -> float:
        return time.perf_counter() - self.started

    def charge(self, usd: float) -> None:
        """Count spend that happened outside :meth:`run` (work resumed from an earlier invocation)."""
        self.cap.charge(usd)

    async def run(
        self,
        label: str,
        units: Sequence[U],
        key: Callable[[U], Hashable],
        work: Callable[[U], Awaitable[T]],
        log: UnitLog[T],
        *,
        cost: Callable[[T], float],
        bound: Callable[[U], float | None] = lambda _unit: None,
        correct: Callable[[T], bool] | None = None,
    ) -> list[T]:
        """Run every unit whose key ``log`` lacks, each costing at most ``bound(unit)`` (``None``: not known in
        advance), appending each value to ``log`` as it finishes; returns the values of all units (old and new)
        in unit order, less those the cap left unstarted. With ``correct`` the bar shows the accuracy so far."""
        queue = deque(unit for unit in units if key(unit) not in log)
        finished = [log.done[key(unit)] for unit in units if key(unit) in log]
        right = sum(map(correct, finished)) if correct else 0
        with self._bar(correct is not None) as bar:
            task = bar.add_task(
                label, total=len(units), completed=len(finished), usd=self.spent,
                accuracy=right / len(finished) if finished else 0.0,
            )  # fmt: skip

            async def worker() -> None:
                nonlocal right
                while queue:
                    unit = queue.popleft()
                    reserved = bound(unit)
                    if not await self.cap.acquire(reserved):  # its bound does not fit what the cap leaves
                        queue.appendleft(unit)
                        return
                    charged = 0.0
                    try:
                        value = await work(unit)
                        charged = cost(value)
                    finally:
                        await self.cap.release(reserved, charged)
                    finished.append(log.append(value))
                    right += bool(correct and correct(value))
                    bar.update(task, advance=1, usd=self.spent, accuracy=right / len(finished))

            workers = [asyncio.create_task(worker()) for _ in range(min(self.concurrency, len(queue)))]
            try:
                await asyncio.gather(*workers)
            finally:  # a bug in one unit stops the run: the others are cancelled before they write again
                for running in workers:
                    running.cancel()
        return [log.done[key(unit)] for unit in units if key(unit) in log]

    def _bar(self, accuracy: bool) -> ProgressBar:
        """Done/total, the accuracy so far (when units are graded), USD spent, elapsed time and ETA."""
        columns: list[str | ProgressColumn] = [
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
        ]
        if accuracy:
            columns.append(TextColumn("acc {task.fields[accuracy]:.3f}"))
        columns += [
            TextColumn("${task.fields[usd]:.4f}"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
        ]
        return ProgressBar(*columns, console=Console(stderr=True), disable=not self.progress)

"""Running a stage's units concurrently under a USD cap, with a progress bar, appending each to its work log.

One unit is one async function call (an item's samples, a failed trajectory's classification, a synthesis step),
so units can be spread over machines later without changing what a unit does. Units whose key the work log
already holds are skipped (resume). Spend counts every invocation of the stage. When a unit's cost is bounded in
advance (episodes with a USD cap of their own, generations of known length) a unit starts only if its bound fits
what is left, counting the bounds of units in flight, so the cap is never crossed (:class:`~podium.costs.ledger.
RunCap`, which evaluation uses too); a unit of unknown cost starts while the spend is below the cap.
"""

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from pydantic import BaseModel
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from podium.costs.ledger import RunCap
from podium.data.store import WorkLog

T = TypeVar("T", bound=BaseModel)
U = TypeVar("U")


class StageRunner:
    """The spend, concurrency and progress display of one stage invocation (shared by its phases)."""

    def __init__(
        self, *, concurrency: int = 4, max_usd: float | None = None, progress: bool = True, spent: float = 0.0
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.concurrency = concurrency
        self.cap = RunCap(max_usd, spent)
        """The stage's USD cap: spend so far (earlier invocations included) and the bounds of units in flight."""
        self.progress = progress
        self.started = time.perf_counter()

    @property
    def spent(self) -> float:
        """USD spent by the stage so far, earlier invocations included."""
        return self.cap.spent

    @property
    def stopped_by_budget(self) -> bool:
        """Whether some unit was left unstarted because of the cap."""
        return self.cap.refused

    def charge(self, usd: float) -> None:
        """Count spend that happened outside :meth:`run` (resumed work)."""
        self.cap.charge(usd)

    async def run(
        self,
        label: str,
        units: Sequence[U],
        key: Callable[[U], str],
        work: Callable[[U], Awaitable[T]],
        log: WorkLog[T],
        *,
        cost: Callable[[T], float],
        bound: float = 0.0,
    ) -> list[T]:
        """Run every unit whose key ``log`` lacks, each costing at most ``bound`` (0: not known in advance);
        returns the values of all units (old and new) in unit order, less those the cap left unstarted."""
        queue = deque(unit for unit in units if key(unit) not in log)
        reserved = bound or None
        with self._bar() as bar:
            task = bar.add_task(label, total=len(units), completed=len(units) - len(queue), usd=self.spent)

            async def worker() -> None:
                while queue:
                    unit = queue.popleft()
                    if not await self.cap.acquire(reserved):
                        queue.appendleft(unit)
                        return
                    charged = 0.0
                    try:
                        value = await work(unit)
                        log.append(value)
                        charged = cost(value)
                    finally:
                        await self.cap.release(reserved, charged)
                    bar.update(task, advance=1, usd=self.spent)

            workers = [asyncio.create_task(worker()) for _ in range(min(self.concurrency, len(queue)))]
            try:
                await asyncio.gather(*workers)
            finally:  # a bug in one unit stops the phase: the others are cancelled before they write again
                for running in workers:
                    running.cancel()
        return [log.done[key(unit)] for unit in units if key(unit) in log]

    def _bar(self) -> Progress:
        return Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("${task.fields[usd]:.4f}"),
            TimeElapsedColumn(),
            console=Console(stderr=True),
            disable=not self.progress,
        )

    @property
    def wall_s(self) -> float:
        return time.perf_counter() - self.started

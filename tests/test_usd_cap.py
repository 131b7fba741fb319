"""`--max-run-usd` is a hard cap: over random concurrent runs (costs, bounds, delays, concurrency, caps, resumes) the
spend of an evaluation or a data stage never crosses it, and a sample whose cost cannot be bounded is refused."""

import asyncio
import random
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from podium.core.answers import VerifierKind
from podium.core.calls import CallUsage
from podium.core.record import Record
from podium.core.trajectory import Trajectory, Turn
from podium.costs.ledger import RunCap
from podium.datasets.items import BenchmarkItem
from podium.datasets.loaders import get_benchmark, shared_data_dir
from podium.evaluate.runner import RESULTS_FILE, EvalError, read_results, run_eval
from podium.solve.jsonl import JsonlLog
from podium.solve.runner import BatchRunner

pytestmark = pytest.mark.skipif(not shared_data_dir().is_dir(), reason="shared benchmark data not present")
GSM8K = get_benchmark("gsm8k")


@dataclass
class RandomCostSystem:
    """Each attempt sleeps a little and costs a random share of its item's bound (all of it, sometimes)."""

    seed: int
    bounds: dict[str, float]
    name: str = "random-cost"

    def supports(self, verifier: VerifierKind) -> bool:
        return True

    def cost_bound(self, item: BenchmarkItem) -> float:
        return self.bounds[item.id]

    async def solve(self, item: BenchmarkItem) -> Trajectory:
        draw = random.Random(f"{self.seed}:{item.id}")
        await asyncio.sleep(draw.uniform(0, 0.002))
        usd = self.bounds[item.id] * draw.choice([0.0, draw.random(), 1.0])
        turn = Turn(index=0, output="\\boxed{0}", usage=CallUsage(usd=usd))
        return Trajectory(question=item.question, turns=[turn], answer="0")


costs = st.lists(st.floats(0.0, 0.05), min_size=1, max_size=12)


@settings(max_examples=25, deadline=None)
@given(
    bounds=costs,
    cap=st.floats(0.0, 0.2),
    concurrency=st.integers(1, 6),
    seed=st.integers(0, 10**6),
    first_limit=st.integers(1, 12),
)
def test_evaluation_spend_never_crosses_the_cap(bounds, cap, concurrency, seed, first_limit):
    items = GSM8K.items()[: len(bounds)]
    system = RandomCostSystem(seed, {item.id: bound for item, bound in zip(items, bounds, strict=False)})
    with tempfile.TemporaryDirectory() as out:
        for limit in (min(first_limit, len(bounds)), len(bounds)):  # a resumed run counts the earlier spend
            summary = asyncio.run(
                run_eval(
                    GSM8K, system, out=Path(out), limit=limit, concurrency=concurrency, max_run_usd=cap, progress=False
                )
            )
            assert summary.usd <= cap + 1e-12
            done = {record.item_id for record in read_results(Path(out) / RESULTS_FILE)[0]}
            left = [bound for item, bound in zip(items[:limit], bounds, strict=False) if item.id not in done]
            # Stopped early only when some sample's bound did not fit what the cap left (a cheaper sample queued
            # after it may have run meanwhile, so the samples left need not be the last ones).
            assert summary.stopped_by_budget == (summary.done < limit)
            assert not summary.stopped_by_budget or any(summary.usd + bound > cap for bound in left)


class Unit(Record):
    key: str
    usd: float


@settings(max_examples=25, deadline=None)
@given(costs=costs, bound=st.floats(0.001, 0.05), cap=st.floats(0.0, 0.2), concurrency=st.integers(1, 6))
def test_stage_spend_never_crosses_the_cap(costs, bound, cap, concurrency):
    async def work(index: int) -> Unit:
        await asyncio.sleep(random.uniform(0, 0.002))
        return Unit(key=str(index), usd=min(costs[index], bound))

    with tempfile.TemporaryDirectory() as out:
        runner = BatchRunner(concurrency=concurrency, max_usd=cap, progress=False)
        log = JsonlLog(Path(out) / "log.jsonl", Unit, lambda unit: unit.key)
        done = asyncio.run(
            runner.run("units", list(range(len(costs))), str, work, log, cost=lambda u: u.usd, bound=lambda _: bound)
        )
        assert runner.spent <= cap + 1e-12
        assert len(done) == len(costs) or runner.stopped_by_budget


def test_a_unit_that_does_not_fit_waits_for_those_in_flight_then_runs():
    async def scenario() -> tuple[bool, float]:
        cap = RunCap(max_usd=1.0)
        assert await cap.acquire(0.8)
        waiting = asyncio.create_task(cap.acquire(0.5))
        await asyncio.sleep(0)
        assert not waiting.done()  # 0.8 + 0.5 > 1: it waits for the unit in flight
        await cap.release(0.8, 0.3)  # which cost less than its bound
        return await waiting, cap.reserved

    assert asyncio.run(scenario()) == (True, 0.5)


def test_a_sample_without_a_cost_bound_is_refused_under_a_cap_before_anything_is_written(tmp_path):
    @dataclass
    class Unbounded:
        name: str = "unbounded"

        def supports(self, verifier: VerifierKind) -> bool:
            return True

        async def solve(self, item: BenchmarkItem) -> Trajectory:
            raise AssertionError("never started")

    out = tmp_path / "run"
    with pytest.raises(EvalError, match=r"hard cap.*give the system its own max_episode_usd"):
        asyncio.run(run_eval(GSM8K, Unbounded(), out=out, limit=2, max_run_usd=1.0, progress=False))
    assert not out.exists()

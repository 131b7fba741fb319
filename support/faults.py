"""Fault campaigns: episodes whose worker calls hit a server that answers each request with a random fault
(malformed, lying, stalling, failing), checked for what must hold whatever the server does. Used by
``tests/test_hardening_faults.py`` (small) and ``benchmarks/bench_faults.py`` (heavy)."""

import asyncio
import json
import time
from collections import Counter
from dataclasses import dataclass, field

from podium.core.calls import Status
from podium.core.trajectory import Trajectory, to_json_line
from podium.costs.prices import ModelPrice
from podium.pool.config import PoolConfig, WorkerConfig
from podium.pool.pool import build_pool
from podium.runtime import Executor, RunConfig
from support.runtime_fixtures import orchestrator
from support.servers import FaultServer

WORKER_PRICE = ModelPrice(input_per_mtok=50.0, output_per_mtok=150.0)
"""A reply reporting 10M tokens would cost $1,500 at these prices."""


@dataclass
class Campaign:
    """What a campaign saw, and every violation of what must hold."""

    episodes: int = 0
    calls: int = 0
    statuses: Counter[str] = field(default_factory=Counter)
    faults: Counter[str] = field(default_factory=Counter)
    violations: list[str] = field(default_factory=list)
    most_over_deadline_s: float = 0.0


def _round(index: int) -> str:
    prompts = [f"question {index}.{call}" for call in range(4)]
    calls = "".join(
        f"<tool_call>{json.dumps({'name': 'worker', 'arguments': {'prompt': p}})}</tool_call>" for p in prompts
    )
    return f"<reasoning>ask four times</reasoning>{calls}"


def _check(trajectory: Trajectory, cap: float, deadline_s: float, wall_s: float, campaign: Campaign) -> None:
    campaign.most_over_deadline_s = max(campaign.most_over_deadline_s, wall_s - deadline_s)
    if wall_s > deadline_s + 1.0:
        campaign.violations.append(f"episode ran {wall_s:.2f} s past a {deadline_s} s deadline")
    if trajectory.usage.usd > cap * (1 + 1e-12):
        campaign.violations.append(f"spent ${trajectory.usage.usd} against a ${cap} cap")
    if Trajectory.model_validate_json(to_json_line(trajectory)).id != trajectory.id:
        campaign.violations.append("the trajectory did not read back")
    for result in trajectory.results:
        campaign.calls += 1
        campaign.statuses[result.status.value] += 1
        if result.status is not Status.OK and not result.reason:
            campaign.violations.append(f"{result.status} without a reason")


async def _episode(url: str, index: int, cap: float, deadline_s: float, campaign: Campaign) -> None:
    worker = WorkerConfig(
        name="worker", backend="http", model="faulty", base_url=url, price=WORKER_PRICE, timeout_s=0.3,
        max_retries=1, max_tokens=32,
    )  # fmt: skip
    pool = build_pool(PoolConfig(workers=[worker], tools=[], roles=[]))
    script = orchestrator(_round(index), _round(index + 1), repeat_last=True)
    config = RunConfig(
        policy="parallel", max_turns=2, max_episode_usd=cap, max_seconds=deadline_s, summarize_on_stop=False
    )
    started = time.monotonic()
    try:
        trajectory = await Executor(pool, config, orchestrator=script).run(f"episode {index}")
    except Exception as error:  # what must never happen, counted rather than stopping the campaign
        campaign.violations.append(f"episode {index} raised {type(error).__name__}: {error}")
        return
    campaign.episodes += 1
    _check(trajectory, cap, deadline_s, time.monotonic() - started, campaign)


def run_campaign(seed: int, episodes: int, *, cap: float = 0.05, deadline_s: float = 3.0) -> Campaign:
    """``episodes`` parallel-policy episodes of two rounds of four worker calls each, against a server drawing a
    random fault per request from ``seed``."""
    server = FaultServer(["random"], seed=seed, slow_s=1.0, trickle_s=0.02)
    campaign = Campaign()
    with server.running() as url:
        for index in range(episodes):
            asyncio.run(_episode(url, index, cap, deadline_s, campaign))
    campaign.faults.update(server.served)
    return campaign

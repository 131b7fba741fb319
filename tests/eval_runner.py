"""``podium eval`` in a child process, with an ``oracle`` system kind for the kill-and-resume tests.

Run as ``python -m tests.eval_runner eval --benchmark … --system oracle.yaml --out DIR``. The oracle answers
a fixed two thirds of the items correctly after a short random delay and charges a fixed price per attempt, so
a run takes long enough to be killed mid-way and its outcome is known in advance.
"""

import asyncio
import random
import time
import zlib
from dataclasses import dataclass
from typing import Literal

import typer

from podium.cli.eval import eval_command, report_command
from podium.core.answers import VerifierKind
from podium.core.calls import CallUsage
from podium.core.trajectory import Trajectory, Turn
from podium.datasets.items import BenchmarkItem
from podium.evaluate.system_config import EvalSystemConfig, register_system


def oracle_knows(item_id: str) -> bool:
    """Whether the oracle answers ``item_id`` correctly (two items in three)."""
    return zlib.crc32(item_id.encode()) % 3 != 0


class OracleConfig(EvalSystemConfig):
    """The test oracle."""

    kind: Literal["oracle"] = "oracle"
    """Selects this system."""
    delay_s: float = 0.01
    """Longest random delay per attempt."""
    usd_per_attempt: float = 0.001
    """Price of one attempt."""


@dataclass
class OracleSystem:
    name: str
    delay_s: float
    usd_per_attempt: float

    def supports(self, verifier: VerifierKind) -> bool:
        return verifier == "math"

    def cost_bound(self, item: BenchmarkItem) -> float:
        return self.usd_per_attempt

    async def solve(self, item: BenchmarkItem) -> Trajectory:
        started = time.perf_counter()
        await asyncio.sleep(random.uniform(0, self.delay_s))
        answer = str(item.gold) if oracle_knows(item.id) else "-1"
        turn = Turn(index=0, output=f"\\boxed{{{answer}}}", usage=CallUsage(output_tokens=3, usd=self.usd_per_attempt))
        return Trajectory(question=item.question, turns=[turn], answer=answer, wall_s=time.perf_counter() - started)


register_system(
    "oracle", OracleConfig, lambda config: OracleSystem(config.name or "oracle", config.delay_s, config.usd_per_attempt)
)

app = typer.Typer()
app.command("eval")(eval_command)
app.command("report")(report_command)

if __name__ == "__main__":
    app()

"""Latency of one sandboxed `python` call vs a bare subprocess, measured in the same run.

    python benchmarks/bench_sandbox.py [--calls 50]

Target (issue 2): the isolated call's p50 at most 2x the bare call's.
"""

import argparse
import asyncio
import statistics
import subprocess
import sys
import time

from podium.core import Status, ToolCall
from podium.pool.builtin import basic_tools
from podium.sandbox import Sandbox


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def bare_call_seconds(calls: int) -> list[float]:
    samples = []
    for _ in range(calls):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "print(1)"], capture_output=True, check=True)
        samples.append(time.perf_counter() - started)
    return samples


async def sandbox_call_seconds(calls: int) -> list[float]:
    registry = basic_tools(Sandbox())
    samples = []
    for _ in range(calls):
        started = time.perf_counter()
        result = await registry.call(ToolCall(name="python", arguments={"code": "print(1)"}))
        samples.append(time.perf_counter() - started)
        assert result.status is Status.OK and result.observation.strip() == "1", result
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=50)
    calls = parser.parse_args().calls
    asyncio.run(sandbox_call_seconds(3))  # warm the page cache and the bubblewrap probe
    bare_call_seconds(3)
    bare = bare_call_seconds(calls)
    isolated = asyncio.run(sandbox_call_seconds(calls))
    print(f"{calls} calls of print(1)        p50 ms   p95 ms   mean ms")
    for label, samples in (("bare subprocess.run", bare), ("sandboxed python tool", isolated)):
        print(
            f"{label:<28}{percentile(samples, 0.5) * 1e3:8.1f} {percentile(samples, 0.95) * 1e3:8.1f}"
            f" {statistics.fmean(samples) * 1e3:9.1f}"
        )
    ratio50 = percentile(isolated, 0.5) / percentile(bare, 0.5)
    ratio95 = percentile(isolated, 0.95) / percentile(bare, 0.95)
    verdict = "meets" if ratio50 <= 2 else "misses"
    print(f"ratio sandbox/bare: p50 {ratio50:.2f}x, p95 {ratio95:.2f}x ({verdict} the 2x target at p50)")


if __name__ == "__main__":
    main()

"""Evaluation throughput on the same items, locally and on Ray (`podium eval --ray`), measured in the same run.

    python benchmarks/bench_ray.py [--items 16] [--concurrency 2] [--ray local] [--system SYSTEM.yaml]

The default system is a scripted orchestrator whose every turn runs a CPU-bound program in the python sandbox
(two turns per episode, no model), so the comparison is of CPU work spread over processes. On one machine Ray
cannot add cores: the figure shows its overhead; on a cluster (``--ray auto`` on a node of it) the replicas
spread over its CPUs. Reports items per second both ways, their ratio, and Ray's start-up (cluster and
replicas) separately.
"""

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path

from podium.datasets.loaders import get_benchmark
from podium.evaluate.ray_system import RaySystem
from podium.evaluate.runner import run_eval
from podium.evaluate.system_config import build_system, load_system_config, system_config_from_dict
from podium.runtime.cluster import connect, shutdown

PROGRAM = "print(sum(i * i for i in range(3_000_000)))"
CALL = json.dumps({"name": "python", "arguments": {"code": PROGRAM}})
SCRIPTED = {
    "kind": "orchestrator",
    "name": "cpu-bound-scripted",
    "max_turns": 2,
    "pool": {
        "workers": [{"name": "o", "backend": "scripted", "model": "o", "replies": [f"<tool_call>{CALL}</tool_call>"]}],
        "tools": ["python"],
        "workers_as_tools": False,
        "sandbox": {"cpu_time_s": 30, "wall_time_s": 60},
    },
}


def throughput(system: object, items: int, concurrency: int) -> float:
    """Items per second of one evaluation into a fresh directory."""
    with tempfile.TemporaryDirectory() as out:
        started = time.perf_counter()
        summary = asyncio.run(
            run_eval(get_benchmark("gsm8k"), system, out=out, limit=items, concurrency=concurrency, progress=False)  # type: ignore[arg-type]
        )
        elapsed = time.perf_counter() - started
    assert summary.done == items and summary.errors == 0, summary
    return items / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=16)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--ray", default="local", help="local, auto or a cluster address")
    parser.add_argument("--system", type=Path, help="a system file; default: the CPU-bound scripted orchestrator")
    arguments = parser.parse_args()
    config = load_system_config(arguments.system) if arguments.system else system_config_from_dict(SCRIPTED)
    local_system = build_system(config)
    throughput(local_system, 2, arguments.concurrency)  # warm-up: imports, sandbox, models
    local = throughput(local_system, arguments.items, arguments.concurrency)
    started = time.perf_counter()
    began = connect(arguments.ray)
    remote = RaySystem(local_system, config.model_dump(mode="json"), arguments.concurrency)
    startup = time.perf_counter() - started
    try:
        throughput(remote, 2, arguments.concurrency)  # warm-up of the replicas
        on_ray = throughput(remote, arguments.items, arguments.concurrency)
    finally:
        remote.stop()
        shutdown(began)
    print(f"local: {local:.3f} items/s; Ray ({len(remote.replicas.handles)} replicas): {on_ray:.3f} items/s")
    print(f"Ray/local throughput = {on_ray / local:.2f} ({arguments.items} items, concurrency {arguments.concurrency})")
    print(f"Ray start-up (cluster and replicas), not in the figures above: {startup:.1f} s")


if __name__ == "__main__":
    main()

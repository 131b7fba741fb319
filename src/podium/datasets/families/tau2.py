"""tau2-bench domains: each task is a conversation with a simulated user, judged by the environment."""

import json
from collections.abc import Iterator
from pathlib import Path

from podium.datasets.benchmark import Benchmark, LocalReader
from podium.datasets.items import BenchmarkItem

PREFIX = "tau2_"
"""``tau2_<domain>`` names the tau2-format domain ``<domain>`` under the data directory's ``tau2/`` folder."""


def _tau2_reader(domain_name: str) -> LocalReader:
    def read(directory: Path) -> Iterator[BenchmarkItem]:
        # The task file is read as JSON: listing items needs no tau2 package (running them does).
        tau2 = directory / "tau2"
        tasks = json.loads((tau2 / domain_name / "tasks.json").read_text(encoding="utf-8"))
        splits = json.loads((tau2 / domain_name / "split_tasks.json").read_text(encoding="utf-8"))
        split_of = {task_id: split for split in ("train", "test") for task_id in splits.get(split, [])}
        for task in tasks:
            instructions = task["user_scenario"]["instructions"]
            request = instructions.get("reason_for_call", "") if isinstance(instructions, dict) else instructions
            yield BenchmarkItem(
                id=f"{domain_name}-{task['id']}",
                question=str(request).strip(),
                gold=str(task["id"]),
                verifier="environment",
                metadata={
                    "domain": domain_name,
                    "task_id": str(task["id"]),
                    "split": split_of.get(task["id"], ""),
                    "tau2_dir": str(tau2),
                },
            )

    return read


def tau2_benchmark(domain: str, description: str | None = None) -> Benchmark:
    """The benchmark of the tau2-format domain ``domain`` (a shipped one, or one synthesized into the folder)."""
    return Benchmark(
        f"{PREFIX}{domain}", "environment", description or f"tau2-format domain {domain}", _tau2_reader(domain)
    )


BENCHMARKS = (
    tau2_benchmark("airline", "tau2-bench airline, 50 tasks"),
    tau2_benchmark("retail", "tau2-bench retail, 114 tasks"),
)

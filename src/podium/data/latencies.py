"""Measured latencies of the pool's tools, from ``podium eval`` runs: what the preference proposer is told."""

from collections import defaultdict
from pathlib import Path

from podium.data.eval_input import rows_from_eval


def measured_latencies(runs: list[Path] | list[str]) -> dict[str, float]:
    """Mean seconds per call of each tool over every call the runs made (calls that never ran left out)."""
    seconds: dict[str, list[float]] = defaultdict(list)
    for run in runs:
        for row in rows_from_eval(run, "preferences"):
            for result in row.trajectory.results:
                if result.executed:
                    seconds[result.call.name].append(result.usage.latency_s)
    return {name: sum(values) / len(values) for name, values in sorted(seconds.items())}

"""The orchestrator-output parsers on adversarial inputs: each input of ``--size`` characters (default 1 MB)
through every policy's parser and the observation escaper, timed.

    python benchmarks/bench_parsing.py [--size 1000000] [--repeat 3]

Target: every reader (each policy's parser, the observation escaper) takes < 100 ms on every input. Linear time
shows as the time at half the size being about half.
"""

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

# support/ (at the repository root) holds what this benchmark shares with the tests that run a small version of it.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from podium.policies import ActionParseError, DagPolicy, ParallelPolicy, Policy, SerialPolicy
from podium.policies.hermes import escape_protocol_tags
from support.adversarial import ADVERSARIAL, EARLIER, VIEW

TARGET_S = 0.1


def parsers() -> dict[str, Callable[[str], object]]:
    """Every reader an orchestrator output or a tool output goes through, by name."""

    def parsing(policy: Policy, previous: list) -> Callable[[str], object]:
        def parse(text: str) -> object:
            try:
                return policy.parse(text, VIEW, previous)
            except ActionParseError as error:
                return error

        return parse

    return {
        "serial": parsing(SerialPolicy(), []),
        "parallel": parsing(ParallelPolicy(), []),
        "dag": parsing(DagPolicy(), []),
        "dag_after_plan": parsing(DagPolicy(), EARLIER),
        "escape_observation": escape_protocol_tags,
    }


def timed(parse: Callable[[str], object], text: str, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        parse(text)
        best = min(best, time.perf_counter() - started)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    options = parser.parse_args()
    rows = []
    for name, make in ADVERSARIAL.items():
        full_text, half_text = make(options.size), make(options.size // 2)
        times = {reader: timed(parse, full_text, options.repeat) for reader, parse in parsers().items()}
        slowest = max(times, key=times.__getitem__)
        half = timed(parsers()[slowest], half_text, options.repeat)
        rows.append({"input": name, "slowest_reader": slowest, "seconds": round(times[slowest], 4)})
        verdict = "ok" if times[slowest] < TARGET_S else "SLOW"
        print(
            f"{name:26s} slowest {slowest:18s} {times[slowest] * 1000:7.1f} ms "
            f"(half size {half * 1000:6.1f} ms)  all readers {sum(times.values()) * 1000:7.1f} ms  {verdict}"
        )
    worst = max(rows, key=lambda row: row["seconds"])
    print(json.dumps({"size": options.size, "worst": worst, "all_under_target": worst["seconds"] < TARGET_S}))


if __name__ == "__main__":
    main()

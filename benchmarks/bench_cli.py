"""Start-up of the command line: `podium --help` and `podium tools list --help` against `python -c pass` (the
interpreter alone), interleaved in the same run so machine load hits both alike; and pytest's collection of the
whole suite.

    python benchmarks/bench_cli.py [--runs 7] [--collect]

Targets: `podium --help` under 1 s and within 8x `python -c pass` (the median of the runs); collection under 10 s.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HELP_SECONDS, HELP_RATIO, COLLECT_SECONDS = 1.0, 8.0, 10.0


def timed(command: list[str]) -> float:
    """Wall-clock seconds of one run of ``command`` (its output discarded); it must succeed."""
    started = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT, timeout=120)
    return time.perf_counter() - started


def startup(runs: int) -> dict[str, float]:
    """Median seconds of each command over ``runs`` interleaved rounds."""
    commands = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "podium --help": [sys.executable, "-m", "podium", "--help"],
        "podium tools list --help": [sys.executable, "-m", "podium", "tools", "list", "--help"],
    }
    times: dict[str, list[float]] = {name: [] for name in commands}
    for command in commands.values():  # warm the file cache once
        timed(command)
    for _ in range(runs):
        for name, command in commands.items():
            times[name].append(timed(command))
    return {name: statistics.median(values) for name, values in times.items()}


def collection() -> float:
    """Seconds pytest takes to collect the whole suite."""
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "pytest", "--co", "-q", "-p", "no:cacheprovider"],
        check=True, stdout=subprocess.DEVNULL, cwd=ROOT, env=env, timeout=600,
    )  # fmt: skip
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="Interleaved rounds of the start-up commands.")
    parser.add_argument("--collect", action="store_true", help="Also time pytest's collection of the suite.")
    args = parser.parse_args()
    medians = startup(args.runs)
    baseline = medians["python -c pass"]
    report = {
        "load_average_1min": os.getloadavg()[0],
        "median_seconds": {name: round(value, 3) for name, value in medians.items()},
        "help_ratio_to_python": round(medians["podium --help"] / baseline, 2),
    }
    ok = medians["podium --help"] < HELP_SECONDS and report["help_ratio_to_python"] < HELP_RATIO
    if args.collect:
        report["collect_seconds"] = round(collection(), 2)
        ok = ok and report["collect_seconds"] < COLLECT_SECONDS
    report["targets_met"] = ok
    print(json.dumps(report, indent=2))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()

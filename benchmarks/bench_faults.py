"""Fault injection at scale: episodes against servers that answer every request with a random fault
(malformed, lying, stalling, failing replies), and trickling servers against the per-call time limit.

    python benchmarks/bench_faults.py [--seeds 10] [--episodes 20]

Reports what was drawn and what held: exceptions that escaped, overspent caps, deadlines overrun by more than
1 s, trajectories that did not read back (all must be 0), and how long a trickled ``timeout_s: 1.5`` call lasted.
"""

import argparse
import asyncio
import json
import logging
import sys
import time
from collections import Counter
from pathlib import Path

# support/ (at the repository root) holds what this benchmark shares with the tests that run a small version of it.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from podium.backends.base import BackendError
from podium.backends.http import HttpBackend, HttpBackendConfig
from podium.core.messages import Message
from support.faults import run_campaign
from support.servers import FaultServer


def trickled_call_seconds(fault: str, retries: int) -> tuple[float, str]:
    """Wall time and outcome of one ``timeout_s: 1.5`` call to a server sending one byte every 50 ms."""
    server = FaultServer([fault], trickle_s=0.05)
    with server.running() as url:
        backend = HttpBackend(HttpBackendConfig(model="m", base_url=url, timeout_s=1.5, max_retries=retries))
        started = time.monotonic()
        try:
            asyncio.run(backend.generate([Message(role="user", content="hi")]))
            outcome = "OK"
        except BackendError as error:
            outcome = error.status.value
        return time.monotonic() - started, outcome


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--episodes", type=int, default=20)
    options = parser.parse_args()
    logging.getLogger("podium.backends.base").setLevel(logging.ERROR)  # lying replies are expected here
    statuses: Counter[str] = Counter()
    faults: Counter[str] = Counter()
    violations: list[str] = []
    episodes = calls = 0
    over_deadline = 0.0
    started = time.monotonic()
    for seed in range(options.seeds):
        campaign = run_campaign(seed, options.episodes)
        statuses.update(campaign.statuses)
        faults.update(campaign.faults)
        violations.extend(campaign.violations)
        episodes, calls = episodes + campaign.episodes, calls + campaign.calls
        over_deadline = max(over_deadline, campaign.most_over_deadline_s)
        print(
            f"seed {seed}: {campaign.episodes} episodes, {campaign.calls} calls, {len(campaign.violations)} violations"
        )
    trickles = {
        f"{fault}, {retries} retries": trickled_call_seconds(fault, retries)
        for fault in ("trickle", "trickle_headers")
        for retries in (0, 2)
    }
    for name, (seconds, outcome) in trickles.items():
        print(f"trickled call ({name}): {outcome} after {seconds:.2f} s")
    summary = {
        "episodes": episodes,
        "calls": calls,
        "kinds_of_fault": len(faults),
        "requests": sum(faults.values()),
        "statuses": dict(statuses),
        "violations": len(violations),
        "most_seconds_past_deadline": round(over_deadline, 3),
        "trickled_call_seconds": {name: round(seconds, 2) for name, (seconds, _) in trickles.items()},
        "wall_s": round(time.monotonic() - started, 1),
    }
    for violation in violations[:20]:
        print("VIOLATION:", violation)
    print(json.dumps(summary))


if __name__ == "__main__":
    main()

"""Every airline and retail task × every perturbation: Podium's tau2 reward against the official evaluator.

    python benchmarks/bench_tau2_crosscheck.py [--domain airline] [--limit N] [--json]

Each conversation (the gold actions, a read dropped, a write dropped, a write duplicated, wrong arguments, the
information only in a thought, only in tool arguments, a failing call, cut off before the end) is played through
Podium's runtime and scored by Podium, and scored by tau2's ``evaluate_simulation`` (EvaluationType.ALL); see
support/tau2_crosscheck.py. Prints agreement per domain and perturbation, and each disagreement. Target: 100 %.
About 2.5 s of CPU per airline conversation and 1.2 s per retail one (1,090 conversations, about half an hour on
an idle core): each side loads the domain's database three times per conversation. With ``--json``, one JSON
line per conversation.
"""

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from support.tau2_crosscheck import domain_facts, official_reward, official_tasks, podium_reward, scripts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--domain", action="append", choices=["airline", "retail"], help="Only this domain.")
    parser.add_argument("--limit", type=int, help="Only the first N tasks of each domain.")
    parser.add_argument("--json", action="store_true", help="One JSON line per conversation.")
    options = parser.parse_args()
    for domain in options.domain or ["airline", "retail"]:
        facts = domain_facts(domain)
        agree: Counter[str] = Counter()
        total: Counter[str] = Counter()
        started = time.perf_counter()
        tasks = official_tasks(domain)[: options.limit]
        for number, task in enumerate(tasks, 1):
            for script in scripts(task, facts):
                podium, official = podium_reward(domain, script), official_reward(domain, task, script)
                total[script.perturbation] += 1
                agree[script.perturbation] += podium == official
                row = {"domain": domain, "task_id": task.id, "perturbation": script.perturbation}
                if options.json:
                    print(json.dumps({**row, "podium": podium, "official": official}), flush=True)
                elif podium != official:
                    print(f"DISAGREE {row} podium={podium} official={official}", flush=True)
            elapsed = time.perf_counter() - started
            print(f"\r{domain}: {number}/{len(tasks)} tasks, {elapsed:.0f} s", end="", file=sys.stderr, flush=True)
        print(file=sys.stderr)
        summary = ", ".join(f"{name} {agree[name]}/{total[name]}" for name in total)
        print(
            f"{domain}: {sum(agree.values())}/{sum(total.values())} conversations agree "
            f"({time.perf_counter() - started:.0f} s) — {summary}",
            flush=True,
        )


if __name__ == "__main__":
    main()

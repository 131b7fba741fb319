"""Evaluate the committed orchestrator adapters and the routers on the test split; print one JSON line last.

Systems: always_weak, always_strong, oracle, random, knn, logreg (routers; their accuracy and USD are read at
the operating point nearest the GRPO orchestrator's strong-call share, their APGR/CPT over their whole
threshold sweep) and orchestrator_sft / orchestrator_grpo (one operating point each: APGR by mixing with the
single-model endpoints, see ``podium.evaluate.routing.metrics``). ``--prices FILE`` evaluates under another
price sheet (unseen prices): workers are repriced, routers' USD recomputed.
"""

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from orchestrator import claim_pool, executor, load_base, play, with_adapter

from podium.costs.prices import PriceCatalog
from podium.evaluate.report import write_routing_report
from podium.evaluate.routing.data import STRONG, WEAK, in_split, load_routing
from podium.evaluate.routing.metrics import Point, apgr, cpt
from podium.evaluate.routing.routers import LEARNED_ROUTERS, router_curves
from podium.retrieval.embedding import Embedder

CALLS: dict[str, float] = {}
"""System → worker calls per question (routers: 1)."""


def orchestrator_points(adapters: dict[str, Path | None], test: list, prices: PriceCatalog | None) -> dict[str, Point]:
    """One operating point per adapter, from executor episodes on ``test``."""
    _torch, base, tokenizer = load_base()
    points = {}
    for name, path in adapters.items():
        model = with_adapter(base, path, trainable=False)
        episodes = play(executor(claim_pool(prices), model, tokenizer, 0.0), test, label=name)
        points[name] = Point(
            strong_share=statistics.mean(e.strong_called for e in episodes),
            accuracy=statistics.mean(e.correct for e in episodes),
            usd_per_question=statistics.mean(e.usd for e in episodes),
        )
        CALLS[name] = statistics.mean(len(e.trajectory.results) for e in episodes)
        base = model.unload() if hasattr(model, "unload") else base
    return points


def nearest(points: list[Point], share: float) -> Point:
    """The point whose strong-call share is nearest ``share``."""
    return min(points, key=lambda point: abs(point.strong_share - share))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--adapters", type=Path, default=Path("experiments/claim/adapter"))
    parser.add_argument(
        "--stages", default="sft,grpo", help="orchestrators: base, sft, grpo (comma-separated; empty: routers only)"
    )
    parser.add_argument("--limit", type=int, default=None, help="first N test questions (default: all)")
    parser.add_argument("--prices", type=Path, default=None, help="price sheet merged over Podium's")
    parser.add_argument("--out", type=Path, default=None, help="also write results.json and routing.html here")
    args = parser.parse_args()
    started = time.perf_counter()
    prices = PriceCatalog.from_file(args.prices) if args.prices else None
    items = load_routing(prices=prices)
    train, test = in_split(items, "train"), in_split(items, "test")[: args.limit]
    print(f"embedding {len(train) + len(test)} questions with MiniLM…", file=sys.stderr, flush=True)
    embedder = Embedder()
    curves = router_curves(
        train, test, embedder.encode([i.question for i in train]), embedder.encode([i.question for i in test])
    )
    adapters: dict[str, Path | None] = {
        f"orchestrator_{stage}": None if stage == "base" else args.adapters / stage
        for stage in args.stages.split(",")
        if stage
    }
    single = orchestrator_points(adapters, test, prices)
    weak = statistics.mean(i.outcomes[WEAK].correct for i in test)
    strong = statistics.mean(i.outcomes[STRONG].correct for i in test)
    share = single["orchestrator_grpo"].strong_share if "orchestrator_grpo" in single else 0.5
    table: dict[str, dict[str, float]] = {"apgr": {}, "accuracy": {}, "usd_per_question": {}, "cpt50": {}, "cpt80": {}}
    for name, points in {**curves, **{k: [v] for k, v in single.items()}}.items():
        shown = nearest(points, share)
        table["apgr"][name] = round(apgr(points, weak, strong), 4)
        table["cpt50"][name] = round(cpt(points, weak, strong, 0.5), 4)
        table["cpt80"][name] = round(cpt(points, weak, strong, 0.8), 4)
        table["accuracy"][name] = round(shown.accuracy, 4)
        table["usd_per_question"][name] = round(shown.usd_per_question, 6)
    # a router makes one call; the cascade also calls the weak model first wherever it escalates
    table["calls_per_question"] = {
        name: CALLS.get(name, 1.0 + (nearest(curves[name], share).strong_share if name == "cascade" else 0.0))
        for name in table["apgr"]
    }
    result = {**table, "strong_share": {k: v.strong_share for k, v in single.items()}, "n_test": len(test)}
    result["learned_routers"] = list(LEARNED_ROUTERS)
    result["wall_s"] = round(time.perf_counter() - started)
    if args.out:
        systems = {**curves, **{name: [point] for name, point in single.items()}}
        write_routing_report(args.out, systems, table)
        (args.out / "results.json").write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result))


if __name__ == "__main__":
    main()

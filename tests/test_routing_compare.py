"""An evaluated route-policy orchestrator read as a router (its greedy point and its thresholded escalation curve),
and the comparison table of `podium routing compare`."""

from types import SimpleNamespace

import pytest

from podium.core.calls import Status, ToolCall, ToolResult
from podium.core.trajectory import Trajectory, Turn
from podium.costs.prices import ModelPrice, PriceCatalog
from podium.evaluate.routing.compare import compare
from podium.evaluate.routing.metrics import Point, Reference, apgr
from podium.evaluate.routing.orchestrators import (
    Episode,
    OrchestratorRun,
    Worker,
    episode,
    replay_worker,
    replay_workers,
)
from podium.evaluate.routing.routers import operating_point, oracle_routes, random_sweep
from podium.policies.escalate import ACCEPT, ROLE
from podium.routers.data import RoutedWorker, RoutingSet
from tests.test_routers import ITEMS  # weak/strong right: (T, T), (F, T), (F, F), (T, F); USD 0.001 / 0.01

WEAK, STRONG = "w", "s"

WORKERS = {
    WEAK: Worker("mixtral", WEAK, ModelPrice(input_per_mtok=1, output_per_mtok=0)),
    STRONG: Worker("gpt4", STRONG, ModelPrice(input_per_mtok=10, output_per_mtok=0)),
}
"""Replay workers at the prices of ITEMS: 1,000 question tokens each, $0.001 and $0.01."""


def run_with(
    scores: list[float | None],
    escalated: list[bool],
    first: str = WEAK,
    items: list = ITEMS,
    escalate_to: Worker = WORKERS[STRONG],
) -> OrchestratorRun:
    episodes = []
    for item, score, up in zip(items, scores, escalated, strict=True):
        asked = [WORKERS[first], escalate_to] if up and first == WEAK else [WORKERS[first]]
        usd = sum(worker.usd(item.outcomes[str(worker.recorded)]) for worker in asked)
        correct = item.outcomes[str(asked[-1].recorded)].correct
        episodes.append(Episode(item, asked, score, escalate_to, correct, usd))
    return OrchestratorRun("orchestrator", episodes, STRONG, [*WORKERS.values(), escalate_to])


def same(points: list[Point], others: list[Point]) -> bool:
    """Equal points, USD to rounding (summed in another order)."""
    return [(p.accuracy, p.shares, p.calls_per_question) for p in points] == [
        (p.accuracy, p.shares, p.calls_per_question) for p in others
    ] and [p.usd_per_question for p in points] == pytest.approx([p.usd_per_question for p in others])


def cascade_flags(items: list, scores: list[float]) -> list[Point]:
    """The points of a cascade over (w, s) escalating where its score is high: what the orchestrator's curve
    must equal when its escalation score is that score."""
    routes = [[("w", "s") if score >= threshold else ("w",) for score in scores]
              for threshold in sorted(set(scores), reverse=True)]  # fmt: skip
    return [operating_point(items, [("w",)] * len(items)), *(operating_point(items, r) for r in routes)]


def test_a_perfect_escalation_score_traces_the_oracle_cascade() -> None:
    scores = [0.1, 0.9, 0.5, 0.2]  # highest where the weak model fails and the strong one is right
    run = run_with(scores, [False, True, False, False])
    greedy = run.greedy()
    assert (greedy.share(STRONG), greedy.accuracy, greedy.calls_per_question) == (0.25, 0.75, 1.25)
    assert greedy.usd_per_question == pytest.approx((0.001 * 4 + 0.01) / 4)
    assert same(run.curve(), cascade_flags(ITEMS, scores))  # the sweep a cascade with that score traces
    best = operating_point(
        ITEMS, [("w", *route) if route != ("w",) else route for route in oracle_routes(ITEMS, ["w", "s"])]
    )
    assert any(same([best], [point]) for point in run.curve())


def test_questions_sent_to_the_strong_model_first_stay_strong_calls() -> None:
    run = run_with([0.9, 0.9, 0.9, 0.9], [False] * 4, first=STRONG, escalate_to=WORKERS[WEAK])
    assert run.scores() == [None] * 4  # the dearest worker first: nothing to escalate to
    assert {point.share(STRONG) for point in run.curve()} == {1.0}
    assert run.greedy().accuracy == 0.5


def test_the_table_compares_orchestrators_with_routers_at_the_orchestrators_share() -> None:
    items = [ITEMS[0], ITEMS[1], ITEMS[2], ITEMS[1]]  # weak right on 1 of 4, strong on 3
    run = run_with([0.1, 0.9, 0.5, 0.8], [False, True, False, False], items=items)
    routers = {
        "random": random_sweep(items, "w", "s", seed=3),
        "cascade": cascade_flags(items, [0.1, 0.9, 0.5, 0.8]),
    }
    comparison = compare(routers, [run], items, ["w", "s"])
    table = comparison.result()
    assert table["n_test"] == 4 and table["references"] == {"cheapest": "w", "best": "s", "weak": "w", "strong": "s"}
    weak, strong = Reference("w", 0.25, 0.001), Reference("s", 0.75, 0.01)
    assert (
        table["apgr"]["orchestrator"]
        == table["apgr"]["cascade"]
        == pytest.approx(apgr(run.curve(), weak, strong), abs=1e-4)
    )
    assert table["strong_share"]["orchestrator"] == 0.25 and table["strong_share"]["random"] == 0.25
    assert table["shares"]["orchestrator"] == {"w": 1.0, "s": 0.25}
    assert table["calls_per_question"]["orchestrator"] == 1.25 and table["calls_per_question"]["random"] == 1.0
    assert {"apgr", "cost_apgr", "cpt50", "cost_cpt80", "strong_share", "shares", "references"} <= set(table)


def test_the_curve_prices_an_escalation_at_the_chosen_workers_own_price() -> None:
    batch = Worker("gpt4_batch", STRONG, ModelPrice(input_per_mtok=5, output_per_mtok=0))  # GPT-4 at half price
    scores = [0.1, 0.9, 0.5, 0.2]
    at_list, at_half = run_with(scores, [False] * 4), run_with(scores, [False] * 4, escalate_to=batch)
    assert len(at_list.curve()) == len(at_half.curve()) == 5
    for listed, half in zip(at_list.curve(), at_half.curve(), strict=True):
        assert (half.share(STRONG), half.accuracy) == (listed.share(STRONG), listed.accuracy)
        assert half.usd_per_question == pytest.approx(listed.usd_per_question - listed.share(STRONG) * 0.005)
    assert at_half.curve()[-1].usd_per_question == pytest.approx(0.001 + 0.005)  # every question escalated


MIXTRAL, GPT4 = "mistralai/Mixtral-8x7B-Instruct-v0.1", "gpt-4-1106-preview"


def test_replay_workers_are_priced_as_the_run_priced_them(tmp_path) -> None:
    recording = str(tmp_path / "responses.csv")  # not read: pricing needs only the config
    pool = {
        "workers": [
            {"name": "mixtral", "backend": "replay", "model": MIXTRAL, "path": recording},
            {"name": "gpt4", "backend": "replay", "model": GPT4, "path": recording},
            {"name": "gpt4_batch", "backend": "replay", "model": GPT4, "path": recording,
             "price": {"input_per_mtok": 5, "output_per_mtok": 15}},
            {"name": "stranger", "backend": "replay", "model": "smollm2", "path": recording},
            {"name": "judge", "backend": "scripted", "model": "judge", "replies": ["accept"]},
        ]
    }  # fmt: skip
    catalog = PriceCatalog.default()
    recorded = RoutingSet([], {"mix": RoutedWorker("mix", MIXTRAL, catalog.model_price(MIXTRAL)),
                               "g": RoutedWorker("g", GPT4, catalog.model_price(GPT4))}, "math")  # fmt: skip
    with pytest.raises(Exception, match="smollm2"):  # a replay worker priced nowhere is refused, as a run refuses it
        replay_workers({"pool": pool}, tmp_path, recorded)
    pool["workers"][3]["price"] = {"input_per_mtok": 0, "output_per_mtok": 0}
    workers = replay_workers({"pool": pool}, tmp_path, recorded)
    assert set(workers) == {"mixtral", "gpt4", "gpt4_batch", "stranger"}
    assert (workers["gpt4_batch"].recorded, workers["mixtral"].recorded, workers["stranger"].recorded) == (
        "g",
        "mix",
        None,
    )
    listed = catalog.model_price(GPT4)
    assert (workers["gpt4"].price.input_per_mtok, workers["gpt4"].price.output_per_mtok) == (
        listed.input_per_mtok,
        listed.output_per_mtok,
    )
    assert (workers["gpt4_batch"].price.input_per_mtok, workers["gpt4_batch"].price.output_per_mtok) == (5, 15)
    sheet = PriceCatalog(models={GPT4: ModelPrice(input_per_mtok=1, output_per_mtok=2)})
    repriced = replay_workers(
        {"pool": pool}, tmp_path, recorded, sheet
    )  # a sheet given to the run beats the inline price
    assert {repriced[name].price.output_per_mtok for name in ("gpt4", "gpt4_batch")} == {2}
    assert repriced["mixtral"].price == workers["mixtral"].price


def test_a_run_that_names_no_replay_worker_of_its_pool_is_refused() -> None:
    with pytest.raises(ValueError, match="item 7: the orchestrator names 'gpt5', which is no replay worker"):
        replay_worker({worker.name: worker for worker in WORKERS.values()}, "gpt5", "7")


def test_a_blind_pools_labels_are_read_back_through_each_episodes_mapping() -> None:
    labels = {"mixtral": "Worker3", "gpt4": "Worker1", "gpt4_batch": "Worker2"}  # this episode's pseudonyms
    asked = ToolResult(call=ToolCall(name=ROLE, arguments={"model": "Worker3"}, id="ask_0"), status=Status.OK)
    turns = [
        Turn(index=0, output="Worker3", results=[asked]),
        Turn(index=1, output="accept", choice_probs={"Worker1": 0.1, "Worker2": 0.3, ACCEPT: 0.6}),
    ]
    trajectory = Trajectory(question="q0", turns=turns, metadata={"labels": labels})
    record = SimpleNamespace(item_id="0", trajectory=trajectory, verdict=SimpleNamespace(correct=True))
    batch = Worker("gpt4_batch", STRONG, ModelPrice(input_per_mtok=5, output_per_mtok=0))
    workers = {worker.name: worker for worker in (*WORKERS.values(), batch)}
    read = episode(record, ITEMS[0], workers)
    assert read.asked == [WORKERS[WEAK]] and read.escalate_to == batch
    assert read.escalation == pytest.approx(0.4)

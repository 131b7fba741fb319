"""An evaluated route-policy orchestrator read as a router (its greedy point and its thresholded escalation curve),
and the comparison table of `podium routing compare`."""

import pytest

from podium.evaluate.routing.compare import compare
from podium.evaluate.routing.data import STRONG, WEAK
from podium.evaluate.routing.metrics import Point, apgr
from podium.evaluate.routing.orchestrators import Episode, OrchestratorRun
from podium.evaluate.routing.routers import operating_point, oracle_flags, sweep
from tests.test_routers import ITEMS  # weak/strong right: (T, T), (F, T), (F, F), (T, F); USD 0.001 / 0.01


def run_with(
    scores: list[float | None], escalated: list[bool], first: str = WEAK, items: list = ITEMS
) -> OrchestratorRun:
    episodes = []
    for item, score, up in zip(items, scores, escalated, strict=True):
        asked = [first, STRONG] if up and first == WEAK else [first]
        final = asked[-1]
        usd = sum(item.outcomes[m].usd for m in asked)
        episodes.append(Episode(item, asked, score, STRONG, item.outcomes[final].correct, usd))
    return OrchestratorRun("orchestrator", episodes)


def test_a_perfect_escalation_score_traces_the_oracle_cascade() -> None:
    scores = [0.1, 0.9, 0.5, 0.2]  # highest where the weak model fails and the strong one is right
    run = run_with(scores, [False, True, False, False])
    assert run.greedy() == Point(
        strong_share=0.25, accuracy=0.75, usd_per_question=pytest.approx((0.001 * 4 + 0.01) / 4)
    )
    assert run.calls() == 1.25 and run.share(STRONG) == 0.25
    assert run.curve() == sweep(ITEMS, scores, cascade=True)  # the same sweep the cascade routers trace
    best = operating_point(ITEMS, oracle_flags(ITEMS), cascade=True)
    assert best in run.curve()


def test_questions_sent_to_the_strong_model_first_stay_strong_calls() -> None:
    run = run_with([None] * 4, [False] * 4, first=STRONG)
    assert {point.strong_share for point in run.curve()} == {1.0}
    assert run.greedy().accuracy == 0.5


def test_the_table_compares_orchestrators_with_routers_at_the_orchestrators_share() -> None:
    items = [ITEMS[0], ITEMS[1], ITEMS[2], ITEMS[1]]  # weak right on 1 of 4, strong on 3
    run = run_with([0.1, 0.9, 0.5, 0.8], [False, True, False, False], items=items)
    routers = {
        "random": sweep(items, [0.4, 0.3, 0.2, 0.1]),
        "cascade": sweep(items, [0.1, 0.9, 0.5, 0.8], cascade=True),
    }
    comparison = compare(routers, [run], items)
    table = comparison.result()
    assert table["n_test"] == 4
    assert (
        table["apgr"]["orchestrator"]
        == table["apgr"]["cascade"]
        == pytest.approx(apgr(run.curve(), 0.25, 0.75), abs=1e-4)
    )
    assert table["strong_share"]["orchestrator"] == 0.25 and table["strong_share"]["random"] == 0.25
    assert table["calls_per_question"]["orchestrator"] == 1.25 and table["calls_per_question"]["random"] == 1.0
    assert set(table) == {"apgr", "accuracy", "usd_per_question", "cpt50", "cpt80", "strong_share",
                          "calls_per_question", "n_test"}  # fmt: skip

"""Metric arithmetic on hand-worked cases."""

import math

import pytest

from podium.core.calls import Status
from podium.core.preference import Preference
from podium.evaluate.metrics import (
    call_status_counts,
    latency_mean,
    latency_p95,
    mean_at_k,
    pareto_front,
    pass_at_1,
    pass_at_2,
    pass_at_k,
    percentile,
    preference_score,
    run_metrics,
    tokens_per_query,
    tool_call_distribution,
    usd_per_query,
)

from .eval_fixtures import record, tool_result


@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [(4, 1, 2, 0.5), (5, 2, 2, 0.7), (2, 0, 2, 0.0), (3, 2, 2, 1.0), (4, 4, 1, 1.0), (8, 3, 1, 3 / 8)],
)
def test_pass_at_k_is_one_minus_the_chance_that_every_draw_is_wrong(n, c, k, expected):
    assert pass_at_k(n, c, k) == pytest.approx(expected)


def test_pass_at_k_rejects_impossible_counts():
    with pytest.raises(ValueError):
        pass_at_k(2, 3, 1)
    with pytest.raises(ValueError):
        pass_at_k(1, 0, 2)


def _two_items_four_samples():
    # item a: right on sample 0 only (c = 1); item b: wrong first, then right twice (c = 2).
    outcomes = {"a": [True, False, False, False], "b": [False, True, True, False]}
    return [record(item, s, correct=ok) for item, row in outcomes.items() for s, ok in enumerate(row)]


def test_pass_at_1_uses_each_items_first_sample():
    records = _two_items_four_samples()
    assert pass_at_1(list(reversed(records))) == pytest.approx(0.5)


def test_mean_at_k_averages_every_sample_per_item():
    assert mean_at_k(_two_items_four_samples()) == pytest.approx((1 / 4 + 2 / 4) / 2)


def test_pass_at_2_is_the_unbiased_estimator_averaged_over_items():
    # a: 1 - C(3,2)/C(4,2) = 1/2; b: 1 - C(2,2)/C(4,2) = 5/6.
    assert pass_at_2(_two_items_four_samples()) == pytest.approx((1 / 2 + 5 / 6) / 2)


def test_pass_at_2_needs_two_samples_of_every_item():
    assert pass_at_2([record("a", 0), record("a", 1), record("b", 0)]) is None
    assert pass_at_2([]) is None


def test_cost_tokens_and_latency_per_query():
    records = [
        record("a", usd=0.10, tokens=100, wall_s=1.0),
        record("b", usd=0.30, tokens=300, wall_s=2.0, calls=[tool_result("search", usd=0.2)]),
        record("c", usd=0.0, tokens=0, wall_s=3.0),
        record("d", usd=0.0, tokens=200, wall_s=4.0),
    ]
    assert usd_per_query(records) == pytest.approx((0.10 + 0.50 + 0.0 + 0.0) / 4)
    assert tokens_per_query(records) == pytest.approx(150.0)
    assert latency_mean(records) == pytest.approx(2.5)
    # p95 of [1, 2, 3, 4]: position 0.95 * 3 = 2.85 → 3 + 0.85 * (4 - 3).
    assert latency_p95(records) == pytest.approx(3.85)


def test_percentile_edges():
    assert percentile([], 95) == 0.0
    assert percentile([7.0], 95) == 7.0
    assert percentile([5.0, 1.0, 3.0], 50) == 3.0
    assert percentile([1.0, 2.0], 100) == 2.0


def test_tool_call_distribution_and_statuses():
    records = [
        record("a", calls=[tool_result("search"), tool_result("python", Status.EXEC_ERR), tool_result("search")]),
        record("b", calls=[tool_result("search", Status.TIMEOUT)]),
        record("c"),
    ]
    assert tool_call_distribution(records) == {"search": 3, "python": 1}
    assert list(tool_call_distribution(records)) == ["search", "python"]
    assert call_status_counts(records) == {"OK": 2, "EXEC_ERR": 1, "TIMEOUT": 1}


def test_preference_score_normalises_each_attempt_against_the_baselines_attempt():
    preference = Preference(weights={"search": 0.5, "outcome": 1.0, "compute": 1.0, "latency": 1.0})
    two_searches = [tool_result("search"), tool_result("search")]
    current = [
        record("a", usd=2.0, wall_s=4.0, calls=two_searches),
        record("b", correct=False, usd=1.0),
        record("c"),  # the baseline never ran c
    ]
    baseline = [record("a", usd=4.0, wall_s=2.0, calls=[tool_result("search")]), record("b", usd=1.0)]
    score = preference_score(current, baseline, ["search"], preference)
    # a: search 2 / max(1, 1) = 2; outcome 1; compute 4 / max(1, 2) = 2; latency 2 / max(1, 4) = 0.5.
    assert score.score == pytest.approx(0.5 * 2 + 1 + 2 + 0.5)
    assert (score.matched, score.unmatched) == (2, 1)


def test_pareto_front_keeps_undominated_points_ordered_by_cost():
    points = [(1.0, 0.5), (2.0, 0.7), (3.0, 0.6), (0.5, 0.2), (2.0, 0.7)]
    assert pareto_front(points) == [3, 0, 1, 4]
    assert pareto_front([]) == []


def test_run_metrics_counts_errors_and_unverified_attempts():
    records = [record("a"), record("b", correct=False, error="BackendError: down")]
    metrics = run_metrics(records)
    assert (metrics.items, metrics.queries, metrics.errors, metrics.unverified) == (2, 2, 1, 0)
    assert metrics.pass_at_1 == 0.5 and metrics.pass_at_2 is None
    assert math.isclose(metrics.mean_at_k, 0.5)

"""The bootstrap of `podium routing compare`: a resample's metrics against hand-computed ones and against the
metrics traced afresh on the resampled tasks themselves; a paired interval of a system with itself is exactly 0, and
fewer tasks give wider intervals."""

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from podium.cli import app
from podium.evaluate.routing.bootstrap import CurveTasks, References, bootstrap, resample_weights, resampled_metrics
from podium.evaluate.routing.compare import compare, references
from podium.evaluate.routing.metrics import apgr, cost_apgr, cost_cpt, cpt
from tests.test_routers import ITEMS, item  # weak/strong right: (T, T), (F, T), (F, F), (T, F); USD 0.001 / 0.01
from tests.test_routing_compare import cascade_flags, run_with

ROLES = {"weak": "w", "strong": "s", "cheapest": "w", "best": "s"}


def tasks(count: int, seed: int = 0) -> tuple[list, list[float]]:
    """``count`` tasks on which the weak worker is right 60 % of the time and the strong one 85 %, and an
    escalation score that is higher, on average, where the weak one is wrong."""
    rng = np.random.default_rng(seed)
    weak, strong = rng.random(count) < 0.6, rng.random(count) < 0.85
    scores = np.clip(rng.normal(np.where(weak, 0.35, 0.6), 0.2), 0.0, 1.0)
    return [item(n, w=bool(w), s=bool(s)) for n, (w, s) in enumerate(zip(weak, strong, strict=True))], list(scores)


def test_a_resample_is_a_weighted_mean_hand_computed() -> None:
    # task 0 once, task 1 twice, task 2 once, task 3 never: weak right on 1 of 4 draws, strong on 3 of 4
    curve = CurveTasks.of(cascade_flags(ITEMS, [0.1, 0.9, 0.5, 0.2]), "s")
    weights = np.array([[1, 2, 1, 0], [1, 1, 1, 1]]) / 4
    metrics = resampled_metrics(curve, References.of(ITEMS, ROLES), weights)
    # points (share, PGR): none (0, 0); task 1 escalated (0.5, 1); tasks 1, 2 (0.75, 1); 1, 2, 3 the same; all (1, 1)
    assert metrics["apgr"][0] == pytest.approx(0.5 * 1 / 2 + 0.25 + 0.25)
    assert (metrics["cpt50"][0], metrics["cpt80"][0]) == (pytest.approx(0.25), pytest.approx(0.4))
    # spend: the weak worker 0.001, the strong 0.01 a task; task 1 escalated spends (0.001 · 4 + 0.01 · 2) / 4
    first = (0.001 + 0.01 * 2 / 4 - 0.001) / (0.01 - 0.001)
    assert metrics["cost_cpt50"][0] == pytest.approx(first / 2)
    assert np.isnan(metrics["apgr"][1])  # all four tasks: both workers right on half, no gap to recover


def test_each_resample_has_the_metrics_traced_on_its_own_tasks() -> None:
    items, scores = tasks(60)
    run = run_with(scores, [score > 0.5 for score in scores], items=items)
    curves = {"cascade": cascade_flags(items, scores), "orchestrator": run.curve()}
    weights = resample_weights(len(items), 12, seed=3)
    for name, points in curves.items():
        metrics = resampled_metrics(CurveTasks.of(points, "s"), References.of(items, ROLES), weights)
        for row, counts in enumerate(np.rint(weights * len(items)).astype(int)):
            drawn = [index for index, times in enumerate(counts) for _ in range(times)]
            again = [items[index] for index in drawn]
            refs = references(again, ["w", "s"])
            traced = (
                cascade_flags(again, [scores[index] for index in drawn])
                if name == "cascade"
                else run_with([scores[i] for i in drawn], [scores[i] > 0.5 for i in drawn], items=again).curve()
            )
            weak, strong = refs["weak"], refs["strong"]
            assert metrics["apgr"][row] == pytest.approx(apgr(traced, weak, strong), abs=1e-12)
            assert metrics["cpt80"][row] == pytest.approx(cpt(traced, weak, strong, 0.8), abs=1e-12)
            assert metrics["cost_apgr"][row] == pytest.approx(cost_apgr(traced, weak, strong), abs=1e-12)
            assert metrics["cost_cpt50"][row] == pytest.approx(cost_cpt(traced, weak, strong, 0.5), abs=1e-12)


def test_a_system_against_itself_differs_by_exactly_zero() -> None:
    items, scores = tasks(80)
    points = cascade_flags(items, scores)
    table = compare({"a": points, "b": points}, [], items, ["w", "s"]).table
    result = bootstrap({"a": points, "b": points}, items, ROLES, table, resamples=200, seed=0, pair=("a", "b"))
    assert result.paired is not None and set(result.paired) == {"apgr", "cpt50", "cpt80", "cost_apgr",
                                                                 "cost_cpt50", "cost_cpt80"}  # fmt: skip
    for paired in result.paired.values():
        assert (paired.difference, paired.low, paired.high, paired.ahead) == (0.0, 0.0, 0.0, 0.0)
    low, high = result.intervals["apgr"]["a"]
    assert low < table["apgr"]["a"] < high  # type: ignore[operator]


def test_fewer_tasks_give_wider_intervals_and_a_seed_repeats_them() -> None:
    items, scores = tasks(600)

    def width(count: int, seed: int = 0) -> float:
        points = {"cascade": cascade_flags(items[:count], scores[:count])}
        table = compare(points, [], items[:count], ["w", "s"]).table
        low, high = bootstrap(points, items[:count], ROLES, table, resamples=300, seed=seed).intervals["apgr"][
            "cascade"
        ]
        return high - low

    assert width(60) > 2 * width(600)  # about √10 wider
    assert width(60, seed=1) == width(60, seed=1) != width(60, seed=2)


def test_a_better_score_is_ahead_of_a_worse_one_in_most_resamples() -> None:
    items, scores = tasks(300)
    perfect = [0.0 if entry.outcomes["w"].correct else 1.0 for entry in items]
    curves = {"orchestrator": cascade_flags(items, perfect), "router": cascade_flags(items, scores)}
    table = compare(curves, [], items, ["w", "s"]).table
    result = bootstrap(curves, items, ROLES, table, resamples=200, seed=0, pair=("orchestrator", "router"))
    assert result.paired is not None
    apgr_difference, cpt_difference = result.paired["apgr"], result.paired["cpt80"]
    assert apgr_difference.difference > 0 and apgr_difference.low > 0 and apgr_difference.ahead == 1.0
    assert cpt_difference.difference < 0 and cpt_difference.high < 0 and cpt_difference.ahead == 1.0


def test_routing_compare_prints_every_curves_interval(tmp_path) -> None:
    from tests.test_recording import small_recording

    recording = small_recording(tmp_path / "recording", count=120)
    command = ["routing", "compare", "--recording", str(recording), "--routers", "cascade", "--json"]
    result = CliRunner().invoke(app, [*command, "--bootstrap", "50", "--seed", "4"])
    assert result.exit_code == 0, result.output
    table = json.loads(result.output.strip().splitlines()[-1])
    intervals = table["bootstrap"]["intervals"]
    assert table["bootstrap"]["resamples"] == 50 and set(intervals["cost_apgr"]) == set(table["cost_apgr"])
    for system, (low, high) in intervals["apgr"].items():
        assert low <= table["apgr"][system] <= high
    result = CliRunner().invoke(app, [*command, "--bootstrap", "0"])
    assert result.exit_code == 0 and "bootstrap" not in json.loads(result.output.strip().splitlines()[-1])


def test_a_metric_undefined_on_the_whole_split_has_no_interval() -> None:
    points = {"cascade": cascade_flags(ITEMS, [0.1, 0.9, 0.5, 0.2])}
    table = compare(points, [], ITEMS, ["w", "s"]).table  # both workers right on half of the four: no gap
    assert table["apgr"]["cascade"] is None
    assert bootstrap(points, ITEMS, ROLES, table, resamples=50, seed=0).intervals == {}


def test_a_gap_closed_but_for_float_rounding_leaves_the_resample_undefined() -> None:
    # drawn 1, 2, 3 and 4 times of 10: the strong worker right on 0.1 + 0.2, the weak one on 0.3, equal but for
    # rounding (0.30000000000000004); dividing by that gap of 6e-17 gave an APGR of 1e15
    items = [item(0, w=False, s=True), item(1, w=False, s=True), item(2, w=True, s=False), item(3, w=False, s=False)]
    weights = np.array([[1, 2, 3, 4]]) / 10
    metrics = resampled_metrics(CurveTasks.of(cascade_flags(items, [0.9, 0.8, 0.1, 0.2]), "s"),
                                References.of(items, ROLES), weights)  # fmt: skip
    assert all(np.isnan(metrics[metric][0]) for metric in ("apgr", "cpt50", "cpt80", "cost_apgr"))

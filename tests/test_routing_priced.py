"""The price sheet's operating point: the break-even escalation probability under the cost_penalty reward against
hand-computed values, and the ``_priced`` rows it places in the comparison table and in `podium routing compare`."""

import numpy as np
import pytest
from typer.testing import CliRunner

from podium.cli import app
from podium.costs.prices import ModelPrice
from podium.evaluate.routing.compare import compare
from podium.evaluate.routing.orchestrators import Worker
from podium.evaluate.routing.priced import (
    CostPenalty,
    Line,
    calibrated,
    escalation_edges,
    fit_calibration,
    orchestrator_point,
    pair_edge,
    priced_choice,
    router_points,
    worker_edges,
)
from podium.evaluate.routing.routers import random_sweep
from podium.routers.data import Outcome, RoutingItem
from podium.routers.models import CascadeRouter
from tests.test_routers import ITEMS, item  # weak/strong right: (T, T), (F, T), (F, F), (T, F); USD 0.001 / 0.01
from tests.test_routing_compare import STRONG, WEAK, WORKERS, cascade_flags, run_with


def breakeven(train: list[RoutingItem], reward: CostPenalty) -> float:
    return pair_edge(train, WEAK, STRONG, reward)


def priced(items: list, strong_usd: float) -> list:
    """``items`` with the strong model's USD per question set to ``strong_usd``."""
    strong = {entry.item.id: Outcome(entry.outcomes[STRONG].correct, strong_usd, "", (1000, 0)) for entry in items}
    return [RoutingItem(entry.item, {WEAK: entry.outcomes[WEAK], STRONG: strong[entry.item.id]}) for entry in items]


def test_the_breakeven_probability_matches_the_hand_computed_one() -> None:
    # c_w 0.001, c_s 0.01, scale 0.05: L = 1 − 0.02 = 0.98, K = 1 − 0.22 = 0.78; the strong model is right on half of
    # the questions the weak one gets right (a_r) and on half it gets wrong (a_w): p* = (0.98 − 0.5·0.78) / 0.98
    assert breakeven(ITEMS, CostPenalty(1.0, 0.05)) == pytest.approx((0.98 - 0.39) / 0.98)


def test_at_the_breakeven_probability_accepting_and_escalating_are_worth_the_same() -> None:
    train = [*ITEMS, item(4, w=False, s=True)]  # a_r 1/2, a_w 2/3: the strong model helps more where the weak one fails
    reward = CostPenalty(2.0, 0.1)
    p = breakeven(train, reward)
    accept = (1 - p) * (1 - 2.0 * 0.001 / 0.1)
    escalate = (1 / 2 + p * (2 / 3 - 1 / 2)) * (1 - 2.0 * 0.011 / 0.1)
    assert 0 < p < 1 and accept == pytest.approx(escalate)


def test_a_dearer_strong_model_raises_the_breakeven_probability_until_it_never_pays() -> None:
    reward = CostPenalty(1.0, 0.05)
    points = [breakeven(priced(ITEMS, usd), reward) for usd in (0.002, 0.005, 0.01, 0.02, 0.04)]
    assert points == sorted(points) and len(set(points)) == len(points)
    assert breakeven(priced(ITEMS, 0.06), reward) == 1.0  # K = 1 − 0.061/0.05 < 0: its cost outweighs a right answer


def test_a_breakeven_probability_needs_train_outcomes_of_both_kinds() -> None:
    with pytest.raises(ValueError, match="none"):
        breakeven([], CostPenalty(1.0, 0.05))
    assert priced_choice({"a": 0.2, "b": 0.6}, 0.5) == "a" and priced_choice({"a": 0.2, "b": 0.6}, 0.2) is None
    with pytest.raises(ValueError, match="right and wrong"):
        breakeven([ITEMS[0], ITEMS[3]], CostPenalty(1.0, 0.05))
    with pytest.raises(ValueError, match="outweighs a correct answer"):
        breakeven(ITEMS, CostPenalty(1.0, 0.001))


def test_escalation_edges_are_where_each_choice_becomes_the_best_hand_computed() -> None:
    accept, cheap, strong = Line("accept", 1.0, -1.0), Line("a", 0.5, 0.3), Line("b", 0.2, 0.75)
    never = Line("c", 0.1, 0.1)  # below a everywhere
    # 1 − p = 0.5 + 0.3 p at p = 0.5 / 1.3; 0.5 + 0.3 p = 0.2 + 0.75 p at p = 0.3 / 0.45
    edges = escalation_edges([accept, cheap, strong, never])
    assert list(edges) == ["a", "b"] and edges == pytest.approx({"a": 0.5 / 1.3, "b": 0.3 / 0.45})
    assert escalation_edges([accept, Line("d", 1.2, 0.0)]) == {"d": 0.0}  # pays more everywhere
    assert escalation_edges([accept, Line("e", -0.1, 0.05)]) == {}  # costs more than it can recover


def test_per_worker_edges_send_every_escalation_to_the_cheaper_copy_of_the_strong_model() -> None:
    reward = CostPenalty(1.0, 0.05)
    weak, strong = Worker("w", WEAK, price(1.0)), Worker("s", STRONG, price(10.0))  # $0.001, $0.01 a question
    half, double = Worker("b", STRONG, price(5.0)), Worker("b", STRONG, price(20.0))
    assert worker_edges(ITEMS, weak, [strong, half], reward) == pytest.approx(
        {"b": breakeven(priced(ITEMS, 0.005), reward)}
    )
    assert worker_edges(ITEMS, weak, [strong, double], reward) == {"s": breakeven(ITEMS, reward)}


def price(input_per_mtok: float) -> ModelPrice:
    return ModelPrice(input_per_mtok=input_per_mtok, output_per_mtok=0.0)


class FixedCascade(CascadeRouter):
    """A cascade over (w, s) whose probabilities of a wrong reply are given, by the reply's text."""

    def wrong(self, level: int, replies: list[str]) -> np.ndarray:
        return np.array([self.params["wrong"][reply] for reply in replies])


def test_priced_rows_call_the_strong_model_above_the_breakeven_probability_on_each_curve() -> None:
    run = run_with([0.1, 0.9, 0.5, 0.7], [False, False, False, False])  # greedy: never escalates
    items = [RoutingItem(entry.item, {name: Outcome(o.correct, o.usd, f"{entry.item.id}", o.tokens)
                                      for name, o in entry.outcomes.items()}) for entry in ITEMS]  # fmt: skip
    cascade = FixedCascade(
        ["w", "s"], np.array([0.001, 0.01]), "math", {}, {"wrong": {"0": 0.2, "1": 0.8, "2": 0.4, "3": 0.3}}
    )
    routers = {"random": random_sweep(items, "w", "s"), "cascade": cascade_flags(items, [0.2, 0.8, 0.4, 0.3])}
    reward = CostPenalty(1.0, 0.05)  # a break-even of (0.98 − 0.39) / 0.98 = 0.602
    points = router_points(items, items, {"cascade": cascade}, None, reward)
    points["orchestrator"] = orchestrator_point(run, items, list(WORKERS.values()), reward)
    comparison = compare(routers, [run], items, ["w", "s"], points, breakeven(items, reward))
    table = comparison.result()
    # above 0.602: questions 1 (strong right, weak wrong) and 3 (strong wrong, weak right)
    assert table["strong_share"]["orchestrator_priced"] == 0.5 and table["strong_share"]["orchestrator"] == 0.0
    assert table["accuracy"]["orchestrator_priced"] == 0.5 and table["calls_per_question"]["orchestrator_priced"] == 1.5
    assert table["usd_per_question"]["orchestrator_priced"] == pytest.approx((4 * 0.001 + 2 * 0.01) / 4)
    assert table["apgr"]["orchestrator_priced"] == table["apgr"]["orchestrator"]  # the same curve
    # the cascade's score passes 0.6 on question 1 only: the oracle's call, after the weak model on every question
    assert table["strong_share"]["cascade_priced"] == 0.25 and table["accuracy"]["cascade_priced"] == 0.75
    assert table["calls_per_question"]["cascade_priced"] == 1.25
    assert table["breakeven"] == pytest.approx(0.5 / 0.98 + 0.09 / 0.98, abs=1e-4)
    assert comparison.systems()[-2:] == ["cascade_priced", "orchestrator_priced"]
    assert set(comparison.curves) == {"random", "cascade", "orchestrator"}
    assert "breakeven" not in compare(routers, [run], items, ["w", "s"]).result()


def test_calibration_keeps_the_order_and_matches_the_observed_error_rate() -> None:
    items = ITEMS * 3  # the weak model wrong on items 1 and 2 of each four
    scores = [0.3, 0.6, 0.5, 0.2, 0.35, 0.4, 0.7, 0.1, 0.25, 0.65, 0.3, 0.45]
    run = run_with(scores, [False] * 12, items=items)
    calibration = fit_calibration(run)
    assert calibration.slope > 0
    # the bias is not regularised, so at the fit the calibrated probabilities add up to the errors observed
    assert sum(calibration(score) for score in scores) == pytest.approx(6, abs=1e-6)
    mapped = calibrated(run, calibration)
    assert [episode.escalation for episode in mapped.episodes] == [calibration(score) for score in scores]
    assert [(p.shares, p.accuracy) for p in mapped.curve()] == [(p.shares, p.accuracy) for p in run.curve()]


def test_a_score_that_does_not_rise_with_the_errors_or_sees_one_kind_cannot_be_calibrated() -> None:
    with pytest.raises(ValueError, match="does not rise"):
        fit_calibration(run_with([0.9, 0.1, 0.2, 0.8], [False] * 4))
    with pytest.raises(ValueError, match="0 followed a wrong one"):
        fit_calibration(run_with([0.9, 0.1], [False] * 2, items=[ITEMS[0], ITEMS[3]]))


def compare_command(recording, *arguments: str) -> str:
    """`podium routing compare ARGUMENTS` on two test tasks of ``recording``, which must fail; its output."""
    command = ["routing", "compare", "--recording", str(recording), "--limit", "2", "--json", *arguments]
    result = CliRunner().invoke(app, command)
    assert result.exit_code != 0 and '"apgr"' not in result.output
    return result.output


def test_routing_compare_refuses_a_reward_it_cannot_price_and_a_calibration_it_cannot_use(tmp_path) -> None:
    from tests.test_recording import small_recording

    recording = small_recording(tmp_path / "recording")
    config = tmp_path / "grpo.yaml"
    config.write_text("tasks: tasks.jsonl\noutput_dir: out\nreward: {design: uno}\n", encoding="utf-8")
    assert f"{config}: reward.design is 'uno'" in compare_command(recording, "--reward-from", str(config))
    assert "reward_from, which is not given" in compare_command(recording, "--calibration", f"grpo={tmp_path}")
    config.write_text("tasks: tasks.jsonl\noutput_dir: out\nreward: {design: cost_penalty}\n", encoding="utf-8")
    output = compare_command(recording, "--reward-from", str(config), "--calibration", f"grpo={tmp_path}")
    assert "calibrations: grpo is no orchestrator" in output

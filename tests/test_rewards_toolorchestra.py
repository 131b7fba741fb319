import pytest

from podium.core import CallUsage, Preference, Status, ToolCall, ToolResult, Trajectory, Turn
from podium.rewards.toolorchestra import (
    batch_rewards,
    evaluation_reward,
    metric_magnitudes,
    metric_vector,
    min_max_normalise,
    normalise_against_baseline,
)

TOOLS = ["search", "python"]


def trajectory(calls: dict[str, int], usd: float, seconds: float, preference: Preference | None = None) -> Trajectory:
    """A one-turn trajectory with the given call counts; the cost sits on the first call (or the turn)."""
    results = [
        ToolResult(call=ToolCall(name=name), status=Status.OK) for name, count in calls.items() for _ in range(count)
    ]
    if results:
        results[0] = results[0].model_copy(update={"usage": CallUsage(usd=usd)})
        turn = Turn(index=0, output="", results=results)
    else:
        turn = Turn(index=0, output="", usage=CallUsage(usd=usd))
    return Trajectory(question="q", turns=[turn], wall_s=seconds, preference=preference)


def test_metric_vector_counts_calls_and_negates_cost_and_latency():
    t = trajectory({"search": 2, "python": 1, "other": 4}, usd=0.25, seconds=12.0)
    assert metric_vector(t, TOOLS, solved=True) == [2.0, 1.0, 1.0, -0.25, -12.0]
    assert metric_magnitudes(t, TOOLS, solved=False) == [2.0, 1.0, 0.0, 0.25, 12.0]


def test_batch_reward_hand_computed():
    # M: t1 [2,0,1,-0.3,-10], t2 [0,1,1,-0.1,-20], t3 [1,0,0,-0.2,-30]
    # normalised: t1 [1,0,1,0,1], t2 [0,1,1,1,0.5], t3 [0.5,0,0,0.5,0]; P = [1,0,1,1,0]
    preference = Preference(weights={"search": 1, "outcome": 1, "compute": 1})
    batch = [
        trajectory({"search": 2}, 0.3, 10),
        trajectory({"python": 1}, 0.1, 20),
        trajectory({"search": 1}, 0.2, 30),
    ]
    rewards = batch_rewards(batch, [True, True, False], TOOLS, preference)
    assert rewards == pytest.approx([2.0, 2.0, 0.0])


def test_cheaper_solved_rollout_earns_more_when_compute_is_preferred():
    preference = Preference(weights={"outcome": 1, "compute": 1})
    batch = [trajectory({}, 0.5, 1), trajectory({}, 0.1, 1)]
    expensive, cheap = batch_rewards(batch, [True, True], TOOLS, preference)
    assert cheap > expensive
    assert (expensive, cheap) == pytest.approx((0.0, 1.0))


def test_each_trajectory_uses_its_own_preference_when_none_is_given():
    likes_search = Preference(weights={"search": 1})
    likes_python = Preference(weights={"python": 1})
    batch = [trajectory({"search": 1}, 0, 1, likes_search), trajectory({"python": 1}, 0, 1, likes_python)]
    assert batch_rewards(batch, [True, True], TOOLS) == pytest.approx([1.0, 1.0])
    with pytest.raises(ValueError, match="no preference"):
        batch_rewards([trajectory({}, 0, 1)], [True], TOOLS)


def test_max_equal_min_gives_zero_component():
    assert min_max_normalise([[3.0, 1.0], [3.0, 2.0]]) == [[0.0, 0.0], [0.0, 1.0]]
    assert min_max_normalise([]) == []
    with pytest.raises(ValueError):
        min_max_normalise([[1.0], [1.0, 2.0]])


def test_one_rollout_all_wrong_and_zero_cost_batches():
    everything = Preference(weights={"search": 1, "python": 1, "outcome": 1, "compute": 1, "latency": 1})
    single = [trajectory({"search": 3}, 0.2, 5)]
    assert batch_rewards(single, [True], TOOLS, everything) == [0.0]
    wrong = [trajectory({"search": 1}, 0.1, 1), trajectory({"python": 2}, 0.0, 9)]
    assert batch_rewards(wrong, [False, False], TOOLS, everything) == [0.0, 0.0]
    free = [trajectory({"search": 1}, 0.0, 1), trajectory({}, 0.0, 3)]
    # cost identical (0) -> component 0; search 1 vs 0; outcome 1 vs 0; latency -1 vs -3.
    assert batch_rewards(free, [True, False], TOOLS, everything) == pytest.approx([1 + 1 + 0 + 1, 0.0])


def test_evaluation_normalises_against_the_baseline_hand_computed():
    preference = Preference(weights={"outcome": 1, "compute": 1, "latency": 1})
    current = trajectory({"search": 1}, usd=2.0, seconds=30)
    baseline = trajectory({"search": 3}, usd=4.0, seconds=60)
    # [1/3, 1/1, 4/2, 60/30] · [0, 1, 1, 1] (python weight 0 too)
    assert evaluation_reward(current, True, baseline, True, ["search"], preference) == pytest.approx(5.0)
    assert evaluation_reward(current, False, baseline, True, ["search"], preference) == 0.0


def test_evaluation_sign_cheaper_and_faster_than_baseline_scores_higher():
    # The NVIDIA code divided the negated baseline cost by the positive current cost: a cheaper run then
    # scored negative and lower than a dearer one. Here less spending must raise the score, and stay positive.
    preference = Preference(weights={"compute": 1, "latency": 1})
    baseline = trajectory({}, usd=4.0, seconds=60)
    cheap = evaluation_reward(trajectory({}, 2.0, 30), True, baseline, True, [], preference)
    dear = evaluation_reward(trajectory({}, 8.0, 120), True, baseline, True, [], preference)
    assert cheap == pytest.approx(2.0 + 2.0)
    assert dear == pytest.approx(0.5 + 0.5)
    assert cheap > dear > 0


def test_baseline_normalisation_guards():
    # max(1, ·) keeps zero counts and sub-unit costs finite.
    assert normalise_against_baseline([2, 1, 0.0, 0.5], [0, 0, 0.0, 0.0]) == [2.0, 1.0, 0.0, 0.0]
    with pytest.raises(ValueError, match="non-negative magnitudes"):
        normalise_against_baseline([0, 1, -2.0, 3.0], [0, 1, 2.0, 3.0])
    with pytest.raises(ValueError):
        normalise_against_baseline([1, 2, 3], [1, 2])

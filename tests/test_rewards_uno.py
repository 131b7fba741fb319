import pytest

from podium.rewards.uno import (
    CostBracket,
    TurnRollout,
    agentic_grpo_advantages,
    mt_grpo_advantages,
    turn_returns,
    uno_reward,
)


def test_terminal_reward():
    assert uno_reward(True, 0.0) == pytest.approx(1.0)
    assert uno_reward(True, 1.0) == pytest.approx(0.9)
    assert uno_reward(True, 0.5) == pytest.approx(0.95)
    assert uno_reward(True, 0.5, shaping=0.1) == pytest.approx(0.95)  # S only counts when wrong
    assert uno_reward(False, 0.0, shaping=0.07) == pytest.approx(0.07)
    assert uno_reward(False, 0.0, shaping=0.5) == pytest.approx(0.10)  # capped: wrong never beats 0.1
    assert uno_reward(False, 0.3, shaping=-1.0) == 0.0
    assert uno_reward(True, 1.0) > uno_reward(False, 0.0, shaping=1.0)
    with pytest.raises(ValueError):
        uno_reward(True, 1.5)


def test_cost_bracket_hand_computed():
    bracket = CostBracket(window=5, low_percentile=0, high_percentile=100)
    assert bracket.normalise_batch([0, 1, 4, 9, 16]) == pytest.approx([0.0, 0.25, 0.5, 0.75, 1.0])
    assert bracket.normalise(25) == 1.0  # clipped above
    bracket.observe([100])  # the oldest episode (cost 0) leaves the window
    assert len(bracket) == 5
    assert bracket.bracket() == (1.0, 10.0)
    assert bracket.normalise(0) == 0.0  # clipped below


def test_default_percentiles_interpolate():
    bracket = CostBracket()
    bracket.observe([0, 1, 4, 9, 16])  # roots 0..4
    assert bracket.bracket() == pytest.approx((0.2, 3.8))
    assert bracket.normalise(4) == pytest.approx((2 - 0.2) / 3.6)


def test_cost_bracket_edge_cases():
    equal = CostBracket()
    equal.observe([1.0, 1.0, 1.0])
    assert equal.normalise(1.0) == 0.0
    assert equal.normalise(4.0) == 1.0
    assert equal.normalise(0.0) == 0.0
    with pytest.raises(ValueError, match="no episode"):
        CostBracket().normalise(1.0)
    with pytest.raises(ValueError, match="negative"):
        equal.observe([-0.5])
    with pytest.raises(ValueError):
        CostBracket(low_percentile=50, high_percentile=50)


def test_turn_returns_hand_computed():
    rollout = TurnRollout(reward=1.0, shaping=[0.02, -0.5, 0.01], action_types=["plan", "repair", "answer"])
    # shaping clipped to [-0.05, 0.05]; gamma 0.5
    assert turn_returns(rollout, gamma=0.5, eta=0.05) == pytest.approx([0.2475, 0.455, 1.01])
    assert turn_returns(TurnRollout(0.0, [], []), gamma=0.5) == []


def test_agentic_grpo_hand_computed():
    group = [
        TurnRollout(reward=1.0, shaping=[0.0, 0.0], action_types=["plan", "answer"]),
        TurnRollout(reward=0.0, shaping=[0.0], action_types=["plan"]),
    ]
    advantages = agentic_grpo_advantages(group, gamma=1.0, eta=0.0)
    # turn 0 cohort (plan): returns [1, 0] -> ±1; trajectory baseline ±1; the lone answer turn gets the baseline.
    assert advantages[0] == pytest.approx([2.0, 1.0], rel=1e-5)
    assert advantages[1] == pytest.approx([-2.0], rel=1e-5)


def test_different_action_types_are_not_compared():
    group = [
        TurnRollout(reward=1.0, shaping=[0.0], action_types=["lazy"]),
        TurnRollout(reward=0.0, shaping=[0.0], action_types=["plan"]),
    ]
    local_only = agentic_grpo_advantages(group, trajectory_weight=0.0)
    assert local_only == [[0.0], [0.0]]
    with pytest.raises(ValueError):
        TurnRollout(1.0, [0.0], [])


def test_all_wrong_group_has_zero_advantages():
    group = [TurnRollout(0.0, [0.0, 0.0], ["plan", "answer"]) for _ in range(4)]
    assert agentic_grpo_advantages(group) == [[0.0, 0.0]] * 4


def test_mt_grpo_hand_computed():
    advantages = mt_grpo_advantages([1.0, 0.0], [[1.0, 0.0], [0.0]], rho=0.5)
    assert advantages[0] == pytest.approx([1.5, 1.0], rel=1e-5)
    assert advantages[1] == pytest.approx([-1.5], rel=1e-5)
    with pytest.raises(ValueError):
        mt_grpo_advantages([1.0], [])

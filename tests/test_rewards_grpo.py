import pytest

from podium.rewards.grpo import Rollout, filtered_group_advantages, group_advantages, mean_and_std


def test_group_advantages_hand_computed():
    assert group_advantages([1.0, 0.0, 0.0, 1.0]) == pytest.approx([1.0, -1.0, -1.0, 1.0], rel=1e-5)
    # mean 2, population std sqrt(2/3)
    assert group_advantages([1.0, 2.0, 3.0], delta=0.0) == pytest.approx([-1.224744871, 0.0, 1.224744871])


def test_degenerate_groups_give_zero_advantage():
    assert group_advantages([0.7]) == [0.0]
    assert group_advantages([0.0, 0.0, 0.0]) == [0.0, 0.0, 0.0]
    assert group_advantages([]) == []
    with pytest.raises(ValueError):
        mean_and_std([])


def test_filters_drop_malformed_and_unanswered_before_normalising():
    group = [Rollout(1.0), Rollout(0.0, well_formed=False), Rollout(0.0), Rollout(1.0, answered=False)]
    outcome = filtered_group_advantages(group)
    assert outcome.dropped is None
    assert outcome.kept == [0, 2]
    assert outcome.advantages == pytest.approx([1.0, -1.0], rel=1e-5)


def test_homogeneous_and_empty_groups_are_dropped():
    all_wrong = filtered_group_advantages([Rollout(0.0)] * 8)
    assert all_wrong.kept == [] and "homogeneous" in (all_wrong.dropped or "")
    nearly_equal = filtered_group_advantages([Rollout(0.5), Rollout(0.55), Rollout(0.6)])  # std 0.041
    assert nearly_equal.dropped is not None
    single = filtered_group_advantages([Rollout(1.0)])
    assert single.dropped is not None
    broken = filtered_group_advantages([Rollout(1.0, well_formed=False)])
    assert broken.dropped == "no well-formed, answered rollout"
    spread = filtered_group_advantages([Rollout(0.0), Rollout(0.3)], min_std=0.1)  # std 0.15
    assert spread.kept == [0, 1]

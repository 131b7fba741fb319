import pytest

from podium.core import CallUsage, Status, ToolCall, ToolResult, Trajectory, Turn
from podium.rewards.paramanager import ParaManagerWeights, paramanager_reward, round_follows_format, soft_budget

GOOD = (
    '<reasoning>split the work</reasoning>\n<tool_call>{"name": "a"}</tool_call>\n<tool_call>{"name": "b"}</tool_call>'
)


def result(name: str, units: float = 0.0, status: Status = Status.OK) -> ToolResult:
    return ToolResult(call=ToolCall(name=name), status=status, usage=CallUsage(cost_units=units))


def test_format_checker():
    assert round_follows_format(GOOD)
    assert round_follows_format("<reasoning>x</reasoning><tool_call>{}</tool_call>")
    assert not round_follows_format("no tags at all")
    assert not round_follows_format("<reasoning>x</reasoning>")  # no call
    assert not round_follows_format("<tool_call>{}</tool_call><reasoning>x</reasoning>")  # wrong order
    assert not round_follows_format("<reasoning>  </reasoning><tool_call>{}</tool_call>")  # empty reasoning
    assert not round_follows_format("<reasoning>x</reasoning><tool_call>{}</tool_call> and then prose")
    assert not round_follows_format("<reasoning>x</reasoning><tool_call>{}")  # unclosed


def test_soft_budget():
    assert soft_budget(0, 8) == 1.0
    assert soft_budget(8, 8) == 1.0
    assert soft_budget(10, 8) == pytest.approx(0.75)
    assert soft_budget(16, 8) == 0.0
    assert soft_budget(40, 8) == 0.0
    with pytest.raises(ValueError):
        soft_budget(1, 0)


def test_reward_hand_computed():
    rounds = [
        Turn(index=0, output=GOOD, results=[result("search", 3), result("python", 7)]),
        Turn(
            index=1,
            output="<reasoning>done</reasoning><tool_call>{}</tool_call>",
            usage=CallUsage(input_tokens=10_000, output_tokens=4_000),
            results=[result("final_answer")],
        ),
    ]
    reward = paramanager_reward(Trajectory(question="q", turns=rounds), correct=True)
    assert reward.task == 1.0
    assert reward.format == 1.0
    assert reward.diversity == 0.5  # 1.5 calls per round >= 1.25; 2 distinct tools < 3
    # L = 14,000 -> (24,576 - 14,000) / 12,288; C = 10 -> (16 - 10) / 8
    assert reward.efficiency == pytest.approx(0.5 * (10_576 / 12_288 + 0.75))
    assert reward.total == pytest.approx(2.5 + 0.5 * (10_576 / 12_288 + 0.75))


def test_parse_errors_earn_no_diversity_and_bad_rounds_lower_format():
    rounds = [
        Turn(index=0, output="prose", results=[result("a"), result("b", status=Status.PARSE_ERR)]),
        Turn(index=1, output=GOOD, results=[result("c"), result("d", status=Status.PARSE_ERR)]),
    ]
    reward = paramanager_reward(Trajectory(question="q", turns=rounds), correct=False)
    assert reward.task == 0.0
    assert reward.format == 0.5
    assert reward.diversity == 0.0  # 1 executed call per round, 2 tools
    full = paramanager_reward(
        Trajectory(question="q", turns=[Turn(index=0, output=GOOD, results=[result(n) for n in "abc"])]),
        correct=True,
    )
    assert full.diversity == 1.0


def test_empty_trajectory_and_overrides():
    empty = paramanager_reward(Trajectory(question="q"), correct=False)
    assert (empty.task, empty.format, empty.diversity, empty.efficiency) == (0.0, 0.0, 0.0, 1.0)
    long = paramanager_reward(Trajectory(question="q"), correct=True, length_tokens=30_000)
    assert long.efficiency == 0.5
    loose = ParaManagerWeights(parallel_threshold=1.0, tool_threshold=1, target_tokens=10, target_cost_units=1)
    one_call = Trajectory(question="q", turns=[Turn(index=0, output=GOOD, results=[result("x", 1.5)])])
    reward = paramanager_reward(one_call, correct=True, weights=loose)
    assert reward.diversity == 1.0
    assert reward.efficiency == pytest.approx(0.5 * (1.0 + 0.5))

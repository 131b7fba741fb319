"""check_arithmetic: the findings on replies whose errors are known by construction, and the tool's wording."""

import asyncio

import pytest

from podium.core.calls import Status, ToolCall
from podium.pool.builtin.arithmetic import agrees, check_arithmetic_tool, check_text, evaluate
from podium.pool.registry import ToolRegistry


def test_plain_arithmetic_only() -> None:
    assert evaluate("9 * $2") == 18 and evaluate("1,000 - 4/2") == 998 and evaluate("3 x 4") == 12
    assert evaluate("20% * 50") == pytest.approx(10)
    for hostile in ("__import__('os')", "2 ** 100000", "1 / 0", "(" * 5000 + "1" + ")" * 5000):
        with pytest.raises(ValueError):
            evaluate(hostile)


def test_stated_results_agree_up_to_their_rounding() -> None:
    assert agrees(10 / 3, "3.33") and agrees(10 / 3, "3.3") and not agrees(10 / 3, "3.4")
    assert agrees(0.2, "20%") and agrees(18.0, "$18") and not agrees(18.0, "19")


def test_a_correct_worked_answer() -> None:
    reply = "She has 16 - 3 = 13 eggs, then 13 - 4 = 9.\nShe makes 9 * $2 = $<<9*2=18>>18.\n#### 18"
    report = check_text(reply)
    assert (report.calculations, report.wrong) == (4, [])
    assert (report.final, report.final_stated, report.final_whole, report.final_computed) == ("18", True, True, "last")
    assert report.text() == (
        "0 of 4 calculations wrong. stated final answer 18: a whole number, the last result computed. no hedging."
    )
    assert report.features() == [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]


def test_each_kind_of_error_is_reported() -> None:
    wrong = check_text("So 12 * 7 = 94 apples and <<94+6=101>>101 in all.\n#### 101")
    assert sorted(wrong.wrong) == ["12 * 7 = 94 (is 84)", "94+6 = 101 (is 100)"] and wrong.features()[0] == 2.0
    fraction = check_text("Each gets 5 / 2 = 2.5 bolts, assuming halves are allowed.\n#### 2.5")
    assert fraction.final_whole is False and fraction.hedges == ["assuming"] and fraction.features()[4] == 1.0
    invented = check_text("We add 3 + 4 = 7 and 7 + 1 = 8.\nThe answer is 12.")
    assert invented.final_computed == "no" and invented.final_stated and "not computed" in invented.text()
    earlier = check_text("3 + 4 = 7 and 7 + 1 = 8, so she keeps 7.")
    assert earlier.final_computed == "earlier" and not earlier.final_stated and earlier.features()[3] == 1.0
    silent = check_text("I cannot tell.")
    assert silent.final is not None and silent.final_whole is None and silent.calculations == 0
    assert check_text("").final is None and "no final answer" in check_text("").text()


def test_a_restatement_is_not_a_calculation() -> None:
    assert check_text("20% of 50 = 10 dollars").wrong == []  # reads "50 = 10": no operator on the left


def test_the_tool_reports_through_the_registry() -> None:
    result = asyncio.run(
        ToolRegistry([check_arithmetic_tool()]).call(
            ToolCall(name="check_arithmetic", arguments={"text": "2 + 2 = 5\n#### 5"})
        )
    )
    assert result.status is Status.OK
    assert result.observation.startswith("1 of 1 calculations wrong: 2 + 2 = 5 (is 4).")
    assert result.value["features"][0] == 1.0

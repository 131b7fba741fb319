"""check_arithmetic: the findings on replies whose errors are known by construction, and the tool's wording."""

import asyncio
import math

import pytest

from podium.core.answers import ANSWER_INSTRUCTIONS
from podium.core.calls import Status, ToolCall
from podium.pool.builtin.arithmetic import agrees, check_arithmetic_tool, check_text, evaluate
from podium.pool.context import EpisodeContext, current_episode
from podium.pool.registry import ToolRegistry

DUCKS = (
    "Janet's ducks lay 16 eggs per day. She eats three for breakfast every morning and bakes muffins for her friends "
    "every day with four. She sells the remainder at the farmers' market daily for $2 per fresh duck egg. How much "
    "in dollars does she make every day at the farmers' market?"
)


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
        "0 of 4 calculations wrong. stated final answer 18: a whole number, the last result computed. no hedging. "
        "no second thoughts."
    )
    assert report.features() == [0.0] * 14  # without a question, its four features are zeros


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


def test_a_reply_read_against_its_question() -> None:
    full = "She has 16 - 3 = 13 eggs, then 13 - 4 = 9.\nShe makes 9 * $2 = $<<9*2=18>>18.\n#### 18"
    used = check_text(full, DUCKS).question
    assert used is not None and used.quantities == ["16", "2", "three", "four"] and used.unused == []
    assert (used.words, used.percentages) == (52, False)
    assert used.text() == "question: 4 quantities in 52 words, every one used"
    assert used.features() == pytest.approx([0.0, math.log1p(52) / 6, math.log1p(4) / 3, 0.0])
    # "three" is used as 3; 16 and 4 are never mentioned
    short = check_text("She sells 16 - 3 eggs... no, she sells 13 eggs for 13 * 2 = 26 dollars.\n#### 26", DUCKS)
    assert short.question is not None and short.question.unused == ["four"]
    skipped = check_text("She sells 9 eggs for $<<9*2=18>>18.\n#### 18", DUCKS)
    assert skipped.question is not None and skipped.question.unused == ["16", "three", "four"]
    assert skipped.text().endswith("question: 4 quantities in 52 words, 3 never used: 16, three, four.")
    assert skipped.features()[-4] == 1.0  # three of at most three
    # the answer format a verifier appends is not the question's; a clock time is no quantity; 20% is a percentage
    asked = f"From 1:00 PM to 5:00 PM, 20% of 30 birds leave.\n\n{ANSWER_INSTRUCTIONS['math']}"
    hours = check_text("4 hours pass and 0.2 * 30 = 6 leave.\n#### 6", asked).question
    assert hours is not None and (hours.quantities, hours.words, hours.percentages) == (["20", "30"], 11, True)
    assert hours.unused == ["20"]  # the reply wrote 0.2, not 20


def test_second_thoughts_and_a_reply_cut_off() -> None:
    changed = check_text("Wait, that is a mistake: actually 3 + 4 = 7.\n#### 7")
    assert changed.second_thoughts == ["wait", "mistake", "actually"] and not changed.cut_off
    assert "second thoughts: wait, mistake, actually." in changed.text() and changed.features()[8] == 3.0
    cut = check_text("Let's denote the number of silver coins as S. We can set up the following equation:")
    assert cut.cut_off and cut.features()[9] == 1.0 and "the reply stops mid-sentence" in cut.text()
    for finished in ("So she makes $18.", "#### 18", "She makes 9 * 2 = 18", "It is 40%", ""):
        assert not check_text(finished).cut_off, finished


def test_the_tool_reads_the_episodes_question() -> None:
    registry = ToolRegistry([check_arithmetic_tool()])
    call = ToolCall(name="check_arithmetic", arguments={"text": "She sells 9 eggs for $<<9*2=18>>18.\n#### 18"})

    async def in_episode(question: str):
        current_episode.set(EpisodeContext(question=question))
        return await registry.call(call)

    alone = asyncio.run(registry.call(call))
    assert "question:" not in alone.observation and alone.value["features"][-3:] == [0.0, 0.0, 0.0]
    inside = asyncio.run(in_episode(DUCKS))
    assert inside.observation.endswith("question: 4 quantities in 52 words, 3 never used: 16, three, four.")
    given = asyncio.run(
        registry.call(ToolCall(name="check_arithmetic", arguments={**call.arguments, "question": "9 eggs"}))
    )
    assert given.observation.endswith("question: 1 quantity in 2 words, every one used.")

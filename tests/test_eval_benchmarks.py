"""Benchmark loaders on the shared data (counts from its README), answer extraction and vote keys."""

import builtins
import random

import pytest

from podium.core.answers import extract_answer, last_boxed, vote_key
from podium.datasets.families.math import gsm8k_gold
from podium.datasets.families.multiple_choice import gpqa_items, gpqa_rows
from podium.datasets.items import AssertTests, HumanEvalTests
from podium.datasets.loaders import (
    BENCHMARKS,
    BenchmarkError,
    get_benchmark,
    shared_data_dir,
)
from podium.errors import MissingExtraError

pytestmark = pytest.mark.skipif(not shared_data_dir().is_dir(), reason="shared benchmark data not present")

README_COUNTS = {
    "aime24": 30,
    "aime25": 30,
    "amc23": 40,
    "math500": 500,
    "gsm8k": 1319,
    "humaneval": 164,
    "mbpp": 500,
    "mmlu_pro": 300,
    "gpqa_diamond": 198,
    "gpqa_main": 448,
    "frames": 824,
    "hotpotqa": 100,
    "tau2_airline": 50,
    "tau2_retail": 114,
}


@pytest.fixture(scope="module")
def loaded():
    return {name: BENCHMARKS[name].items() for name in README_COUNTS}


def test_every_benchmark_is_registered_with_the_readme_count_and_unique_ids(loaded):
    assert set(README_COUNTS) <= set(BENCHMARKS)
    for name, count in README_COUNTS.items():
        items = loaded[name]
        assert len(items) == count, name
        assert len({item.id for item in items}) == count, f"{name} has duplicate ids"
        assert all(item.verifier == BENCHMARKS[name].verifier for item in items)
        assert all(item.question.strip() for item in items), name


def test_gold_types_match_the_verifier(loaded):
    assert all(isinstance(item.gold, HumanEvalTests) for item in loaded["humaneval"])
    assert all(isinstance(item.gold, AssertTests) and item.gold.test_list for item in loaded["mbpp"])
    assert all(item.gold in "ABCDEFGHIJ" and len(item.gold) == 1 for item in loaded["mmlu_pro"])
    assert all(item.gold in "ABCD" for item in loaded["gpqa_diamond"] + loaded["gpqa_main"])
    assert all(isinstance(item.gold, str) and item.gold for name in ("aime24", "frames") for item in loaded[name])


def test_gsm8k_gold_is_the_text_after_the_marker(loaded):
    assert gsm8k_gold("so 3 + 4 = 7\n#### 1,234") == "1234"
    assert loaded["gsm8k"][0].gold == "18"
    with pytest.raises(BenchmarkError):
        gsm8k_gold("no marker")


def test_amc_numbers_become_integer_text_and_mbpp_is_the_test_split(loaded):
    assert loaded["amc23"][0].gold == "27"
    ids = [int(item.id.removeprefix("mbpp-")) for item in loaded["mbpp"]]
    assert (min(ids), max(ids)) == (11, 510)


def test_tau2_items_name_their_domain_task_and_split(loaded):
    airline = loaded["tau2_airline"]
    assert {item.metadata["domain"] for item in airline} == {"airline"}
    assert sum(item.metadata["split"] == "test" for item in airline) == 20
    assert sum(item.metadata["split"] == "test" for item in loaded["tau2_retail"]) == 40


def test_gpqa_order_is_seeded_per_question_and_the_gold_letter_marks_the_correct_answer():
    rows = gpqa_rows(shared_data_dir(), "diamond")
    first, again = list(gpqa_items(rows)), list(gpqa_items(rows))
    assert [item.question for item in first] == [item.question for item in again]
    assert all(item.metadata["canary"] for item in first)
    for row, item in zip(rows, first, strict=True):
        assert f"\n{item.gold}. {row['Correct Answer'].strip()}" in item.question
    # Shuffled, not fixed: the gold letter varies, and another seed gives another order.
    assert len({item.gold for item in first}) == 4
    reseeded = list(gpqa_items(rows, seed=1))
    assert [item.gold for item in reseeded] != [item.gold for item in first]
    # The same question keeps its order when loaded alone (a --limit run sees the same options).
    shuffled = rows[:]
    random.Random(3).shuffle(shuffled)
    alone = {item.id: item.gold for item in gpqa_items(shuffled[:5])}
    assert alone == {item.id: item.gold for item in first if item.id in alone}


def test_unknown_benchmark_and_missing_data_are_clear_errors(tmp_path):
    with pytest.raises(BenchmarkError, match="unknown benchmark 'nope'"):
        get_benchmark("nope")
    with pytest.raises(BenchmarkError, match="not found"):
        get_benchmark("gsm8k").items(data_dir=tmp_path)


def test_data_dir_comes_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("PODIUM_DATA", str(tmp_path))
    assert shared_data_dir() == tmp_path


def test_hub_loading_without_datasets_says_what_to_install(monkeypatch):
    real_import = builtins.__import__

    def no_datasets(name, *args, **kwargs):
        if name == "datasets":
            raise ImportError("no datasets here")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_datasets)
    with pytest.raises(MissingExtraError, match="pip install datasets"):
        get_benchmark("gsm8k").items(source="hub")
    with pytest.raises(BenchmarkError, match="no hub source"):
        get_benchmark("tau2_airline").items(source="hub")


@pytest.mark.parametrize(
    ("text", "kind", "expected"),
    [
        ("so x = 3, thus \\boxed{\\frac{1}{2}} and done", "math", "\\frac{1}{2}"),
        ("first \\boxed{1} then \\boxed{{2}+1}", "math", "{2}+1"),
        ("The total is 12.\nFinal answer: 12", "math", "12"),
        ("I think it is\n\n 42 ", "math", "42"),
        # A sentence with several numbers stays whole: the verifier decides (here: two candidates, 1,200 or 12).
        (
            "Each costs $3.\nSo, there are 1,200 bolts in total, or 12 boxes",
            "math",
            "So, there are 1,200 bolts in total, or 12 boxes",
        ),
        ("Then\ny = -2x", "math", "y = -2x"),
        ("It is $\\boxed{3}$ or $\\boxed{5}$.", "math", "\\boxed{3}$ or $\\boxed{5}"),
        ("\\boxed{\\boxed{5}}", "math", "5"),
        ("So she earns 2,400 dollars", "math", "2400"),
        ("Thus\n\\frac{1}{2}", "math", "\\frac{1}{2}"),
        ("So James runs 360 meters.\nThe answer is: 360.", "math", "360"),
        ("**Final answer:** 7", "math", "7"),
        ("Reasoning...\nAnswer: (C)", "multiple_choice", "C"),
        ("Thinking.\nAnswer: Paris, France", "qa", "Paris, France"),
        ("Here:\n```python\ndef f():\n    return 1\n```\nDone.", "code", "def f():\n    return 1"),
        ("   ", "math", None),
    ],
)
def test_extract_answer(text, kind, expected):
    assert extract_answer(text, kind) == expected


def test_last_boxed_handles_unbalanced_and_absent_boxes():
    assert last_boxed("no box") is None
    assert last_boxed("\\boxed{unclosed") is None


@pytest.mark.parametrize(
    ("left", "right", "kind"),
    [
        ("\\dfrac{1}{2}", "\\frac{1}{2}", "math"),
        ("1,234", "1234", "math"),
        ("27.0", "27", "math"),
        ("$\\left( 3, \\pi \\right)$", "(3,\\pi)", "math"),
        ("\\text{east}", "east", "math"),
        ("The Eiffel Tower.", "eiffel tower", "qa"),
        ("The answer is (B).", "B", "multiple_choice"),
    ],
)
def test_vote_keys_merge_equal_answers(left, right, kind):
    assert vote_key(left, kind) == vote_key(right, kind)


def test_vote_keys_keep_different_answers_apart():
    assert vote_key("12", "math") != vote_key("1.2", "math")
    assert vote_key("A", "multiple_choice") != vote_key("B", "multiple_choice")

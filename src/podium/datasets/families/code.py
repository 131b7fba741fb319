"""Code benchmarks: the gold is the tests the written code must pass in the sandbox."""

from collections.abc import Iterable, Iterator
from typing import Any

from podium.datasets.benchmark import HubSource, jsonl_benchmark
from podium.datasets.items import AssertTests, BenchmarkItem, HumanEvalTests

MBPP_TEST_IDS = range(11, 511)
"""MBPP's standard 500-problem test split (task ids 11-510)."""


def humaneval_items(rows: Iterable[dict[str, Any]]) -> Iterator[BenchmarkItem]:
    for row in rows:
        tests = HumanEvalTests(prompt=row["prompt"], test=row["test"], entry_point=row["entry_point"])
        question = f"Complete this Python function:\n\n```python\n{row['prompt']}```"
        yield BenchmarkItem(id=row["task_id"], question=question, gold=tests, verifier="code")


def mbpp_items(rows: Iterable[dict[str, Any]]) -> Iterator[BenchmarkItem]:
    """The test split, with MBPP's own prompt: the task, then the tests the code must pass."""
    for row in rows:
        if row["task_id"] not in MBPP_TEST_IDS:
            continue
        tests = AssertTests(test_list=row["test_list"], test_setup_code=row.get("test_setup_code") or "")
        asserts = "\n".join(row["test_list"])
        question = f"{row['text']}\nYour code should pass these tests:\n\n{asserts}"
        yield BenchmarkItem(id=f"mbpp-{row['task_id']}", question=question, gold=tests, verifier="code")


BENCHMARKS = (
    jsonl_benchmark(
        "humaneval",
        "code",
        "HumanEval, 164 functions",
        "code/humaneval.jsonl",
        humaneval_items,
        HubSource("openai/openai_humaneval", None, "test"),
    ),
    jsonl_benchmark(
        "mbpp",
        "code",
        "MBPP test split (task ids 11-510)",
        "code/mbpp.jsonl",
        mbpp_items,
        HubSource("google-research-datasets/mbpp", "full", "test"),
    ),
)

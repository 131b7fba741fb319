"""Competition math and grade-school math: the gold is a number or expression the math verifier compares."""

from collections.abc import Iterable, Iterator
from typing import Any

from podium.datasets.benchmark import Benchmark, BenchmarkError, HubSource, RowConverter, jsonl_benchmark, keyed_items
from podium.datasets.items import BenchmarkItem


def _number_text(value: Any) -> str:
    """AMC stores 27.0 for 27; the integer text is what a model writes and votes on."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).strip()


def math_items(prefix: str) -> RowConverter:
    """Competition math rows (problem or question, answer, optional id/unique_id/level/subject)."""
    return keyed_items(
        prefix,
        "math",
        lambda row: row.get("problem") or row["question"],
        lambda row: _number_text(row["answer"]),
        ("unique_id", "id"),
        ("level", "subject", "url"),
    )


def gsm8k_gold(answer: str) -> str:
    """The final answer of a GSM8K solution: the text after ``#### `` without thousands separators."""
    if "####" not in answer:
        raise BenchmarkError(f"GSM8K answer without '####': {answer[-80:]!r}")
    return answer.rsplit("####", 1)[1].strip().replace(",", "")


def gsm8k_items(rows: Iterable[dict[str, Any]]) -> Iterator[BenchmarkItem]:
    for index, row in enumerate(rows):
        yield BenchmarkItem(
            id=f"gsm8k-{index}", question=row["question"], gold=gsm8k_gold(row["answer"]), verifier="math"
        )


def _competition(name: str, description: str, hub: HubSource) -> Benchmark:
    return jsonl_benchmark(name, "math", description, f"math/{name}.jsonl", math_items(name), hub)


BENCHMARKS = (
    _competition("aime24", "AIME 2024, 30 problems", HubSource("HuggingFaceH4/aime_2024", None, "train")),
    _competition("aime25", "AIME 2025, 30 problems", HubSource("math-ai/aime25", None, "test")),
    _competition("amc23", "AMC 2023, 40 problems", HubSource("math-ai/amc23", None, "test")),
    _competition("math500", "MATH-500", HubSource("HuggingFaceH4/MATH-500", None, "test")),
    jsonl_benchmark(
        "gsm8k",
        "math",
        "GSM8K test, 1319 problems",
        "math/gsm8k_test.jsonl",
        gsm8k_items,
        HubSource("openai/gsm8k", "main", "test"),
    ),
)

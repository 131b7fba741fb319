"""Open questions with one gold answer, judged by the QA verifier."""

import json
from collections.abc import Iterator
from pathlib import Path

from podium.datasets.benchmark import Benchmark, HubSource, RowConverter, jsonl_benchmark, keyed_items
from podium.datasets.items import BenchmarkItem


def qa_items(prefix: str) -> RowConverter:
    """Open questions with one gold answer; HotpotQA keeps its context paragraphs in the metadata."""
    return keyed_items(
        prefix,
        "qa",
        lambda row: row["question"].strip(),
        lambda row: str(row["answer"]).strip(),
        ("id", "_id"),
        ("type", "level", "context"),
    )


def _read_hotpot(directory: Path) -> Iterator[BenchmarkItem]:
    rows = json.loads((directory / "qa" / "hotpot_distractor_100.json").read_text(encoding="utf-8"))
    return qa_items("hotpotqa")(rows)


BENCHMARKS = (
    jsonl_benchmark(
        "frames",
        "qa",
        "FRAMES, 824 multi-hop questions",
        "qa/frames.jsonl",
        qa_items("frames"),
        HubSource("google/frames-benchmark", None, "test", {"Prompt": "question", "Answer": "answer"}),
    ),
    Benchmark(
        "hotpotqa",
        "qa",
        "HotpotQA dev distractor, first 100 questions",
        _read_hotpot,
        HubSource("hotpotqa/hotpot_qa", "distractor", "validation"),
        qa_items("hotpotqa"),
    ),
)

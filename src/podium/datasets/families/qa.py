"""Open questions with one gold answer, judged by the QA verifier."""

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from podium.datasets.benchmark import Benchmark, HubSource, RowConverter, jsonl_benchmark, own_id
from podium.datasets.items import BenchmarkItem


def qa_items(prefix: str) -> RowConverter:
    """Open questions with one gold answer; HotpotQA keeps its context paragraphs in the metadata."""

    def convert(rows: Iterable[dict[str, Any]]) -> Iterator[BenchmarkItem]:
        for index, row in enumerate(rows):
            key = own_id(row, "id", "_id")
            extras = {name: row[name] for name in ("type", "level", "context") if row.get(name) is not None}
            yield BenchmarkItem(
                id=f"{prefix}-{key if key is not None else index}",
                question=row["question"].strip(),
                gold=str(row["answer"]).strip(),
                verifier="qa",
                metadata=extras,
            )

    return convert


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

"""Multiple-choice benchmarks: the gold is the correct option's letter. GPQA stays encrypted on disk: it is
decrypted in memory at load time."""

import csv
import io
import random
import zipfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from podium.datasets.benchmark import Benchmark, HubSource, jsonl_benchmark
from podium.datasets.items import BenchmarkItem

GPQA_PASSWORD = b"deserted-untie-orchid"
"""Published by the GPQA authors in their README; the zip stays encrypted so the questions never sit on disk."""
GPQA_SHUFFLE_SEED = 0
"""Seed of GPQA's option order: the order differs per question but is the same on every load."""


def mmlu_pro_items(rows: Iterable[dict[str, Any]]) -> Iterator[BenchmarkItem]:
    """The local sample embeds its options in the question; hub rows list them and are formatted the same way."""
    for index, row in enumerate(rows):
        question = row["question"]
        if row.get("options"):
            lines = [f"{letter}. {option}" for letter, option in zip("ABCDEFGHIJ", row["options"], strict=False)]
            question = f"{question}\n Options are:\n" + "\n".join(lines)
        key = row.get("question_id", index)
        metadata = {"category": row["category"]} if row.get("category") else {}
        yield BenchmarkItem(
            id=f"mmlu_pro-{key}",
            question=question,
            gold=row["answer"].strip(),
            verifier="multiple_choice",
            metadata=metadata,
        )


def gpqa_items(rows: Iterable[dict[str, Any]], seed: int = GPQA_SHUFFLE_SEED) -> Iterator[BenchmarkItem]:
    """Options shuffled with a per-question seed (stable under ``limit``); the gold is the correct option's letter.

    The GPQA canary string travels in the metadata so any log holding these questions carries it.
    """
    for row in rows:
        options = [row["Correct Answer"], *(row[f"Incorrect Answer {n}"] for n in (1, 2, 3))]
        options = [option.strip() for option in options]
        order = list(range(4))
        random.Random(f"{seed}:{row['Record ID']}").shuffle(order)
        letters = "ABCD"
        listed = "\n".join(f"{letters[position]}. {options[choice]}" for position, choice in enumerate(order))
        yield BenchmarkItem(
            id=f"gpqa-{row['Record ID']}",
            question=f"{row['Question'].strip()}\n\n{listed}",
            gold=letters[order.index(0)],
            verifier="multiple_choice",
            metadata={
                "subdomain": row.get("Subdomain", ""),
                "domain": row.get("High-level domain", ""),
                "canary": row.get("Canary String", ""),
            },
        )


def gpqa_rows(directory: Path, subset: str) -> list[dict[str, Any]]:
    """The rows of ``gpqa_<subset>.csv``, decrypted in memory (nothing is written)."""
    with zipfile.ZipFile(directory / "mc" / "gpqa_dataset.zip") as archive:
        text = archive.read(f"dataset/gpqa_{subset}.csv", pwd=GPQA_PASSWORD).decode("utf-8")
    return list(csv.DictReader(io.StringIO(text)))


def _gpqa(subset: str, description: str) -> Benchmark:
    return Benchmark(
        f"gpqa_{subset}",
        "multiple_choice",
        description,
        lambda directory: gpqa_items(gpqa_rows(directory, subset)),
        HubSource("Idavidrein/gpqa", f"gpqa_{subset}", "train"),
        gpqa_items,
    )


BENCHMARKS = (
    jsonl_benchmark(
        "mmlu_pro",
        "multiple_choice",
        "MMLU-Pro 300-question sample (hub: the full test set)",
        "mc/mmlu_pro_300.jsonl",
        mmlu_pro_items,
        HubSource("TIGER-Lab/MMLU-Pro", None, "test"),
    ),
    _gpqa("diamond", "GPQA diamond, 198 questions, seeded option order"),
    _gpqa("main", "GPQA main, 448 questions, seeded option order"),
)

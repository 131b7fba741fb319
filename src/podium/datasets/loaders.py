"""Benchmarks: named sources of evaluation items (question, gold, which verifier judges them).

Each benchmark reads its local file under the shared data directory (``$PODIUM_DATA``, else
``$PODIUM_DATA_DIR``, else ``../shared/data`` beside the repository) or, with ``source="hub"``, the public
dataset through the optional ``datasets`` library. Both go through the same row converter, so an item looks the
same whichever way it was loaded. GPQA stays encrypted on disk: it is decrypted in memory at load time.
"""

import csv
import io
import json
import os
import random
import zipfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from podium.core.answers import VerifierKind
from podium.datasets.items import AssertTests, BenchmarkItem, HumanEvalTests
from podium.errors import MissingExtraError, PodiumError

DATA_ENV_VARS = ("PODIUM_DATA", "PODIUM_DATA_DIR")
"""Environment variables naming the shared data directory, first set wins (retrieval reads the second)."""
DEFAULT_DATA_DIR = Path(__file__).resolve().parents[3].parent / "shared" / "data"
"""``../shared/data`` relative to the repository root."""
GPQA_PASSWORD = b"deserted-untie-orchid"
"""Published by the GPQA authors in their README; the zip stays encrypted so the questions never sit on disk."""
GPQA_SHUFFLE_SEED = 0
"""Seed of GPQA's option order: the order differs per question but is the same on every load."""
MBPP_TEST_IDS = range(11, 511)
"""MBPP's standard 500-problem test split (task ids 11-510)."""


class BenchmarkError(PodiumError):
    """A benchmark is unknown or its data cannot be read."""


RowConverter = Callable[[Iterable[dict[str, Any]]], Iterator[BenchmarkItem]]


@dataclass(frozen=True)
class HubSource:
    """Where a benchmark lives on the Hugging Face hub."""

    path: str
    config: str | None
    split: str
    rename: dict[str, str] = field(default_factory=dict)
    """Hub column → the local file's field name, so the local converter reads hub rows too."""


@dataclass(frozen=True)
class Benchmark:
    """A named benchmark: how to read it and which verifier judges it."""

    name: str
    verifier: VerifierKind
    description: str
    read_local: Callable[[Path], Iterator[BenchmarkItem]]
    """Items from the shared data directory."""
    hub: HubSource | None = None
    convert: RowConverter | None = None
    """Converter applied to hub rows (after renaming)."""

    def items(
        self, *, data_dir: str | Path | None = None, source: Literal["local", "hub"] = "local"
    ) -> list[BenchmarkItem]:
        """Every item, in the dataset's order."""
        if source == "local":
            directory = shared_data_dir(data_dir)
            try:
                return list(self.read_local(directory))
            except FileNotFoundError as error:
                raise BenchmarkError(f"{self.name}: {error.filename} not found (set $PODIUM_DATA)") from error
        if self.hub is None or self.convert is None:
            raise BenchmarkError(f"{self.name} has no hub source; use the local data")
        return list(self.convert(_hub_rows(self.hub)))


def shared_data_dir(override: str | Path | None = None) -> Path:
    """The shared benchmark data directory: the argument, the first data environment variable set, or the default."""
    configured = override or next((os.environ[name] for name in DATA_ENV_VARS if os.environ.get(name)), None)
    return Path(configured).expanduser() if configured else DEFAULT_DATA_DIR


def _hub_rows(hub: HubSource) -> Iterator[dict[str, Any]]:
    try:
        import datasets
    except ImportError as error:
        raise MissingExtraError("hub benchmarks need the 'datasets' library: pip install datasets") from error
    for row in datasets.load_dataset(hub.path, hub.config, split=hub.split):
        yield {hub.rename.get(key, key): value for key, value in row.items()}


def _jsonl(path: Path) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                yield json.loads(line)


# ------------------------------------------------------------------------------------------------ converters


def _number_text(value: Any) -> str:
    """AMC stores 27.0 for 27; the integer text is what a model writes and votes on."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).strip()


def _own_id(row: dict[str, Any], *fields: str) -> Any:
    """The row's own id: the first of ``fields`` it has (0 is an id); None when it has none, and the item is then
    known by its 0-based position in the file."""
    return next((row[name] for name in fields if row.get(name) is not None), None)


def math_items(prefix: str) -> RowConverter:
    """Competition math rows (problem or question, answer, optional id/unique_id/level/subject)."""

    def convert(rows: Iterable[dict[str, Any]]) -> Iterator[BenchmarkItem]:
        for index, row in enumerate(rows):
            key = _own_id(row, "unique_id", "id")
            metadata = {name: row[name] for name in ("level", "subject", "url") if row.get(name) is not None}
            yield BenchmarkItem(
                id=f"{prefix}-{key if key is not None else index}",
                question=row.get("problem") or row["question"],
                gold=_number_text(row["answer"]),
                verifier="math",
                metadata=metadata,
            )

    return convert


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


def qa_items(prefix: str) -> RowConverter:
    """Open questions with one gold answer; HotpotQA keeps its context paragraphs in the metadata."""

    def convert(rows: Iterable[dict[str, Any]]) -> Iterator[BenchmarkItem]:
        for index, row in enumerate(rows):
            key = _own_id(row, "id", "_id")
            extras = {name: row[name] for name in ("type", "level", "context") if row.get(name) is not None}
            yield BenchmarkItem(
                id=f"{prefix}-{key if key is not None else index}",
                question=row["question"].strip(),
                gold=str(row["answer"]).strip(),
                verifier="qa",
                metadata=extras,
            )

    return convert


# ------------------------------------------------------------------------------------------- local readers


def _jsonl_reader(relative: str, convert: RowConverter) -> Callable[[Path], Iterator[BenchmarkItem]]:
    return lambda directory: convert(_jsonl(directory / relative))


def _read_hotpot(directory: Path) -> Iterator[BenchmarkItem]:
    rows = json.loads((directory / "qa" / "hotpot_distractor_100.json").read_text(encoding="utf-8"))
    return qa_items("hotpotqa")(rows)


def gpqa_rows(directory: Path, subset: str) -> list[dict[str, Any]]:
    """The rows of ``gpqa_<subset>.csv``, decrypted in memory (nothing is written)."""
    with zipfile.ZipFile(directory / "mc" / "gpqa_dataset.zip") as archive:
        text = archive.read(f"dataset/gpqa_{subset}.csv", pwd=GPQA_PASSWORD).decode("utf-8")
    return list(csv.DictReader(io.StringIO(text)))


def _tau2_reader(domain_name: str) -> Callable[[Path], Iterator[BenchmarkItem]]:
    def read(directory: Path) -> Iterator[BenchmarkItem]:
        # The task file is read as JSON: listing items needs no tau2 package (running them does).
        tau2 = directory / "tau2"
        tasks = json.loads((tau2 / domain_name / "tasks.json").read_text(encoding="utf-8"))
        splits = json.loads((tau2 / domain_name / "split_tasks.json").read_text(encoding="utf-8"))
        split_of = {task_id: split for split in ("train", "test") for task_id in splits.get(split, [])}
        for task in tasks:
            instructions = task["user_scenario"]["instructions"]
            request = instructions.get("reason_for_call", "") if isinstance(instructions, dict) else instructions
            yield BenchmarkItem(
                id=f"{domain_name}-{task['id']}",
                question=str(request).strip(),
                gold=str(task["id"]),
                verifier="environment",
                metadata={
                    "domain": domain_name,
                    "task_id": str(task["id"]),
                    "split": split_of.get(task["id"], ""),
                    "tau2_dir": str(tau2),
                },
            )

    return read


# ---------------------------------------------------------------------------------------------- registry

BENCHMARKS: dict[str, Benchmark] = {}


def register_benchmark(benchmark: Benchmark) -> None:
    """Make ``benchmark`` available by name (later registrations replace earlier ones)."""
    BENCHMARKS[benchmark.name] = benchmark


def get_benchmark(name: str) -> Benchmark:
    """The benchmark called ``name``; ``tau2_<domain>`` names any tau2-format domain under the data directory's
    ``tau2/`` folder (a synthesized one, say)."""
    if name not in BENCHMARKS and name.startswith("tau2_") and len(name) > len("tau2_"):
        domain = name.removeprefix("tau2_")
        return Benchmark(name, "environment", f"tau2-format domain {domain}", _tau2_reader(domain))
    if name not in BENCHMARKS:
        raise BenchmarkError(f"unknown benchmark {name!r}; known: {', '.join(sorted(BENCHMARKS))}")
    return BENCHMARKS[name]


def _math(name: str, file: str, description: str, hub: HubSource) -> Benchmark:
    convert = math_items(name)
    return Benchmark(name, "math", description, _jsonl_reader(f"math/{file}", convert), hub, convert)


for _benchmark in (
    _math("aime24", "aime24.jsonl", "AIME 2024, 30 problems", HubSource("HuggingFaceH4/aime_2024", None, "train")),
    _math("aime25", "aime25.jsonl", "AIME 2025, 30 problems", HubSource("math-ai/aime25", None, "test")),
    _math("amc23", "amc23.jsonl", "AMC 2023, 40 problems", HubSource("math-ai/amc23", None, "test")),
    _math("math500", "math500.jsonl", "MATH-500", HubSource("HuggingFaceH4/MATH-500", None, "test")),
    Benchmark(
        "gsm8k",
        "math",
        "GSM8K test, 1319 problems",
        _jsonl_reader("math/gsm8k_test.jsonl", gsm8k_items),
        HubSource("openai/gsm8k", "main", "test"),
        gsm8k_items,
    ),
    Benchmark(
        "humaneval",
        "code",
        "HumanEval, 164 functions",
        _jsonl_reader("code/humaneval.jsonl", humaneval_items),
        HubSource("openai/openai_humaneval", None, "test"),
        humaneval_items,
    ),
    Benchmark(
        "mbpp",
        "code",
        "MBPP test split (task ids 11-510)",
        _jsonl_reader("code/mbpp.jsonl", mbpp_items),
        HubSource("google-research-datasets/mbpp", "full", "test"),
        mbpp_items,
    ),
    Benchmark(
        "mmlu_pro",
        "multiple_choice",
        "MMLU-Pro 300-question sample (hub: the full test set)",
        _jsonl_reader("mc/mmlu_pro_300.jsonl", mmlu_pro_items),
        HubSource("TIGER-Lab/MMLU-Pro", None, "test"),
        mmlu_pro_items,
    ),
    Benchmark(
        "gpqa_diamond",
        "multiple_choice",
        "GPQA diamond, 198 questions, seeded option order",
        lambda directory: gpqa_items(gpqa_rows(directory, "diamond")),
        HubSource("Idavidrein/gpqa", "gpqa_diamond", "train"),
        gpqa_items,
    ),
    Benchmark(
        "gpqa_main",
        "multiple_choice",
        "GPQA main, 448 questions, seeded option order",
        lambda directory: gpqa_items(gpqa_rows(directory, "main")),
        HubSource("Idavidrein/gpqa", "gpqa_main", "train"),
        gpqa_items,
    ),
    Benchmark(
        "frames",
        "qa",
        "FRAMES, 824 multi-hop questions",
        _jsonl_reader("qa/frames.jsonl", qa_items("frames")),
        HubSource("google/frames-benchmark", None, "test", {"Prompt": "question", "Answer": "answer"}),
        qa_items("frames"),
    ),
    Benchmark(
        "hotpotqa",
        "qa",
        "HotpotQA dev distractor, first 100 questions",
        _read_hotpot,
        HubSource("hotpotqa/hotpot_qa", "distractor", "validation"),
        qa_items("hotpotqa"),
    ),
    Benchmark("tau2_airline", "environment", "tau2-bench airline, 50 tasks", _tau2_reader("airline")),
    Benchmark("tau2_retail", "environment", "tau2-bench retail, 114 tasks", _tau2_reader("retail")),
):
    register_benchmark(_benchmark)

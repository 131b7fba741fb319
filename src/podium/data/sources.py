"""Where a stage's items come from: a Podium benchmark, a tasks file (the RL task format), or ``podium eval``
results (their items rebuilt from the recorded attempts); and the questions to leave out (a held-out set)."""

from dataclasses import dataclass
from pathlib import Path

from pydantic import Field

from podium.data.store import DataError
from podium.datasets.benchmark import BenchmarkError
from podium.datasets.items import BenchmarkItem
from podium.datasets.loaders import get_benchmark
from podium.datasets.selection import ItemSelection
from podium.solve.jsonl import RecordError, read_jsonl, read_tasks


class ItemSource(ItemSelection):
    """The items of a stage: a benchmark or a tasks file."""

    exclude: list[str] = Field(default_factory=list)
    """Files whose questions are left out (tasks or data rows), e.g. the RL set when collecting SFT data."""


@dataclass(frozen=True)
class SourcedItem:
    """An item and the name of its source (for provenance)."""

    item: BenchmarkItem
    source: str


def load_items(source: ItemSource) -> list[SourcedItem]:
    """The items ``source`` names, less excluded questions, cut to ``limit``."""
    try:
        if source.benchmark is not None:
            name = source.benchmark
            items = get_benchmark(name).items(data_dir=source.data_dir)
        elif source.tasks is not None:
            name = Path(source.tasks).stem
            items = read_tasks(source.tasks)
        else:
            return []
        excluded = excluded_questions(source.exclude)
    except (BenchmarkError, RecordError) as error:
        raise DataError(str(error)) from error
    kept = [SourcedItem(item, name) for item in items if item.question not in excluded]
    return kept[: source.limit] if source.limit else kept


def excluded_questions(paths: list[str]) -> set[str]:
    """The ``question`` of every row of the given JSONL files."""
    questions: set[str] = set()
    for path in paths:
        for _, row in read_jsonl(path):
            if isinstance(row.get("question"), str):
                questions.add(row["question"])
    return questions


def unique_ids(items: list[SourcedItem]) -> list[SourcedItem]:
    """Refuse items whose ids repeat: work logs and outputs are keyed by them."""
    seen: set[str] = set()
    for entry in items:
        if entry.item.id in seen:
            raise DataError(f"item id {entry.item.id!r} appears twice in {entry.source}")
        seen.add(entry.item.id)
    return items

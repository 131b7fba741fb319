"""A benchmark: a named source of evaluation items (question, gold, which verifier judges them).

Each benchmark reads its local file under the shared data directory (``$PODIUM_DATA``, else
``$PODIUM_DATA_DIR``, else ``../shared/data`` beside the repository) or, with ``source="hub"``, the public
dataset through the optional ``datasets`` library. Both go through the same row converter, so an item looks the
same whichever way it was loaded. The benchmarks themselves live in ``podium.datasets.families``, one module a
family; ``podium.datasets.loaders`` registers them by name.
"""

import json
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from podium.core.answers import VerifierKind
from podium.datasets.items import BenchmarkItem
from podium.errors import MissingExtraError, PodiumError

DATA_ENV_VARS = ("PODIUM_DATA", "PODIUM_DATA_DIR")
"""Environment variables naming the shared data directory, first set wins (retrieval reads the second)."""
DEFAULT_DATA_DIR = Path(__file__).resolve().parents[3].parent / "shared" / "data"
"""``../shared/data`` relative to the repository root."""


class BenchmarkError(PodiumError):
    """A benchmark is unknown or its data cannot be read."""


RowConverter = Callable[[Iterable[dict[str, Any]]], Iterator[BenchmarkItem]]
LocalReader = Callable[[Path], Iterator[BenchmarkItem]]


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
    read_local: LocalReader
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


def jsonl_rows(path: Path) -> Iterator[dict[str, Any]]:
    """The objects of a JSON Lines file, blank lines skipped."""
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                yield json.loads(line)


def jsonl_benchmark(
    name: str, verifier: VerifierKind, description: str, relative: str, convert: RowConverter, hub: HubSource
) -> Benchmark:
    """A benchmark whose local copy is the JSON Lines file ``relative`` to the data directory; its hub rows go
    through the same converter."""
    return Benchmark(
        name, verifier, description, lambda directory: convert(jsonl_rows(directory / relative)), hub, convert
    )


def keyed_items(
    prefix: str,
    verifier: VerifierKind,
    question: Callable[[dict[str, Any]], str],
    gold: Callable[[dict[str, Any]], str],
    id_fields: tuple[str, ...],
    metadata_fields: tuple[str, ...],
) -> RowConverter:
    """Rows known by their own id, the first of ``id_fields`` they have (0 is an id), else by their 0-based position
    in the file; the ``metadata_fields`` a row has travel in the item's metadata."""

    def convert(rows: Iterable[dict[str, Any]]) -> Iterator[BenchmarkItem]:
        for index, row in enumerate(rows):
            key = next((row[name] for name in id_fields if row.get(name) is not None), index)
            yield BenchmarkItem(
                id=f"{prefix}-{key}",
                question=question(row),
                gold=gold(row),
                verifier=verifier,
                metadata={name: row[name] for name in metadata_fields if row.get(name) is not None},
            )

    return convert

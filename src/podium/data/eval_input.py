"""``podium eval`` results as data: each graded attempt becomes a data row, its provenance read from the run's
manifest where the trajectory does not carry it."""

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from podium.data.provenance import podium_version, short_hash
from podium.data.store import DataError
from podium.datasets.benchmark import BenchmarkError
from podium.datasets.loaders import get_benchmark
from podium.solve.jsonl import RecordError, read_jsonl
from podium.solve.records import DataRow, GradedTrajectory, Provenance, read_graded

RESULTS_FILE = "results.jsonl"
MANIFEST_FILE = "manifest.json"


def _system_config(results: Path) -> dict[str, Any]:
    manifest = results.parent / MANIFEST_FILE
    if not manifest.exists():
        return {}
    try:
        return dict(json.loads(manifest.read_text(encoding="utf-8")).get("system_config") or {})
    except (ValueError, AttributeError):
        return {}


def _verifier(benchmark: str) -> str:
    try:
        return get_benchmark(benchmark).verifier
    except BenchmarkError:
        return "unknown"


def row_from_graded(record: GradedTrajectory, stage: str, system_config: dict[str, Any]) -> DataRow:
    """A graded attempt as a data row of ``stage``."""
    metadata = record.trajectory.metadata
    pool = system_config.get("pool")
    provenance = Provenance(
        stage=stage,
        source=record.benchmark,
        item_id=record.item_id,
        model=metadata.get("orchestrator"),
        solver=record.system,
        temperature=system_config.get("temperature"),
        seed=metadata.get("seed"),
        policy=metadata.get("policy"),
        pool_hash=short_hash(pool) if pool is not None else None,
        podium_version=podium_version(),
        system_version=metadata.get("system_version"),
    )
    return DataRow(
        id=f"{stage}:{record.benchmark}:{record.item_id}:{record.sample}",
        item_id=record.item_id,
        benchmark=record.benchmark,
        question=record.trajectory.question,
        gold=record.gold,
        verifier=_verifier(record.benchmark),
        sample=record.sample,
        answer=record.answer,
        correct=record.verdict.correct,
        score=record.verdict.score,
        reason=record.error or record.verdict.reason or record.verdict.error or "",
        messages=list(record.trajectory.messages),
        trajectory=record.trajectory,
        provenance=provenance,
    )


def rows_from_eval(path: str | Path, stage: str) -> list[DataRow]:
    """The attempts of a run directory (or its results file) as data rows."""
    path = Path(path)
    results = path / RESULTS_FILE if path.is_dir() else path
    if not results.exists():
        raise DataError(f"{path} is neither a `podium eval` run directory nor a results file")
    records, dropped = read_graded(results)
    if not records:
        raise DataError(f"{results} holds no graded trajectory ({dropped} unreadable line(s))")
    system_config = _system_config(results)
    return [row_from_graded(record, stage, system_config) for record in records]


def read_rows(path: str | Path, stage: str) -> list[DataRow]:
    """Graded attempts from a run directory, a results file or a data-row file (``failures.jsonl``…)."""
    path = Path(path)
    if path.is_dir():
        return rows_from_eval(path, stage)
    rows: list[DataRow] = []
    system_config = _system_config(path)
    try:
        lines = list(read_jsonl(path))
    except RecordError as error:
        raise DataError(str(error)) from error
    for number, value in lines:
        try:
            if "verdict" in value:
                rows.append(row_from_graded(GradedTrajectory.model_validate(value), stage, system_config))
            else:
                rows.append(DataRow.model_validate(value))
        except ValidationError as error:
            raise DataError(f"{path}:{number} is neither a graded trajectory nor a data row: {error}") from error
    return rows

"""A stage's output directory: its manifest (a resume must match it), work logs (:class:`~podium.solve.jsonl.
JsonlLog`: one JSON line per finished unit, appended and synced as units finish, so a killed run keeps everything
it finished) and its outputs, rewritten whole and atomically from the work logs at the end of each invocation."""

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from podium.core.files import write_atomically
from podium.core.record import Record
from podium.errors import PodiumError

STAGE_FILE = "stage.json"
"""The manifest of a stage directory."""


class DataError(PodiumError):
    """A data stage cannot start, resume or read its input; the message says why."""


class StageManifest(Record):
    """What a stage directory holds; a resume must match it."""

    stage: str
    """The stage that wrote the directory."""
    settings: dict[str, Any]
    """The stage's configuration, less the settings that may change between invocations."""


def check_stage(out: Path, stage: str, settings: dict[str, Any]) -> None:
    """Save the manifest of a new stage directory, or refuse to resume one made with other settings. A directory
    holding nothing but its manifest (a run that failed before its first unit) is taken over as new."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / STAGE_FILE
    current = StageManifest(stage=stage, settings=json.loads(json.dumps(settings, default=str)))
    if not path.exists() or not holds_work(out):
        write_atomically(path, current.model_dump_json(indent=2) + "\n")
        return
    try:
        saved = StageManifest.model_validate_json(path.read_text(encoding="utf-8"))
    except ValidationError as error:
        raise DataError(f"{path} is not a stage manifest: {error}") from error
    if saved.stage != stage:
        raise DataError(f"{out} holds a '{saved.stage}' stage, not '{stage}'; use another --out")
    changed = sorted(
        name
        for name in set(saved.settings) | set(current.settings)
        if saved.settings.get(name) != current.settings.get(name)
    )
    if changed:
        details = "; ".join(
            f"{name}: was {saved.settings.get(name)!r}, now {current.settings.get(name)!r}" for name in changed
        )
        raise DataError(f"{out} holds a run with other settings ({details}); use another --out to start anew")


def holds_work(out: Path) -> bool:
    """Whether a stage directory holds anything besides its manifest: a work log, an output, a funnel."""
    return any(entry.is_file() and entry.stat().st_size for entry in out.rglob("*") if entry.name != STAGE_FILE)

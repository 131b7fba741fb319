"""The RL tasks: questions with a gold answer and the verifier that judges it (Podium's benchmark items)."""

import json
from pathlib import Path

from pydantic import ValidationError

from podium.datasets.items import BenchmarkItem
from podium.datasets.loaders import get_benchmark
from podium.errors import ConfigError
from podium.train.config import GRPOConfig
from podium.train.samples import TrainingDataError


def load_tasks(config: GRPOConfig) -> list[BenchmarkItem]:
    """The RL questions: a JSONL of tasks or a benchmark, cut to ``limit``."""
    if config.benchmark is not None:
        items = get_benchmark(config.benchmark).items()
    else:
        items = []
        path = Path(str(config.tasks))
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except OSError as error:
            raise ConfigError(f"cannot read tasks {path}: {error.strerror}") from error
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                items.append(BenchmarkItem.model_validate({"id": f"{path.stem}-{number}", **row}))
            except (ValueError, ValidationError) as error:
                raise TrainingDataError(f"{path}:{number} is not a task: {error}") from error
    items = items[: config.limit] if config.limit else items
    if not items:
        raise TrainingDataError("no task to train on")
    return items

"""The RL tasks: questions with a gold answer and the verifier that judges it (Podium's benchmark items)."""

from podium.datasets.items import BenchmarkItem
from podium.datasets.loaders import get_benchmark
from podium.solve.jsonl import read_tasks
from podium.train.config import GRPOConfig
from podium.train.samples import TrainingDataError


def load_tasks(config: GRPOConfig) -> list[BenchmarkItem]:
    """The RL questions: a JSONL of tasks (:func:`~podium.solve.jsonl.read_tasks`) or a benchmark, cut to
    ``limit``."""
    items = get_benchmark(config.benchmark).items() if config.benchmark is not None else read_tasks(str(config.tasks))
    items = items[: config.limit] if config.limit else items
    if not items:
        raise TrainingDataError("no task to train on")
    return items

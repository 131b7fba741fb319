"""The training stages of an arm, on ``podium eval`` and ``podium train`` machinery: a teacher run on the training
items (its trajectories become SFT data), SFT, GRPO on the training items, and the evaluation system that puts the
trained checkpoint in the orchestrator's seat. A finished stage leaves a record beside its output and is skipped
when the experiment is run again."""

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from podium.core.trajectory import write_trajectories
from podium.datasets.benchmark import Benchmark
from podium.datasets.items import BenchmarkItem
from podium.errors import ConfigError
from podium.evaluate.runner import load_run, run_eval
from podium.evaluate.system_config import build_system, system_config_from_dict
from podium.experiments.config import Arm, Experiment, TrainingConfig
from podium.pool.config import WorkerConfig
from podium.solve.config import SystemConfig
from podium.train.sft import TrainResult, run_sft

TRAINED_WORKER = "trained"
"""The trained checkpoint's worker name in the evaluation pool."""
Say = Callable[[str], None]


@dataclass(frozen=True)
class StageRecord:
    """What a finished training stage left: where the model went, its steps, its last logged values, and the
    config it was trained with (a rerun with another config is refused rather than reusing the model)."""

    stage: str
    path: str
    steps: int
    last: dict[str, float]
    config: dict[str, Any]

    @classmethod
    def of(cls, stage: str, result: TrainResult, config: dict[str, Any]) -> "StageRecord":
        logged = [entry for entry in result.log if "loss" in entry or "reward" in entry]
        last = {k: float(v) for k, v in (logged[-1] if logged else {}).items() if isinstance(v, int | float)}
        return cls(stage, str(result.path), result.steps, last, config)


def train_arm(
    experiment: Experiment, arm: Arm, split: tuple[Benchmark, list[BenchmarkItem]], directory: Path, say: Say
) -> list[StageRecord]:
    """Run the arm's training stages on the training ``split`` in ``directory`` (teacher, SFT, GRPO; each skipped
    if already done)."""
    training = arm.training
    assert training is not None
    benchmark, train_items = split
    directory.mkdir(parents=True, exist_ok=True)
    records: list[StageRecord] = []
    trajectories = None
    if training.teacher is not None:
        teacher = training.teacher.system or arm.system
        trajectories = [str(teach(experiment, training, {**teacher, "name": "teacher"}, benchmark, directory, say))]
    if training.sft is not None:
        sft = training.sft_config(str(directory / "sft"), trajectories)
        records.append(_stage("sft", directory, say, sft.model_dump(mode="json"), lambda: run_sft(sft)))
    if training.grpo is not None:
        from podium.train.grpo import run_grpo  # subclasses TRL's trainer at import: only when GRPO runs

        tasks = directory / "tasks.jsonl"
        tasks.write_text("".join(item.model_dump_json() + "\n" for item in train_items), encoding="utf-8")
        start = records[-1].path if records else None
        grpo = training.grpo_config(str(directory / "grpo"), str(tasks), start)
        records.append(_stage("grpo", directory, say, grpo.model_dump(mode="json"), lambda: run_grpo(grpo)))
    return records


def _stage(
    stage: str, directory: Path, say: Say, config: dict[str, Any], run: Callable[[], TrainResult]
) -> StageRecord:
    done = directory / f"{stage}.done.json"
    if done.exists():
        record = StageRecord(**json.loads(done.read_text(encoding="utf-8")))
        if record.config != config:
            raise ConfigError(f"{done} was trained with another {stage} config; use another --out for a new run")
        say(f"{stage}: done earlier ({done})")
        return record
    say(f"{stage}: training…")
    record = StageRecord.of(stage, run(), config)
    done.write_text(json.dumps(vars(record), indent=2) + "\n", encoding="utf-8")
    say(f"{stage}: {record.steps} steps → {record.path}")
    return record


def teach(
    experiment: Experiment,
    training: TrainingConfig,
    teacher: dict[str, Any],
    benchmark: Benchmark,
    directory: Path,
    say: Say,
) -> Path:
    """Run the ``teacher`` system on the training items and write the trajectories it keeps as SFT data."""
    assert training.teacher is not None
    out = directory / "teacher"
    say(f"teacher: solving {experiment.settings.train_items} training items…")
    asyncio.run(
        run_eval(
            benchmark,
            build_system(system_config_from_dict(teacher, source="teacher system")),
            out=out,
            system_config=teacher,
            concurrency=experiment.settings.concurrency,
            progress=False,
        )
    )
    _, records = load_run(out)
    keep = training.teacher.keep
    failed = [r for r in records if r.error is not None]
    if records and len(failed) == len(records):
        raise ConfigError(f"the teacher failed on every training item (see {out}): {failed[0].error}")
    # A failed episode has no orchestrator turn to imitate, whatever ``keep`` says.
    kept = [
        r.trajectory
        for r in records
        if r.error is None
        and (
            keep == "all" or (keep == "answered" and r.answer is not None) or (keep == "correct" and r.verdict.correct)
        )
    ]
    say(f"teacher: kept {len(kept)} of {len(records)} trajectories ({keep}; {len(failed)} failed)")
    if not kept:
        looser = {"correct": "answered or all", "answered": "all"}.get(keep, "a stronger teacher")
        raise ConfigError(f"the teacher left no {keep} trajectory to fine-tune on (see {out}); try keep: {looser}")
    path = directory / "sft-data.jsonl"
    write_trajectories(path, kept, append=False)  # a rerun rewrites it, never doubles it
    return path


def trained_system(system: dict[str, Any], checkpoint: str, arm: str) -> dict[str, Any]:
    """The arm's evaluation system: its pool with the checkpoint as a free local worker in the orchestrator's seat,
    not offered as a tool; roles keep the pool's role worker."""
    pool = SystemConfig(pool=system.get("pool")).pool_config()
    worker = WorkerConfig(
        name=TRAINED_WORKER,
        backend="local",
        model=f"{arm}-checkpoint",
        path=checkpoint,
        price={"input_per_mtok": 0.0, "output_per_mtok": 0.0},
        primitives=[],
    )
    role_worker = pool.role_worker or pool.workers[0].name
    pool = pool.model_copy(update={"workers": [worker, *pool.workers], "role_worker": role_worker})
    deny = [*system.get("deny", []), TRAINED_WORKER]
    return {**system, "pool": pool.model_dump(mode="json"), "orchestrator": TRAINED_WORKER, "deny": deny}

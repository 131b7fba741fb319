"""``podium train sft``: supervised fine-tuning on trajectories with TRL's SFTTrainer, the loss restricted to the
tokens the orchestrator generated (the labels are -100 everywhere else)."""

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from podium.core.trajectory import Trajectory
from podium.errors import ConfigError
from podium.extras import require_extra
from podium.solve.jsonl import RecordError
from podium.solve.records import read_trajectory_lines
from podium.train.config import LoraConfig, SFTConfig
from podium.train.model import load_model, resolve_device, trainer_arguments
from podium.train.samples import ChatFormat, TrainingDataError, trajectory_samples

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrainResult:
    """Where the trained model went and how training went."""

    path: Path
    """Directory of the final model and tokenizer."""
    steps: int
    """Optimiser steps taken."""
    log: list[dict[str, Any]]
    """The trainer's log history (loss, learning rate… per logging step)."""


def load_trajectories(paths: Sequence[str]) -> list[Trajectory]:
    """Every trajectory of the JSONL files, with errors naming the file. A line may be a bare trajectory, a graded
    trajectory (``podium eval`` results) or a data row (``podium data collect`` / ``curriculum`` output); a graded
    line trains only when its verdict was correct and its system did not fail, or when its stage kept it though
    wrong (``--keep-wrong``). The lines left out are counted in a warning per file, and a set with nothing left to
    train on is an error naming the files."""
    trajectories: list[Trajectory] = []
    left_out: list[str] = []
    for path in paths:
        if not Path(path).is_file():
            raise ConfigError(f"cannot read trajectories {path}: no such file")
        try:
            lines = list(read_trajectory_lines(path))
        except RecordError as error:
            raise TrainingDataError(f"{path} holds a line that is not a trajectory: {error}") from error
        trainable = [
            line.trajectory for line in lines if line.error is None and (line.correct is not False or line.kept_wrong)
        ]
        failed = sum(line.error is not None for line in lines)
        wrong = len(lines) - len(trainable) - failed
        if wrong or failed:
            left_out.append(f"{path}: {wrong} wrong and {failed} failed of {len(lines)} lines left out")
            log.warning("%s", f"{left_out[-1]} (a graded line trains when correct, or when kept by --keep-wrong)")
        trajectories.extend(trainable)
    if not trajectories:
        detail = "; ".join(left_out) or f"{', '.join(paths) or 'no file'}: no lines"
        raise TrainingDataError(f"no trajectory to train on: {detail}")
    return trajectories


def sft_rows(
    trajectories: Iterable[Trajectory],
    chat: ChatFormat,
    *,
    max_length: int,
    answered_only: bool = False,
    decisions: bool = False,
) -> list[dict[str, list[int]]]:
    """Pre-tokenized rows (``input_ids``, ``labels``) for TRL; a sample cut to ``max_length`` keeps its start and is
    dropped when nothing generated survives the cut; with ``decisions`` only decision tokens are labelled."""
    rows = []
    cut_out = 0
    for trajectory in trajectories:
        if answered_only and trajectory.answer is None:
            continue
        for sample in trajectory_samples(trajectory, chat, decisions=decisions):
            labels = sample.labels[:max_length]
            if any(label != -100 for label in labels):
                rows.append({"input_ids": sample.input_ids[:max_length], "labels": labels})
            elif any(label != -100 for label in sample.labels):
                cut_out += 1
    if cut_out:
        log.warning("%s", f"left out {cut_out} sample(s): max_length {max_length} cuts every token they train on")
    return rows


def sft_trainer(config: SFTConfig, *, model: Any = None, tokenizer: Any = None) -> Any:
    """TRL's SFTTrainer on the trajectories' pre-tokenized rows, ``config.model`` or the given in-memory one."""
    trl = require_extra("train", "trl")
    datasets = require_extra("train", "datasets")
    datasets.disable_progress_bars()
    trajectories = load_trajectories(config.trajectories)  # before the model: bad data fails fast
    device = resolve_device(config.device)
    if model is None or tokenizer is None:
        model, tokenizer = load_model(config.model, device)
    rows = sft_rows(
        trajectories,
        ChatFormat(tokenizer),
        max_length=config.max_length,
        answered_only=config.answered_only,
        decisions=config.loss_tokens == "decisions",
    )
    if not rows:
        raise TrainingDataError(
            f"no trajectory has an orchestrator token to train on (loss_tokens: {config.loss_tokens})"
        )
    arguments = trl.SFTConfig(
        **trainer_arguments(config, device),
        num_train_epochs=config.epochs,
        max_length=config.max_length,
        packing=config.packing,
    )
    trainer_class = trl.SFTTrainer
    if config.loss_tokens == "decisions":
        from podium.train.decision_loss import DecisionLossSFTTrainer

        trainer_class = DecisionLossSFTTrainer
    return trainer_class(
        model=model,
        args=arguments,
        train_dataset=datasets.Dataset.from_list(rows),
        processing_class=tokenizer,
        peft_config=_peft_config(config.lora) if config.lora else None,
    )


def _peft_config(lora: LoraConfig) -> Any:
    peft = require_extra("train", "peft")
    return peft.LoraConfig(
        r=lora.rank,
        lora_alpha=lora.alpha,
        lora_dropout=lora.dropout,
        target_modules=lora.target_modules,
        layers_to_transform=lora.layers,
        task_type="CAUSAL_LM",
    )


def run_sft(config: SFTConfig, *, model: Any = None, tokenizer: Any = None) -> TrainResult:
    """Fine-tune and save the result in ``config.output_dir``: the model and tokenizer, or only the LoRA
    adapter."""
    trainer = sft_trainer(config, model=model, tokenizer=tokenizer)
    trainer.train()
    tokenizer = trainer.processing_class
    output = Path(config.output_dir)
    if config.lora is None:
        trainer.save_model(str(output))
        tokenizer.save_pretrained(str(output))
    else:  # only the adapter: it is loaded over its base model, with the base's tokenizer
        trainer.model.save_pretrained(str(output))
    return TrainResult(output, trainer.state.global_step, list(trainer.state.log_history))

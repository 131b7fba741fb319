"""``podium train sft``: supervised fine-tuning on trajectories with TRL's SFTTrainer, the loss restricted to the
tokens the orchestrator generated (the labels are -100 everywhere else)."""

from collections.abc import Iterable
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


@dataclass(frozen=True)
class TrainResult:
    """Where the trained model went and how training went."""

    path: Path
    """Directory of the final model and tokenizer."""
    steps: int
    """Optimiser steps taken."""
    log: list[dict[str, Any]]
    """The trainer's log history (loss, learning rate… per logging step)."""


def load_trajectories(paths: Iterable[str]) -> list[Trajectory]:
    """Every trajectory of the JSONL files, with errors naming the file. A line may be a bare trajectory, a graded
    trajectory (``podium eval`` results) or a data row (``podium data collect`` / ``curriculum`` output); a graded
    line trains only when its verdict was correct and its system did not fail, or when its stage kept it though
    wrong (``--keep-wrong``)."""
    trajectories: list[Trajectory] = []
    for path in paths:
        if not Path(path).is_file():
            raise ConfigError(f"cannot read trajectories {path}: no such file")
        try:
            lines = list(read_trajectory_lines(path))
        except RecordError as error:
            raise TrainingDataError(f"{path} holds a line that is not a trajectory: {error}") from error
        trainable = [line for line in lines if (line.correct is not False or line.kept_wrong) and line.error is None]
        trajectories.extend(line.trajectory for line in trainable)
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
    for trajectory in trajectories:
        if answered_only and trajectory.answer is None:
            continue
        for sample in trajectory_samples(trajectory, chat, decisions=decisions):
            labels = sample.labels[:max_length]
            if any(label != -100 for label in labels):
                rows.append({"input_ids": sample.input_ids[:max_length], "labels": labels})
    return rows


def sft_trainer(config: SFTConfig, *, model: Any = None, tokenizer: Any = None) -> Any:
    """TRL's SFTTrainer on the trajectories' pre-tokenized rows, ``config.model`` or the given in-memory one."""
    trl = require_extra("train", "trl")
    datasets = require_extra("train", "datasets")
    datasets.disable_progress_bars()
    device = resolve_device(config.device)
    if model is None or tokenizer is None:
        model, tokenizer = load_model(config.model, device)
    rows = sft_rows(
        load_trajectories(config.trajectories),
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

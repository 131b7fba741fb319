"""Training: the forward and backward pass of the losses with ``loss_tokens: decisions`` — Podium's decision losses (the
LM head only at the decision positions) against TRL's fused losses (every position on a CPU) — on the same model, the
same batches, in the same run:

- SFT: the claim's SFT config on its collected trajectories, or, where ``make claim`` has not collected them yet, on
  trajectories this benchmark collects the same way from the first 200 train questions;
- GRPO: the claim's GRPO config from the committed SFT adapter, on the mini-batches of its first step (the executor's
  rollouts of four train questions, every path of each).

    python benchmarks/bench_train.py [--sft experiments/claim/sft.yaml] [--grpo experiments/claim/grpo.yaml]
        [--batches 16] [--only sft|grpo]
"""

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trl

from podium.train.config import GRPOConfig, SFTConfig
from podium.train.decision_loss import grpo_decision_loss
from podium.train.grpo import grpo_trainer
from podium.train.sft import sft_trainer


def timed_losses(
    trainer: Any, loss: Callable[..., Any], batches: list[dict[str, Any]]
) -> tuple[list[float], list[float]]:
    """Seconds of each batch's loss and backward pass, and the losses."""
    seconds, losses = [], []
    for batch in batches:
        trainer.model.zero_grad()
        started = time.perf_counter()
        value = loss(trainer, trainer.model, dict(batch))
        value.backward()
        seconds.append(time.perf_counter() - started)
        losses.append(value.item())
    return seconds, losses


def podium_command() -> str:
    return str(Path(sys.executable).with_name("podium"))


def collect(directory: Path) -> str:
    """The claim's oracle trajectories on the first 200 train questions, collected through Podium's CLI."""
    tasks, out = directory / "train.jsonl", directory / "collect"
    subprocess.run([podium_command(), "routing", "tasks", "--split", "train", "--limit", "200", "--out", str(tasks)],
                   check=True)  # fmt: skip
    claim = Path("experiments/claim")
    command = [podium_command(), "data", "collect", "--config", str(claim / "collect.yaml"), "--teacher"]
    command += [str(claim / "teacher.yaml"), "--tasks", str(tasks), "--out", str(out), "--quiet"]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return str(out / "sft.jsonl")


def compare(label: str, trainer: Any, theirs: Callable[..., Any], ours: Callable[..., Any],
            batches: list[dict[str, Any]]) -> None:  # fmt: skip
    """Time TRL's loss and ours on ``batches`` (each warmed once first) and print the speed-up and the largest
    relative difference of the losses."""
    for loss in (theirs, ours):  # warm both paths' kernels and caches
        timed_losses(trainer, loss, batches[:1])
    trl_seconds, trl_losses = timed_losses(trainer, theirs, batches)
    our_seconds, our_losses = timed_losses(trainer, ours, batches)
    for name, seconds in (("TRL's fused loss", trl_seconds), ("decision loss", our_seconds)):
        print(
            f"{label} {name:<18}{statistics.mean(seconds):8.3f} s per batch (median {statistics.median(seconds):.3f} s)"
        )
    print(f"{label} speed-up {sum(trl_seconds) / sum(our_seconds):.2f}×")
    gaps = [abs(a - b) for a, b in zip(our_losses, trl_losses, strict=True)]
    scale = max(max(abs(value) for value in trl_losses), 1e-12)
    print(f"{label} largest loss difference {max(gaps):.1e} (relative to the largest loss {max(gaps) / scale:.1e})")


def bench_sft(path: str, count: int) -> None:
    # On a CPU: where TRL's head runs Triton kernels (GPUs) it already skips the unlabelled positions.
    config = SFTConfig.from_file(path).model_copy(update={"loss_tokens": "decisions", "device": "cpu"})
    with tempfile.TemporaryDirectory() as directory:
        if not all(Path(path).is_file() for path in config.trajectories):
            config = config.model_copy(update={"trajectories": [collect(Path(directory))]})
        trainer = sft_trainer(config)
    trainer.model.train()
    batches = [batch for batch, _ in zip(trainer.get_train_dataloader(), range(count), strict=False)]
    tokens = sum(int(batch["input_ids"].numel()) for batch in batches)
    labelled = sum(int((batch["labels"] != -100).sum()) for batch in batches)
    print(f"SFT: {len(batches)} batches, {tokens} tokens, {labelled} of them labelled ({type(trainer).__name__})")
    compare("SFT", trainer, trl.SFTTrainer.compute_loss, type(trainer).compute_loss, batches)


def bench_grpo(path: str, count: int) -> None:
    config = GRPOConfig.from_file(path)
    with tempfile.TemporaryDirectory() as directory:
        tasks = Path(directory) / "train.jsonl"
        if not Path(config.tasks).is_file():
            command = [podium_command(), "routing", "tasks", "--split", "train", "--limit", "8", "--out", str(tasks)]
            subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
            config = config.model_copy(update={"tasks": str(tasks)})
        config = config.model_copy(update={"loss_tokens": "decisions", "device": "cpu", "max_steps": 1,
                                           "output_dir": directory, "curves": False})  # fmt: skip
        trainer = grpo_trainer(config)
        batches: list[dict[str, Any]] = []
        loss = trainer.compute_loss

        def keep(model: Any, inputs: dict[str, Any], *rest: Any, **options: Any) -> Any:
            batches.append(trainer.loss_inputs(dict(inputs)))
            return loss(model, inputs, *rest, **options)

        trainer.compute_loss = keep
        trainer.train()  # one step: the executor's rollouts, then TRL's mini-batches of them
        del trainer.compute_loss
    batches = batches[:count]
    tokens = sum(int(b["prompt_ids"].numel() + b["completion_ids"].numel()) for b in batches)
    kept = sum(int((b["completion_mask"] * b["tool_mask"]).sum()) for b in batches)
    print(f"GRPO: {len(batches)} mini-batches, {tokens} tokens, {kept} of them decisions in the loss")
    trainer.model.train()
    compare(
        "GRPO",
        trainer,
        lambda self, model, inputs: trl.GRPOTrainer.compute_loss(self, model, inputs),
        lambda self, model, inputs: grpo_decision_loss(self, model, inputs, {}),
        batches,
    )


def positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value}: give at least one batch")
    return value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sft", default="experiments/claim/sft.yaml", help="the SFT config")
    parser.add_argument("--grpo", default="experiments/claim/grpo.yaml", help="the GRPO config")
    parser.add_argument("--batches", type=positive, default=16)
    parser.add_argument("--only", choices=("sft", "grpo"), help="one of the two (default: both)")
    args = parser.parse_args()
    if args.only != "grpo":
        bench_sft(args.sft, args.batches)
    if args.only != "sft":
        bench_grpo(args.grpo, args.batches)


if __name__ == "__main__":
    main()

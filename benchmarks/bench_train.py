"""Training: the forward and backward pass of SFT's loss with ``loss_tokens: decisions`` — Podium's decision loss (the
LM head only at the labelled positions) against TRL's fused loss (every position on a CPU) — on the same model, the
same batches, in the same run: the claim's SFT config on its collected trajectories, or, where ``make claim`` has not
collected them yet, on trajectories this benchmark collects the same way from the first 200 train questions.

    python benchmarks/bench_train.py [--config experiments/claim/sft.yaml] [--batches 16]
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

from podium.train.config import SFTConfig
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


def collect(directory: Path) -> str:
    """The claim's oracle trajectories on the first 200 train questions, collected through Podium's CLI."""
    podium = str(Path(sys.executable).with_name("podium"))
    tasks, out = directory / "train.jsonl", directory / "collect"
    subprocess.run([podium, "routing", "tasks", "--split", "train", "--limit", "200", "--out", str(tasks)], check=True)
    claim = Path("experiments/claim")
    command = [podium, "data", "collect", "--config", str(claim / "collect.yaml"), "--teacher"]
    command += [str(claim / "teacher.yaml"), "--tasks", str(tasks), "--out", str(out), "--quiet"]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return str(out / "sft.jsonl")


def positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value}: give at least one batch")
    return value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="experiments/claim/sft.yaml")
    parser.add_argument("--batches", type=positive, default=16)
    args = parser.parse_args()
    # On a CPU: where TRL's head runs Triton kernels (GPUs) it already skips the unlabelled positions.
    config = SFTConfig.from_file(args.config).model_copy(update={"loss_tokens": "decisions", "device": "cpu"})
    with tempfile.TemporaryDirectory() as directory:
        if not all(Path(path).is_file() for path in config.trajectories):
            config = config.model_copy(update={"trajectories": [collect(Path(directory))]})
        trainer = sft_trainer(config)
    trainer.model.train()
    batches = [batch for batch, _ in zip(trainer.get_train_dataloader(), range(args.batches), strict=False)]
    tokens = sum(int(batch["input_ids"].numel()) for batch in batches)
    labelled = sum(int((batch["labels"] != -100).sum()) for batch in batches)
    print(f"{len(batches)} batches, {tokens} tokens, {labelled} of them labelled ({type(trainer).__name__})")
    for loss in (trl.SFTTrainer.compute_loss, type(trainer).compute_loss):  # warm both paths' kernels and caches
        timed_losses(trainer, loss, batches[:1])
    trl_seconds, trl_losses = timed_losses(trainer, trl.SFTTrainer.compute_loss, batches)
    our_seconds, our_losses = timed_losses(trainer, type(trainer).compute_loss, batches)
    for label, seconds in (("TRL's fused loss", trl_seconds), ("decision loss", our_seconds)):
        print(f"{label:<18}{statistics.mean(seconds):8.3f} s per batch (median {statistics.median(seconds):.3f} s)")
    print(f"speed-up {sum(trl_seconds) / sum(our_seconds):.2f}×")
    gap = max(abs(ours - theirs) / abs(theirs) for ours, theirs in zip(our_losses, trl_losses, strict=True))
    print(f"largest relative loss difference {gap:.1e}")


if __name__ == "__main__":
    main()

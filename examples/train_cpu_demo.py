"""CPU demonstration that training the orchestrator works, from the embedded SmolLM2-135M-Instruct.

1. Synthesise SFT trajectories by running Podium's executor with a scripted teacher on arithmetic the model cannot
   do in its head (it calls python, reads the result, answers).
2. SFT on them (loss on the orchestrator's tokens only). Deliberately short by default (3 steps): a full SFT
   (32 examples, 8 steps at 1e-4) makes every sampled rollout correct, so each GRPO group's rewards differ by less
   than the 0.1 homogeneity threshold and GRPO rightly learns nothing; a single step leaves a policy that never
   calls the tool when sampled, the same dead end. Three steps give a policy that is right greedily but only part
   of the time when sampled, which is where GRPO has a signal.
3. GRPO on new questions of the same family: rollouts from the executor with the model being trained, Uno's
   cost-blended reward (orchestrator tokens and tool time are priced), G rollouts per question.
4. Held-out accuracy (greedy, and sampled at the RL temperature), reward and cost before SFT, after SFT and
   after GRPO, plus the GRPO training curve.

Run: ``.venv/bin/python examples/train_cpu_demo.py`` (30-40 minutes on one busy CPU thread); ``--quick`` runs the
smallest version that only checks the pipeline (one question per phase, one step of each training, a LoRA adapter on
the top two layers so that the backward pass stops there; about a minute on an idle CPU).
"""

import argparse
import asyncio
import json
import random
import re
import time
from dataclasses import dataclass
from pathlib import Path
from statistics import mean
from typing import Any

import yaml

from podium.backends.local import LocalBackend, LocalBackendConfig
from podium.backends.scripted import ScriptedBackend
from podium.core.messages import Message
from podium.core.trajectory import Trajectory, write_trajectories
from podium.datasets.items import BenchmarkItem
from podium.train.config import GRPOConfig, LoraConfig, ModelConfig, RewardConfig, RolloutConfig, SFTConfig
from podium.train.grpo import run_grpo
from podium.train.model import load_model
from podium.train.rollouts import ExecutorRollouts, collect
from podium.train.scoring import RewardScorer, Scored
from podium.train.sft import run_sft

POLICY = "orchestrator"
PRICES = {"models": {POLICY: {"input_per_mtok": 0.1, "output_per_mtok": 0.4}}}
"""The orchestrator's own tokens cost money (python is priced per second by Podium's sheet): the cost term."""
FORMS = ("What is {a} * {b}?", "Compute {a} * {b} + {c}.", "What is {a} * {b} - {c}?", "Calculate {a} + {b} * {c}.")
EXPRESSIONS = ("{a}*{b}", "{a}*{b}+{c}", "{a}*{b}-{c}", "{a}+{b}*{c}")


@dataclass(frozen=True)
class Task:
    question: str
    expression: str

    @property
    def gold(self) -> str:
        return str(eval(self.expression))  # our own integer arithmetic, built from random digits

    def item(self, index: int) -> BenchmarkItem:
        # Exact match, not math equivalence: an answer that restates the expression ("4821*937") is not a result.
        return BenchmarkItem(id=f"t{index}", question=self.question, gold=self.gold, verifier="qa")


def make_tasks(count: int, seed: int) -> list[Task]:
    """Products of 3-4 digit numbers, sometimes with a term added or subtracted."""
    rng = random.Random(seed)
    tasks = []
    for _ in range(count):
        form = rng.randrange(len(FORMS))
        numbers = {"a": rng.randint(100, 9999), "b": rng.randint(100, 999), "c": rng.randint(10, 9999)}
        tasks.append(Task(FORMS[form].format(**numbers), EXPRESSIONS[form].format(**numbers)))
    return tasks


def teacher(expressions: dict[str, str]) -> Any:
    """The scripted teacher's reply: call python on the question's expression, then answer with what it printed."""

    def reply(messages: list[Message]) -> str:
        last = messages[-1].content
        if "<tool_response" in last:
            printed = re.search(r">\n(.*?)\n", last, re.DOTALL).group(1).strip()
            return f"<answer>{printed}</answer>"
        code = f"print({expressions[last.strip()]})"
        return f'<tool_call>{{"name": "python", "arguments": {{"code": "{code}"}}}}</tool_call>'

    return reply


def rollout_config(out: Path, temperature: float, max_tokens: int, max_turns: int) -> RolloutConfig:
    sheet = out / "prices.yaml"
    sheet.write_text(yaml.safe_dump(PRICES))
    return RolloutConfig(max_turns=max_turns, max_tokens=max_tokens, temperature=temperature, price_sheets=[str(sheet)])


def run_all(source: Any, tasks: list[Task], seed: int) -> list[Trajectory]:
    questions = [task.question for task in tasks]
    seeds = [seed + i for i in range(len(tasks))]
    return asyncio.run(collect(source, questions, seeds, [None] * len(tasks), concurrency=1))


@dataclass(frozen=True)
class Evaluation:
    """What every held-out evaluation shares: the work directory, the rollouts' limits, the samples per question
    drawn at the RL temperature, and the teacher's episodes, which Uno's cost bracket sees first."""

    out: Path
    max_turns: int
    max_tokens: int
    temperature: float
    samples: int
    teacher_items: list[BenchmarkItem]
    teacher_trajectories: list[Trajectory]

    def rollouts(self, temperature: float) -> RolloutConfig:
        return rollout_config(self.out, temperature, self.max_tokens, self.max_turns)


def score(
    model: Any, tokenizer: Any, tasks: list[Task], evaluation: Evaluation, temperature: float, name: str
) -> list[Scored]:
    """Held-out rollouts through the executor, scored with Uno's reward: its rolling cost bracket sees the
    teacher's episodes first, so ĉ places each rollout's cost against the teacher's as well as the batch's."""
    backend = LocalBackend.from_loaded(model, tokenizer, LocalBackendConfig(model=POLICY))
    source = ExecutorRollouts.from_config(evaluation.rollouts(temperature), backend)
    trajectories = run_all(source, tasks, seed=10_000)
    write_trajectories(evaluation.out / f"eval-{name}.jsonl", trajectories, append=False)
    scorer = RewardScorer(RewardConfig(), ["python"])
    asyncio.run(scorer.score(evaluation.teacher_items, evaluation.teacher_trajectories))
    return asyncio.run(scorer.score([task.item(i) for i, task in enumerate(tasks)], trajectories))


def evaluate(
    model: Any, tokenizer: Any, tasks: list[Task], evaluation: Evaluation, phase: str
) -> dict[str, float | None]:
    """Greedy accuracy and reward, and accuracy when sampling at the RL temperature (mean over ``samples`` samples
    per question, as ParaManager reports mean@k at temperature 1.0; none drawn when ``samples`` is 0)."""
    started = time.perf_counter()
    model.eval()
    slug = phase.replace(" ", "-")
    greedy = score(model, tokenizer, tasks, evaluation, 0.0, f"{slug}-greedy")
    sampled = []
    if evaluation.samples:
        sampled = score(
            model, tokenizer, tasks * evaluation.samples, evaluation, evaluation.temperature, f"{slug}-sampled"
        )
    return {
        "accuracy": mean([s.correct for s in greedy]),
        "sampled_accuracy": mean([s.correct for s in sampled]) if sampled else None,
        "reward": mean([s.reward for s in greedy]),
        "python_calls": mean([len(s.trajectory.results) for s in greedy]),
        "usd": mean([s.trajectory.usage.usd for s in greedy]),
        "seconds": time.perf_counter() - started,
    }


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("/tmp/podium-train-demo"), help="Work directory.")
    parser.add_argument(
        "--model", help="Checkpoint directory (Hugging Face format) to start from; default: the embedded SmolLM2."
    )
    parser.add_argument("--quick", action="store_true", help="The smallest run, that only checks the pipeline.")
    parser.add_argument("--sft-examples", type=int, default=12, help="Teacher trajectories.")
    parser.add_argument("--sft-steps", type=int, default=3, help="SFT optimiser steps (batch 4).")
    parser.add_argument("--sft-lr", type=float, default=5e-5, help="SFT learning rate (constant).")
    parser.add_argument("--grpo-steps", type=int, default=8)
    parser.add_argument("--grpo-lr", type=float, default=3e-5, help="GRPO learning rate (constant).")
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--questions-per-step", type=int, default=2)
    parser.add_argument("--temperature", type=float, default=0.8, help="Sampling temperature of GRPO rollouts.")
    parser.add_argument("--eval-questions", type=int, default=16)
    parser.add_argument("--eval-samples", type=int, default=2, help="Sampled attempts per held-out question.")
    parser.add_argument("--max-turns", type=int, default=3, help="Turns of a rollout (the teacher takes 2).")
    parser.add_argument("--max-tokens", type=int, default=96, help="Token budget of one orchestrator turn.")
    parser.add_argument(
        "--lora-layers", type=int, nargs="*", help="Train a LoRA adapter on these decoder layers, not all weights."
    )
    args = parser.parse_args()
    if args.quick:  # one question per phase, one step of each training on the top two layers, one-turn rollouts
        args.sft_examples, args.sft_steps, args.grpo_steps, args.group_size, args.questions_per_step = 1, 1, 1, 2, 1
        args.eval_questions, args.eval_samples, args.max_turns, args.max_tokens = 1, 0, 1, 48
        args.lora_layers = [28, 29]
    return args


def demonstrate(args: argparse.Namespace) -> Evaluation:
    """The scripted teacher's episodes (``sft.jsonl``), and the evaluation settings that place costs against
    them."""
    tasks = make_tasks(args.sft_examples, seed=1)
    scripted = ScriptedBackend(
        [teacher({task.question: task.expression for task in tasks})], repeat_last=True, model=POLICY
    )
    teaching = rollout_config(args.out, 0.0, args.max_tokens, max_turns=3)
    demonstrations = run_all(ExecutorRollouts.from_config(teaching, scripted), tasks, 0)
    write_trajectories(args.out / "sft.jsonl", demonstrations, append=False)
    items = [task.item(i) for i, task in enumerate(tasks)]
    return Evaluation(
        args.out, args.max_turns, args.max_tokens, args.temperature, args.eval_samples, items, demonstrations
    )


def train(args: argparse.Namespace, evaluation: Evaluation) -> dict[str, Any]:
    """Evaluate the base model, SFT it on the demonstrations, evaluate, GRPO it, evaluate."""
    out, model_config = args.out, ModelConfig(name=POLICY, path=args.model, cpu_threads=1)
    lora = LoraConfig(layers=args.lora_layers) if args.lora_layers else None
    held_out = make_tasks(args.eval_questions, seed=3)
    rl_tasks = make_tasks(args.grpo_steps * args.questions_per_step, seed=2)
    (out / "tasks.jsonl").write_text("".join(json.dumps(t.item(i).model_dump()) + "\n" for i, t in enumerate(rl_tasks)))
    results: dict[str, dict[str, float | None]] = {}
    model, tokenizer = load_model(model_config, "cpu")
    results["before SFT"] = evaluate(model, tokenizer, held_out, evaluation, "before SFT")
    print("before SFT", results["before SFT"], flush=True)
    sft = SFTConfig(
        trajectories=[str(out / "sft.jsonl")], output_dir=str(out / "sft"), model=model_config, lora=lora,
        learning_rate=args.sft_lr, lr_scheduler="constant", warmup_steps=0, max_steps=args.sft_steps, batch_size=4,
        logging_steps=1, device="cpu",
    )  # fmt: skip
    started = time.perf_counter()
    sft_result = run_sft(sft, model=model, tokenizer=tokenizer)
    sft_seconds = time.perf_counter() - started
    results["after SFT"] = evaluate(model, tokenizer, held_out, evaluation, "after SFT")
    print("after SFT", results["after SFT"], flush=True)
    grpo = GRPOConfig(
        tasks=str(out / "tasks.jsonl"), output_dir=str(out / "grpo"),
        model=trained(model_config, sft_result.path, lora),
        rollout=evaluation.rollouts(args.temperature), learning_rate=args.grpo_lr, group_size=args.group_size,
        batch_size=args.group_size * args.questions_per_step, max_steps=args.grpo_steps, logging_steps=1, device="cpu",
    )  # fmt: skip
    started = time.perf_counter()
    grpo_result = run_grpo(grpo)
    grpo_seconds = time.perf_counter() - started
    model, tokenizer = load_model(trained(model_config, grpo_result.path, lora), "cpu")
    results["after GRPO"] = evaluate(model, tokenizer, held_out, evaluation, "after GRPO")
    curve = [  # Podium's own metrics: TRL leaves its reward empty for a step whose groups were all dropped
        {"step": entry["step"], "reward": entry["podium/reward"], "accuracy": entry["podium/accuracy"]}
        for entry in grpo_result.log
        if "podium/accuracy" in entry
    ]
    return {"results": results, "grpo_curve": curve, "sft_seconds": sft_seconds, "grpo_seconds": grpo_seconds}


def trained(base: ModelConfig, output: Path, lora: LoraConfig | None) -> ModelConfig:
    """The model a training run wrote: its weights, or its adapter over the base model."""
    return base.model_copy(update={"adapter" if lora else "path": str(output)})


def report(summary: dict[str, Any], args: argparse.Namespace, demonstrations: int) -> None:
    print(f"\nheld-out: {args.eval_questions} questions; SFT on {demonstrations} teacher trajectories")
    if args.eval_samples:
        print(f"sampled: mean over {args.eval_samples} samples per question at temperature {args.temperature}")
    print(f"{'phase':<12}{'greedy acc':>11}{'sampled acc':>12}{'reward':>8}{'python/q':>10}{'USD/q':>11}")
    for phase, row in summary["results"].items():
        sampled = "-" if row["sampled_accuracy"] is None else f"{row['sampled_accuracy']:.3f}"
        print(
            f"{phase:<12}{row['accuracy']:>11.3f}{sampled:>12}{row['reward']:>8.3f}"
            f"{row['python_calls']:>10.2f}{row['usd']:>11.2e}"
        )
    print("\nGRPO training curve (per step, over its rollouts):")
    for point in summary["grpo_curve"]:
        print(f"  step {point['step']:>3}  reward {point['reward']:.3f}  accuracy {point['accuracy']:.3f}")
    print(
        f"\nSFT {summary['sft_seconds']:.0f} s, GRPO {summary['grpo_seconds']:.0f} s, "
        f"total {summary['wall_seconds']:.0f} s → {args.out}"
    )


def main() -> None:
    args = arguments()
    args.out.mkdir(parents=True, exist_ok=True)
    began = time.perf_counter()
    evaluation = demonstrate(args)
    summary = train(args, evaluation)
    summary["wall_seconds"] = time.perf_counter() - began
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2))
    report(summary, args, len(evaluation.teacher_trajectories))


if __name__ == "__main__":
    main()

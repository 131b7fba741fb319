"""Train the claim's orchestrator: SFT on teacher trajectories, then GRPO with ToolOrchestra's cost-aware reward.

Both stages train a LoRA adapter on SmolLM2-135M-Instruct; only the orchestrator's own words carry loss.

- SFT teacher (from the train split's recorded outcomes): ask mixtral; accept its answer unless it is wrong and
  gpt4's is right, then ask gpt4 and accept. Trajectories come from the executor with the teacher's words
  scripted, so the prompts are exactly those the policy sees.
- GRPO: per question, ``group`` rollouts through the executor at temperature 1; rewards from
  ``build_reward("toolorchestra")`` with preference weights outcome 1, compute 1 (normalised over the group);
  advantages (R − mean) / (std + 1e-4); one on-policy step per batch (ratio 1: the clipped surrogate's
  gradient is A·∇log π of the chosen words).

Writes ``OUT/sft`` and ``OUT/grpo`` adapters and ``OUT/curves.jsonl`` (per GRPO step: reward, accuracy,
USD per question of the rollouts).
"""

import argparse
import asyncio
import json
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from manifest import write_manifest
from orchestrator import LABELS, claim_pool, executor, load_base, score, with_adapter

from podium.backends.scripted import ScriptedBackend
from podium.core.preference import Preference
from podium.core.trajectory import Trajectory
from podium.evaluate.routing.data import STRONG, WEAK, RoutingItem, in_split, load_routing
from podium.policies import RoutePolicy
from podium.rewards import build_reward
from podium.runtime import Executor, RunConfig

PREFERENCE = Preference(weights={"outcome": 1.0, "compute": 1.0})


def teacher_words(item: RoutingItem) -> list[str]:
    """The teacher's words on ``item``."""
    weak, strong = item.outcomes[WEAK].correct, item.outcomes[STRONG].correct
    if not weak and strong:
        return [LABELS[WEAK], LABELS[STRONG], "accept"]
    return [LABELS[WEAK], "accept"]


def teacher_trajectories(items: list[RoutingItem]) -> list[Trajectory]:
    """Executor episodes with the teacher's words scripted as the orchestrator's outputs."""
    pool = claim_pool()
    run = RunConfig(policy="route", max_turns=3, max_tokens=4)
    out = []
    for item in items:
        scripted = ScriptedBackend(teacher_words(item), model="teacher")
        policy = RoutePolicy(answer_kind="math")
        out.append(asyncio.run(Executor(pool, run, orchestrator=scripted, policy=policy).run(item.question)))
    return out


def decisions(trajectory: Trajectory) -> list[tuple[list[dict[str, str]], str]]:
    """(chat context, word) for each orchestrator turn."""
    chat = [{"role": m.role, "content": m.content} for m in trajectory.messages]
    return [(chat[:index], m["content"]) for index, m in enumerate(chat) if m["role"] == "assistant"]


def word_logprob(torch: Any, model: Any, tokenizer: Any, context: list[dict[str, str]], word: str) -> Any:
    """Summed log-probability of ``word`` and the end-of-turn token after ``context``."""
    prompt = tokenizer.apply_chat_template(context, add_generation_prompt=True, return_tensors="pt", return_dict=True)
    prompt_ids = prompt["input_ids"][0]
    target = tokenizer(word + "<|im_end|>", add_special_tokens=False, return_tensors="pt")["input_ids"][0]
    ids = torch.cat([prompt_ids, target]).unsqueeze(0)
    logits = model(input_ids=ids).logits[0, len(prompt_ids) - 1 : -1]
    return torch.log_softmax(logits.float(), dim=-1).gather(1, target.unsqueeze(1)).sum()


def sft(torch: Any, model: Any, tokenizer: Any, samples: list[tuple[list[dict[str, str]], str]], lr: float) -> None:
    """One epoch of SFT over ``samples`` (batch 1), with progress."""
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr)
    model.train()
    started, losses = time.perf_counter(), []
    for index, (context, word) in enumerate(samples, start=1):
        loss = -word_logprob(torch, model, tokenizer, context, word)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
        if index % 20 == 0 or index == len(samples):
            mean = statistics.mean(losses[-20:])
            print(f"sft {index}/{len(samples)} loss {mean:.3f} ({time.perf_counter() - started:.0f} s)", flush=True)
    model.eval()


def sft_samples(train: list[RoutingItem], count: int, seed: int) -> list[tuple[list[dict[str, str]], str]]:
    """Teacher decisions, escalations and acceptances balanced, shuffled."""
    rng = random.Random(seed)
    escalate = [item for item in train if len(teacher_words(item)) == 3]
    keep = [item for item in train if len(teacher_words(item)) == 2]
    chosen = rng.sample(escalate, min(count // 2, len(escalate))) + rng.sample(keep, count // 2)
    samples = [pair for trajectory in teacher_trajectories(chosen) for pair in decisions(trajectory)]
    rng.shuffle(samples)
    return samples


def grpo_step(torch: Any, model: Any, tokenizer: Any, optimizer: Any, batch: list[RoutingItem], group: int) -> dict:
    """Rollouts, rewards, advantages and one policy-gradient step; the step's curve entry."""
    reward_fn = build_reward("toolorchestra", tools=["standard_reasoner"], preference=PREFERENCE)
    run = executor(claim_pool(), model, tokenizer, temperature=1.0)
    weights: dict[tuple[str, str], float] = {}
    contexts: dict[tuple[str, str], list[dict[str, str]]] = {}
    rewards, correct, usd = [], [], []
    for item in batch:
        episodes = [score(item, asyncio.run(run.run(item.question))) for _ in range(group)]
        values = reward_fn([e.trajectory for e in episodes], [e.correct for e in episodes])
        mean, std = statistics.mean(values), statistics.pstdev(values)
        for episode, value in zip(episodes, values, strict=True):
            advantage = (value - mean) / (std + 1e-4)
            for context, word in decisions(episode.trajectory):
                key = (json.dumps(context), word)
                contexts[key] = context
                weights[key] = weights.get(key, 0.0) + advantage / (group * len(batch))
        rewards += values
        correct += [e.correct for e in episodes]
        usd += [e.usd for e in episodes]
    model.train()
    for key, weight in weights.items():
        if abs(weight) > 1e-9:
            (-weight * word_logprob(torch, model, tokenizer, contexts[key], key[1])).backward()
    optimizer.step()
    optimizer.zero_grad()
    model.eval()
    return {"reward": statistics.mean(rewards), "accuracy": statistics.mean(correct), "usd": statistics.mean(usd)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("experiments/claim/adapter"))
    parser.add_argument("--sft-samples", type=int, default=60, help="teacher trajectories (half escalations)")
    parser.add_argument("--sft-lr", type=float, default=5e-4)
    parser.add_argument("--grpo-steps", type=int, default=3)
    parser.add_argument("--grpo-batch", type=int, default=4, help="questions per GRPO step")
    parser.add_argument("--group", type=int, default=4, help="rollouts per question")
    parser.add_argument("--grpo-lr", type=float, default=1e-4)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    started = time.perf_counter()
    torch, model, tokenizer = load_base()
    torch.manual_seed(args.seed)
    model = with_adapter(model, None, trainable=True)
    train = in_split(load_routing(), "train")
    sft(torch, model, tokenizer, sft_samples(train, args.sft_samples, args.seed), args.sft_lr)
    model.save_pretrained(str(args.out / "sft"))
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=args.grpo_lr)
    rng = random.Random(args.seed + 1)
    with open(args.out / "curves.jsonl", "w") as curves:
        for step in range(1, args.grpo_steps + 1):
            entry = {
                "step": step,
                **grpo_step(torch, model, tokenizer, optimizer, rng.sample(train, args.grpo_batch), args.group),
            }
            print(json.dumps(entry), flush=True)
            curves.write(json.dumps(entry) + "\n")
    model.save_pretrained(str(args.out / "grpo"))
    wall = time.perf_counter() - started
    write_manifest(args.out, {k: str(v) for k, v in vars(args).items()}, wall)
    print(f"training wall time {wall:.0f} s", flush=True)


if __name__ == "__main__":
    main()

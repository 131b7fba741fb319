"""``loss_tokens: decisions`` projects only the decision positions onto the vocabulary, and the losses and gradients
of SFT and GRPO are TRL's own fused losses'."""

import json
import random
import re

import pytest

pytest.importorskip("trl")

import torch
import trl

from podium.core.messages import Message
from podium.core.trajectory import Trajectory, Turn, write_trajectories
from podium.train.config import GRPOConfig, LoraConfig, ModelConfig, SFTConfig
from podium.train.decision_loss import DecisionLossSFTTrainer, grpo_decision_loss
from podium.train.sft import run_sft, sft_trainer
from tests.test_train_support import tiny_model, tiny_tokenizer


def routed(a: int, b: int, first: str) -> Trajectory:
    """An episode of two decisions: the first turn picks among two words, the second is forced."""
    question = f"What is {a} * {b}?"
    turns = [Turn(index=0, output=first, choices=["python", "answer"]),
             Turn(index=1, output="answer", choices=["answer"])]  # fmt: skip
    messages = [Message(role="system", content="Pick."), Message(role="user", content=question),
                Message(role="assistant", content=first), Message(role="user", content=str(a * b)),
                Message(role="assistant", content="answer")]  # fmt: skip
    return Trajectory(question=question, turns=turns, messages=messages, answer=str(a * b))


@pytest.fixture
def config(tmp_path) -> SFTConfig:
    path = tmp_path / "trajectories.jsonl"
    write_trajectories(path, [routed(12 + 7 * i, 34 + i, ["python", "answer"][i % 2]) for i in range(8)])
    return SFTConfig(
        trajectories=[str(path)], output_dir=str(tmp_path / "out"), loss_tokens="decisions", batch_size=4,
        max_steps=4, warmup_steps=0, learning_rate=1e-2, logging_steps=1, device="cpu",
    )  # fmt: skip


def gradients(model) -> list[torch.Tensor]:
    return [parameter.grad.clone() for parameter in model.parameters() if parameter.grad is not None]


@pytest.mark.parametrize("lora", [None, LoraConfig(rank=4, target_modules=["q_proj", "v_proj"])])
def test_the_decision_loss_is_trls_loss_from_the_labelled_positions_only(config, lora) -> None:
    tokenizer = tiny_tokenizer()
    config = config.model_copy(update={"lora": lora})
    trainer = sft_trainer(config, model=tiny_model(tokenizer), tokenizer=tokenizer)
    assert isinstance(trainer, DecisionLossSFTTrainer)
    model = trainer.model
    batch = next(iter(trainer.get_train_dataloader()))
    labelled = int((batch["labels"][:, 1:] != -100).any(dim=0).sum())
    assert 0 < labelled < batch["input_ids"].shape[1] // 4  # few positions carry a decision label
    model.zero_grad()
    theirs = trl.SFTTrainer.compute_loss(trainer, model, dict(batch), num_items_in_batch=torch.tensor(7))
    theirs.backward()
    their_gradients = gradients(model)
    model.zero_grad()
    projected: list[int] = []
    head = model.get_output_embeddings()
    hook = head.register_forward_hook(lambda _module, args, _output: projected.append(args[0].shape[1]))
    ours = trainer.compute_loss(model, dict(batch), num_items_in_batch=torch.tensor(7))
    hook.remove()
    ours.backward()
    assert projected == [labelled]
    assert ours.item() == pytest.approx(theirs.item(), rel=1e-5)
    for mine, reference in zip(gradients(model), their_gradients, strict=True):
        torch.testing.assert_close(mine, reference, rtol=1e-4, atol=1e-6)


def test_the_decision_loss_trains_and_logs_trls_metrics(config) -> None:
    tokenizer = tiny_tokenizer()
    result = run_sft(config, model=tiny_model(tokenizer), tokenizer=tokenizer)
    logs = [entry for entry in result.log if "loss" in entry]
    assert len(logs) == 4
    for entry in logs:
        assert 0.0 <= entry["mean_token_accuracy"] <= 1.0 and entry["entropy"] > 0.0
    tokens = [entry["num_tokens"] for entry in logs]
    assert tokens == sorted(set(tokens)) and tokens[0] > 0
    assert logs[-1]["loss"] < logs[0]["loss"]


def test_a_model_that_does_not_compute_in_float32_keeps_trls_loss(config) -> None:
    tokenizer = tiny_tokenizer()
    trainer = sft_trainer(config, model=tiny_model(tokenizer).to(torch.bfloat16), tokenizer=tokenizer)
    batch = next(iter(trainer.get_train_dataloader()))
    projected: list[int] = []
    hook = trainer.model.get_output_embeddings().register_forward_hook(lambda *_: projected.append(1))
    ours = trainer.compute_loss(trainer.model, dict(batch))
    hook.remove()
    theirs = trl.SFTTrainer.compute_loss(trainer, trainer.model, dict(batch))
    assert projected == []  # TRL's fused head, which accumulates the bfloat16 head in float32
    assert ours.item() == theirs.item()


def routed_rollouts():
    """Rollouts of two decisions, each drawn: the first decides the reward (``python`` answers right, ``answer``
    one too many), the second, after an observation, changes nothing."""
    rng = random.Random(0)

    def rollout(task, seed: int, preference=None) -> Trajectory:
        a, b = map(int, re.findall(r"\d+", task.question))
        first, second = rng.choice(["python", "answer"]), rng.choice(["python", "answer"])
        trajectory = routed(a, b, first)
        turns = [trajectory.turns[0], Turn(index=1, output=second, choices=["python", "answer"])]
        messages = [*trajectory.messages[:-1], Message(role="assistant", content=second)]
        return trajectory.model_copy(update={"answer": str(a * b + (first == "answer")), "turns": turns,
                                             "messages": messages})  # fmt: skip

    return rollout


def captured_batches(trainer) -> list[dict]:
    """Train one step, keeping every mini-batch TRL hands the loss."""
    batches: list[dict] = []
    loss = trainer.compute_loss

    def keep(model, inputs, return_outputs=False, num_items_in_batch=None):
        batches.append(dict(inputs))
        return loss(model, inputs, return_outputs, num_items_in_batch)

    trainer.compute_loss = keep
    trainer.train()
    del trainer.compute_loss
    return batches


@pytest.mark.parametrize(
    "fields",
    [
        {},  # dapo, token-level ratio, trajectory advantages
        {"loss_type": "grpo", "ratio_level": "sequence", "kl_beta": 0.05},
        {"loss_type": "bnpo", "advantage": "turn", "iterations": 2},
    ],
)
def test_the_grpo_decision_loss_is_trls_loss_from_the_decision_positions_only(tmp_path, fields) -> None:
    from podium.train.grpo import grpo_trainer

    tokenizer = tiny_tokenizer()
    start = tmp_path / "start"
    tiny_model(tokenizer).save_pretrained(start)
    tokenizer.save_pretrained(start)
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({"question": f"What is {12 + i} * 34?", "gold": str((12 + i) * 34),
                                         "verifier": "math"}) + "\n" for i in range(4)))  # fmt: skip
    config = GRPOConfig(
        tasks=str(tasks), output_dir=str(tmp_path / "out"), model=ModelConfig(path=str(start)), group_size=4,
        batch_size=4, gradient_accumulation_steps=2, max_steps=1, learning_rate=1e-2, loss_tokens="decisions",
        device="cpu", **fields,
    )  # fmt: skip
    trainer = grpo_trainer(config, rollouts=routed_rollouts(), tools=["python"])
    batches = captured_batches(trainer)
    assert len(batches) >= 2
    model = trainer.model
    model.train()
    for batch in batches:
        inputs = trainer.loss_inputs(batch)
        kept = int((inputs["completion_mask"] * inputs["tool_mask"]).any(dim=0).sum())
        assert 0 < kept < inputs["completion_ids"].shape[1]  # the decisions are a few of the completion's tokens
        model.zero_grad()
        theirs = trl.GRPOTrainer.compute_loss(trainer, model, dict(inputs))
        theirs.backward()
        their_gradients = gradients(model)
        model.zero_grad()
        projected: list[int] = []
        hook = model.get_output_embeddings().register_forward_hook(
            lambda _module, args, _output, seen=projected: seen.append(args[0].shape[1])
        )
        ours = grpo_decision_loss(trainer, model, dict(inputs), {})
        hook.remove()
        ours.backward()
        assert projected == [kept]
        assert ours.item() == pytest.approx(theirs.item(), abs=1e-5)
        for mine, reference in zip(gradients(model), their_gradients, strict=True):
            torch.testing.assert_close(mine, reference, rtol=1e-4, atol=1e-6)


def test_grpo_with_decision_loss_trains_and_logs_trls_metrics(tmp_path) -> None:
    from podium.train.grpo import run_grpo

    tokenizer = tiny_tokenizer()
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({"question": f"What is {12 + i} * 34?", "gold": str((12 + i) * 34),
                                         "verifier": "math"}) + "\n" for i in range(4)))  # fmt: skip
    config = GRPOConfig(
        tasks=str(tasks), output_dir=str(tmp_path / "out"), group_size=4, batch_size=8, max_steps=2,
        learning_rate=1e-2, loss_tokens="decisions", logging_steps=1, device="cpu",
    )  # fmt: skip
    result = run_grpo(
        config, rollouts=routed_rollouts(), tools=["python"], model=tiny_model(tokenizer), tokenizer=tokenizer
    )
    logged = [entry for entry in result.log if "loss" in entry]
    assert len(logged) == 2
    for entry in logged:
        assert entry["entropy"] > 0.0 and 0.0 <= entry["clip_ratio/region_mean"] <= 1.0

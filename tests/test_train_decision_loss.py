"""SFT with ``loss_tokens: decisions`` projects only the labelled positions onto the vocabulary, and its loss and
gradients are TRL's own fused loss's."""

import pytest

pytest.importorskip("trl")

import torch
import trl

from podium.core.messages import Message
from podium.core.trajectory import Trajectory, Turn, write_trajectories
from podium.train.config import LoraConfig, SFTConfig
from podium.train.decision_loss import DecisionLossSFTTrainer
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

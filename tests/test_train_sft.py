"""``podium train sft`` on a tiny random model: masked labels reach the loss, training lowers it, the model is saved."""

import pytest

pytest.importorskip("trl")

import torch
from transformers import AutoModelForCausalLM

from podium.core.trajectory import write_trajectories
from podium.errors import ConfigError
from podium.train.config import SFTConfig
from podium.train.samples import ChatFormat, TrainingDataError, trajectory_samples
from podium.train.sft import load_trajectories, run_sft, sft_rows, sft_trainer
from tests.test_train_support import arithmetic_trajectory, tiny_model, tiny_tokenizer


@pytest.fixture
def trajectories_file(tmp_path):
    path = tmp_path / "trajectories.jsonl"
    write_trajectories(path, [arithmetic_trajectory(12 + i, 34 + i) for i in range(8)])
    return path


def test_rows_carry_the_policy_mask_as_labels(caplog) -> None:
    tokenizer = tiny_tokenizer()
    chat = ChatFormat(tokenizer)
    trajectory = arithmetic_trajectory(12, 34)
    [row] = sft_rows([trajectory], chat, max_length=10_000)
    [sample] = trajectory_samples(trajectory, chat)
    assert row == {"input_ids": sample.input_ids, "labels": sample.labels}
    unanswered = trajectory.model_copy(update={"answer": None})
    assert sft_rows([unanswered], chat, max_length=10_000, answered_only=True) == []
    # A cut that leaves no generated token drops the sample; a cut inside keeps the start.
    assert sft_rows([trajectory], chat, max_length=sample.prompt_length) == []
    [warning] = [entry.getMessage() for entry in caplog.records]
    assert warning == f"left out 1 sample(s): max_length {sample.prompt_length} cuts every token they train on"
    [cut] = sft_rows([trajectory], chat, max_length=sample.prompt_length + 3)
    assert cut["input_ids"] == sample.input_ids[: sample.prompt_length + 3]


def test_trainer_batches_ignore_everything_but_generated_tokens(tmp_path, trajectories_file) -> None:
    tokenizer = tiny_tokenizer()
    config = SFTConfig(trajectories=[str(trajectories_file)], output_dir=str(tmp_path / "out"), batch_size=8)
    trainer = sft_trainer(config, model=tiny_model(tokenizer), tokenizer=tokenizer)
    batch = next(iter(trainer.get_train_dataloader()))
    chat = ChatFormat(tokenizer)
    expected = {
        tuple(sample.input_ids): sample.mask
        for trajectory in load_trajectories([str(trajectories_file)])
        for sample in trajectory_samples(trajectory, chat)
    }
    for ids, labels, attention in zip(batch["input_ids"], batch["labels"], batch["attention_mask"], strict=True):
        length = int(attention.sum())
        mask = expected[tuple(ids[:length].tolist())]
        trained = (labels[:length] != -100).int().tolist()
        assert trained == mask
        assert (labels[length:] == -100).all()


def test_sft_lowers_the_loss_and_saves_a_loadable_model(tmp_path, trajectories_file) -> None:
    tokenizer = tiny_tokenizer()
    config = SFTConfig(
        trajectories=[str(trajectories_file)],
        output_dir=str(tmp_path / "out"),
        batch_size=8,
        max_steps=6,
        warmup_steps=0,
        learning_rate=1e-2,
        lr_scheduler="constant",
        logging_steps=1,
        device="cpu",
    )
    result = run_sft(config, model=tiny_model(tokenizer), tokenizer=tokenizer)
    losses = [entry["loss"] for entry in result.log if "loss" in entry]
    assert result.steps == 6 and len(losses) == 6
    assert losses[-1] < losses[0] - 0.5
    reloaded = AutoModelForCausalLM.from_pretrained(result.path)
    assert isinstance(reloaded.model.embed_tokens.weight, torch.Tensor)
    assert (result.path / "tokenizer.json").exists()


def test_unreadable_trajectories_are_named(tmp_path) -> None:
    with pytest.raises(ConfigError, match="cannot read trajectories"):
        load_trajectories([str(tmp_path / "missing.jsonl")])
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"not": "a trajectory"}\n')
    with pytest.raises(TrainingDataError, match=r"bad\.jsonl"):
        load_trajectories([str(bad)])


def test_podium_train_sft_exits_2_when_every_line_is_left_out(tmp_path) -> None:
    from typer.testing import CliRunner

    from podium.cli.train import app
    from tests.eval_fixtures import record

    wrong = record("i1", correct=False)
    wrong.trajectory = arithmetic_trajectory(2, 3, answer=7)
    results = tmp_path / "results.jsonl"
    results.write_text(wrong.model_dump_json() + "\n")
    config = tmp_path / "sft.yaml"
    config.write_text(f"trajectories: [{results}]\noutput_dir: {tmp_path / 'out'}\n")
    result = CliRunner().invoke(app, ["sft", "--config", str(config)])
    assert result.exit_code == 2
    assert "no trajectory to train on" in result.output and "1 wrong and 0 failed of 1 lines left out" in result.output
    assert not (tmp_path / "out").exists()

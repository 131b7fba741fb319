"""``podium train sft`` then ``podium train grpo`` end to end on a tiny random model: the GRPO step generates its
rollouts with the model being trained, through the executor and the sandboxed python tool."""

import json
import shutil
from pathlib import Path

import pytest

pytest.importorskip("trl")

import yaml
from typer.testing import CliRunner

from podium.backends.local import LocalBackend
from podium.cli.train import app as train_app
from podium.core.trajectory import write_trajectories
from podium.train.config import GRPOConfig, SFTConfig
from tests.test_train_support import arithmetic_trajectory, tiny_model, tiny_tokenizer

runner = CliRunner()


def write(path, data) -> str:
    path.write_text(yaml.safe_dump(data))
    return str(path)


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="the python tool runs in bubblewrap")
def test_sft_then_grpo_from_the_command_line(tmp_path, monkeypatch) -> None:
    tokenizer = tiny_tokenizer()
    start = tmp_path / "start"
    tiny_model(tokenizer).save_pretrained(start)
    tokenizer.save_pretrained(start)
    write_trajectories(tmp_path / "sft.jsonl", [arithmetic_trajectory(12 + i, 34) for i in range(4)])
    sft = write(
        tmp_path / "sft.yaml",
        {"trajectories": [str(tmp_path / "sft.jsonl")], "output_dir": "unused", "batch_size": 4, "warmup_steps": 0},
    )
    result = runner.invoke(
        train_app,
        ["sft", "--config", sft, "--model", str(start), "--output-dir", str(tmp_path / "sft"), "--max-steps", "2"],
    )
    assert result.exit_code == 0, result.output
    assert "trained 2 steps" in result.output and (tmp_path / "sft" / "model.safetensors").exists()

    (tmp_path / "tasks.jsonl").write_text(
        json.dumps({"question": "What is 12 * 34?", "gold": "408", "verifier": "math"})
    )
    grpo = write(
        tmp_path / "grpo.yaml",
        {
            "tasks": str(tmp_path / "tasks.jsonl"),
            "output_dir": str(tmp_path / "grpo"),
            "group_size": 2,
            "batch_size": 2,
            "device": "cpu",
            "rollout": {"max_turns": 2, "max_tokens": 8},
        },
    )
    forgotten: list[object] = []
    monkeypatch.setattr(LocalBackend, "weights_changed", lambda backend: forgotten.append(backend))
    result = runner.invoke(train_app, ["grpo", "--config", grpo, "--model", str(tmp_path / "sft"), "--max-steps", "1"])
    assert result.exit_code == 0, result.output
    assert "trained 1 steps" in result.output and (tmp_path / "grpo" / "model.safetensors").exists()
    assert forgotten, "the rollouts' backend must forget what it cached of the weights before each batch"


def test_invalid_configs_exit_2_with_the_field(tmp_path) -> None:
    sft = write(tmp_path / "sft.yaml", {"output_dir": str(tmp_path), "learning_rate": -1})
    result = runner.invoke(train_app, ["sft", "--config", sft])
    assert result.exit_code == 2
    assert "trajectories" in result.output and "learning_rate" in result.output
    grpo = write(tmp_path / "grpo.yaml", {"output_dir": str(tmp_path), "tasks": "t.jsonl", "benchmark": "gsm8k"})
    result = runner.invoke(train_app, ["grpo", "--config", grpo])
    assert result.exit_code == 2 and "exactly one of tasks" in result.output


def test_example_configs_are_valid() -> None:
    examples = Path(__file__).parent.parent / "examples" / "data"
    assert SFTConfig.from_file(examples / "train_sft.yaml").learning_rate == 2e-5
    grpo = GRPOConfig.from_file(examples / "train_grpo.yaml")
    assert (grpo.group_size, grpo.kl_beta, grpo.reward.design) == (8, 1e-4, "uno")

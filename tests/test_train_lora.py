"""SFT can train a LoRA adapter instead of the full weights: only the adapter is saved (a few MB for the demo's
model), and a local worker merges it into its base model when it loads."""

import pytest

from podium.backends.base import BackendError
from podium.backends.local import load_adapter
from podium.core.trajectory import write_trajectories
from podium.train.config import LoraConfig, SFTConfig
from podium.train.sft import run_sft
from tests.test_train_support import arithmetic_trajectory, tiny_model, tiny_tokenizer


def test_lora_sft_saves_only_the_adapter_and_the_adapter_changes_the_model(tmp_path) -> None:
    import torch

    data = tmp_path / "trajectories.jsonl"
    write_trajectories(data, [arithmetic_trajectory(a, a + 3) for a in range(8)])
    tokenizer = tiny_tokenizer()
    config = SFTConfig(
        trajectories=[str(data)],
        output_dir=str(tmp_path / "adapter"),
        batch_size=8,
        max_steps=4,
        warmup_steps=0,
        learning_rate=5e-2,
        lr_scheduler="constant",
        logging_steps=1,
        device="cpu",
        lora=LoraConfig(rank=4, target_modules=["q_proj", "v_proj"]),
    )
    result = run_sft(config, model=tiny_model(tokenizer), tokenizer=tokenizer)
    saved = {path.name for path in result.path.iterdir()}
    assert {"adapter_config.json", "adapter_model.safetensors"} <= saved
    assert "tokenizer.json" not in saved and "model.safetensors" not in saved
    base = tiny_model(tokenizer)
    before = base.model.layers[0].self_attn.q_proj.weight.detach().clone()
    merged = load_adapter(base, str(result.path))
    after = merged.model.layers[0].self_attn.q_proj.weight
    assert not torch.allclose(before, after)
    assert type(merged).__name__ == "LlamaForCausalLM"  # merged back into a plain model: no adapter at inference


def test_a_missing_adapter_is_a_clear_error(tmp_path) -> None:
    with pytest.raises(BackendError, match=r"no LoRA adapter at .*podium train sft"):
        load_adapter(object(), str(tmp_path / "nowhere"))

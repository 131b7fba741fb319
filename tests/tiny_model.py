"""A test double for the embedded SmolLM2-135M-Instruct: the same architecture (a Llama with 30 decoder layers, so a
LoRA config naming SmolLM2's top layers applies), SmolLM2's tokenizer, chat template and generation config, but
randomly initialised and about 1/90 of its width, so loading, decoding and a training step cost a fraction.

For tests of a recipe's plumbing (every step runs, files land where the next step reads them, figures printed agree
with the records written) and never of the model's answers: its replies are noise. A recipe is pointed at it through
the configs' own checkpoint fields (``model.path`` of a training config, ``path`` of a local worker), as a user points
one at their own checkpoint."""

import shutil
from pathlib import Path

from podium.backends.embedded import embedded_model_dir

WIDTH = {"hidden_size": 32, "intermediate_size": 64, "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 16}
"""What differs from SmolLM2-135M's config (576 wide, 9 heads of 64, 3 key-value heads, MLP 1536)."""
COPIED = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "generation_config.json")
"""The embedded checkpoint's files the double keeps as they are."""


def write_tiny_model(target: Path) -> Path:
    """Write the double as a Hugging Face checkpoint in ``target`` (seeded: the same weights every time)."""
    import torch
    from transformers import AutoConfig, LlamaForCausalLM

    source = embedded_model_dir()
    config = AutoConfig.from_pretrained(source)
    for field, value in WIDTH.items():
        setattr(config, field, value)
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(target)
    for name in COPIED:
        shutil.copy(source / name, target / name)
    return target

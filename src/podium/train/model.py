"""Loading the model to train, and the TRL arguments shared by SFT and GRPO."""

from pathlib import Path
from typing import Any

from podium.backends.embedded import embedded_model_dir
from podium.errors import ConfigError
from podium.extras import quiet_library_deprecations, require_extra
from podium.train.config import ModelConfig, TrainerConfig


def resolve_device(device: str) -> str:
    """``auto`` → ``cuda`` when a GPU is visible, else ``cpu``."""
    torch = require_extra("train", "torch")
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


def model_source(config: ModelConfig) -> Path:
    """The checkpoint directory of ``config`` (the embedded model converted on first use)."""
    return Path(config.path) if config.path else embedded_model_dir()


def load_model(config: ModelConfig, device: str) -> tuple[Any, Any]:
    """``(model, tokenizer)`` ready to train on ``device``; the tokenizer gets a pad token if it has none."""
    torch = require_extra("train", "torch")
    transformers = require_extra("train", "transformers")
    transformers.utils.logging.disable_progress_bar()
    quiet_library_deprecations()
    if device == "cpu":
        torch.set_num_threads(config.cpu_threads)
    dtype = config.dtype
    if dtype == "auto":
        dtype = "bfloat16" if device == "cuda" else "float32"
    source = model_source(config)
    local_only = source.exists()
    tokenizer = transformers.AutoTokenizer.from_pretrained(source, local_files_only=local_only)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = transformers.AutoModelForCausalLM.from_pretrained(
        source, dtype=getattr(torch, dtype), local_files_only=local_only
    ).to(device)
    if config.adapter is not None:
        if not (Path(config.adapter) / "adapter_config.json").is_file():
            raise ConfigError(f"model.adapter: no LoRA adapter at {config.adapter} (adapter_config.json is missing)")
        peft = require_extra("train", "peft")
        model = peft.PeftModel.from_pretrained(model, config.adapter, is_trainable=True)
    return model, tokenizer


def trainer_arguments(config: TrainerConfig, device: str) -> dict[str, Any]:
    """TrainingArguments fields common to TRL's SFT and GRPO configs."""
    cuda = device == "cuda"
    arguments: dict[str, Any] = {
        "output_dir": config.output_dir,
        "learning_rate": config.learning_rate,
        "lr_scheduler_type": config.lr_scheduler,
        "warmup_steps": config.warmup_steps,
        "per_device_train_batch_size": config.batch_size,
        "gradient_accumulation_steps": config.gradient_accumulation_steps,
        "max_grad_norm": config.max_grad_norm,
        "logging_steps": config.logging_steps,
        "save_strategy": "steps" if config.save_steps else "no",
        "save_total_limit": config.save_total_limit,
        "seed": config.seed,
        "use_cpu": not cuda,
        # bf16 autocast and activation checkpointing pay off on GPUs; on a CPU they only slow a small model down.
        "bf16": cuda,
        "activation_checkpointing": cuda,
        "report_to": "none",
        "disable_tqdm": True,
        "dataloader_num_workers": 0,
    }
    if config.save_steps:
        arguments["save_steps"] = config.save_steps
    if config.max_steps:
        arguments["max_steps"] = config.max_steps
    return arguments

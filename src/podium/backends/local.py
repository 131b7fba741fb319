"""A Hugging Face causal LM run in-process with transformers (CPU or GPU), with optional JSON-schema
constrained decoding through outlines-core."""

import asyncio
import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import PositiveInt

from podium.backends.base import BackendError, ChatBackend, Completion, GenerationRequest
from podium.backends.embedded import EMBEDDED_MODEL, embedded_model_dir
from podium.concurrency import LoopSemaphore
from podium.config import Config
from podium.core.messages import Message
from podium.costs.bounds import prompt_token_bound
from podium.costs.prices import ModelPrice
from podium.extras import require_extra


class LocalBackendConfig(Config):
    """A model loaded in this process."""

    model: str = EMBEDDED_MODEL
    """Name used in pools, records and price sheets."""
    path: str | None = None
    """Checkpoint directory or hub id; ``None`` means the embedded SmolLM2-135M-Instruct."""
    device: Literal["auto", "cpu", "cuda"] = "auto"
    """Where to run: ``auto`` picks CUDA when available."""
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    """Weights dtype: ``auto`` is bfloat16 on CUDA and float32 on CPU."""
    max_prompt_tokens: PositiveInt = 8192
    """Longest prompt accepted; longer prompts fail with EXEC_ERR rather than silently losing their start."""
    seed: int = 0
    """Seed of sampled (temperature > 0) generations, advanced per request for reproducible runs."""
    cpu_threads: PositiveInt = 1
    """Torch CPU threads (process-wide). Small models decode fastest on one: SmolLM2-135M made 20.6 tok/s on
    one thread and 3.5 tok/s on two of a busy 2-core machine. Raise it for large models on idle CPUs."""


class LocalBackend(ChatBackend):
    """Generates with a local transformers model; one generation at a time per model."""

    supports_regex = True

    def __init__(self, config: LocalBackendConfig | None = None, price: ModelPrice | None = None) -> None:
        self.config = config or LocalBackendConfig()
        super().__init__(self.config.model, price)
        self._load_lock = threading.Lock()
        self._one_at_a_time = LoopSemaphore(1)
        self._loaded: tuple[Any, Any, Any] | None = None
        self._constraints: dict[str, Any] = {}
        self._constraint_backend: Any = None
        self._requests = 0

    @classmethod
    def from_loaded(
        cls, model: Any, tokenizer: Any, config: LocalBackendConfig | None = None, price: ModelPrice | None = None
    ) -> "LocalBackend":
        """A backend around a model already in memory, e.g. one being trained: it generates with the live
        weights, so RL rollouts come from the current policy. ``config.path`` and ``device`` are not used."""
        backend = cls(config, price)
        backend._loaded = (require_extra("local", "torch"), model, tokenizer)
        return backend

    def load(self) -> tuple[Any, Any, Any]:
        """Load (once) and return ``(torch, model, tokenizer)``."""
        with self._load_lock:
            if self._loaded is None:
                self._loaded = self._load()
            return self._loaded

    def _load(self) -> tuple[Any, Any, Any]:
        torch = require_extra("local", "torch")
        transformers = require_extra("local", "transformers")
        transformers.utils.logging.disable_progress_bar()
        source = Path(self.config.path) if self.config.path else embedded_model_dir()
        local_only = Path(source).exists()
        device = self.config.device
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        if device == "cpu":
            torch.set_num_threads(self.config.cpu_threads)
        dtype_name = self.config.dtype
        if dtype_name == "auto":
            dtype_name = "bfloat16" if device == "cuda" else "float32"
        tokenizer = transformers.AutoTokenizer.from_pretrained(source, local_files_only=local_only)
        model = transformers.AutoModelForCausalLM.from_pretrained(
            source, dtype=getattr(torch, dtype_name), local_files_only=local_only
        ).to(device)
        model.eval()
        if tokenizer.chat_template is None:
            raise BackendError(f"model at {source} has no chat template; give a chat (instruct) model")
        return torch, model, tokenizer

    def prompt_token_bound(self, messages: Sequence[Message]) -> int:
        """The prompt's tokens counted with the model's tokenizer once it is loaded (before, the UTF-8 bound),
        and never more than ``max_prompt_tokens``: a longer prompt is refused before it runs."""
        bound = min(prompt_token_bound(messages), self.config.max_prompt_tokens)
        size = sum(len(message.content) for message in messages)
        if self._loaded is None or size > 16 * self.config.max_prompt_tokens:
            return bound  # counting would only confirm the cap, at the cost of tokenizing a huge prompt
        tokenizer = self._loaded[2]
        try:
            encoded = tokenizer.apply_chat_template(
                _chat(messages), add_generation_prompt=True, tokenize=True, return_dict=True
            )
        except Exception:  # e.g. text the tokenizer cannot encode: the proven bound still holds
            return bound
        return min(bound, len(encoded["input_ids"]))

    async def _complete(self, request: GenerationRequest) -> Completion:
        async with self._one_at_a_time:
            self._requests += 1
            seed = self.config.seed + self._requests
            return await asyncio.to_thread(self._generate, request, seed)

    def _generate(self, request: GenerationRequest, seed: int) -> Completion:
        torch, model, tokenizer = self.load()
        max_tokens, stop = request.max_tokens, list(request.stop)
        transformers = require_extra("local", "transformers")
        inputs = tokenizer.apply_chat_template(
            _chat(request.messages), add_generation_prompt=True, return_tensors="pt", return_dict=True
        )
        prompt_tokens = inputs["input_ids"].shape[1]
        if prompt_tokens > self.config.max_prompt_tokens:
            limit = self.config.max_prompt_tokens
            raise BackendError(f"prompt of {prompt_tokens} tokens exceeds max_prompt_tokens={limit}")
        options: dict[str, Any] = {"max_new_tokens": max_tokens, "pad_token_id": tokenizer.eos_token_id}
        if request.temperature > 0:
            torch.manual_seed(seed)
            options.update(do_sample=True, temperature=request.temperature, top_p=1.0, top_k=0)
        else:
            options.update(do_sample=False, temperature=None, top_p=None, top_k=None)
        try:
            if request.json_schema is not None:
                constraint = self._constraint("json", request.json_schema)
                options["logits_processor"] = transformers.LogitsProcessorList([constraint])
            if request.regex is not None:
                constraint = self._constraint("regex", request.regex)
                options["logits_processor"] = transformers.LogitsProcessorList([constraint])
        except ValueError as error:  # outlines-core: unsupported schema, or too many automaton states
            raise BackendError(f"cannot build the decoding constraint: {error}") from error
        if stop:
            options["stop_strings"] = stop
            options["tokenizer"] = tokenizer
        with torch.inference_mode():
            output = model.generate(**inputs.to(model.device), **options)
        generated = output[0, prompt_tokens:]
        completion_tokens = int((generated != tokenizer.eos_token_id).sum())
        text = tokenizer.decode(generated, skip_special_tokens=True)
        reason = "length" if completion_tokens >= max_tokens else "stop"
        for marker in stop:
            if marker in text:
                text, reason = text[: text.index(marker)], "stop"
        return Completion(text, prompt_tokens, completion_tokens, reason)

    def _constraint(self, kind: Literal["json", "regex"], target: dict[str, Any] | str) -> Any:
        # Index construction costs up to seconds per grammar: keep one per grammar, reset before each use.
        source = json.dumps(target, sort_keys=True) if kind == "json" else str(target)
        key = f"{kind}:{source}"
        if key not in self._constraints:
            if self._constraint_backend is None:
                outlines = require_extra("local", "outlines")
                core = require_extra("local", "outlines.backends.outlines_core")
                _, model, tokenizer = self.load()
                self._constraint_backend = core.OutlinesCoreBackend(outlines.from_transformers(model, tokenizer))
            build = (
                self._constraint_backend.get_json_schema_logits_processor
                if kind == "json"
                else self._constraint_backend.get_regex_logits_processor
            )
            self._constraints[key] = build(source)
        processor = self._constraints[key]
        processor.reset()
        return processor


def _chat(messages: Sequence[Message]) -> list[dict[str, str]]:
    """Messages as the chat template takes them (tool observations are user turns)."""
    return [{"role": m.role if m.role != "tool" else "user", "content": m.content} for m in messages]

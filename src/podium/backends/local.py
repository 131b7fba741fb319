"""A Hugging Face causal LM run in-process with transformers (CPU or GPU), optionally with a LoRA adapter, with
grammar-constrained decoding (regular expressions and JSON schemas) through llguidance."""

import asyncio
import copy
import functools
import inspect
import random
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import NonNegativeInt, PositiveInt

from podium.backends.base import BackendError, ChatBackend, Completion, GenerationRequest
from podium.backends.choices import decode_choice
from podium.backends.constraint import GrammarProcessor, TokenCounter, grammar_tokenizer, schema_regex
from podium.backends.embedded import EMBEDDED_MODEL, embedded_model_dir
from podium.concurrency import LoopSemaphore
from podium.config import Config
from podium.core.messages import Message
from podium.core.progress import token_progress
from podium.costs.bounds import prompt_token_bound
from podium.costs.prices import ModelPrice
from podium.extras import quiet_library_deprecations, require_extra

HEAD_ROWS = 8192
"""Vocabulary rows of the LM head upcast to float32 at a time (:func:`float32_logits`): 128 MB for a 4096-wide model."""


class LocalBackendConfig(Config):
    """A model loaded in this process."""

    model: str = EMBEDDED_MODEL
    """Name used in pools, records and price sheets."""
    path: str | None = None
    """Checkpoint directory or hub id; ``None`` means the embedded SmolLM2-135M-Instruct."""
    adapter: str | None = None
    """A LoRA adapter directory (from ``podium train sft`` with ``lora:``) merged into the model when it loads."""
    device: Literal["auto", "cpu", "cuda"] = "auto"
    """Where to run: ``auto`` picks CUDA when available."""
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    """Weights dtype: ``auto`` is bfloat16 on CUDA and float32 on CPU."""
    max_prompt_tokens: PositiveInt = 8192
    """Longest prompt accepted; longer prompts fail with EXEC_ERR rather than silently losing their start."""
    seed: int = 0
    """Seed of sampled (temperature > 0) generations, advanced per request for reproducible runs; a request's own
    seed takes its place."""
    prompt_cache_mb: NonNegativeInt = 1024
    """Memory (MB) for the keys and values of recent prompts, so that a prompt starting like one of them (the next
    turn of an episode, another task under the same system prompt) runs only its new tokens; 0 keeps none. A token
    takes about 45 KB for SmolLM2-135M in float32 and 0.5 MB for a 7B Llama in bfloat16."""
    cpu_threads: PositiveInt = 1
    """Torch CPU threads (process-wide). Small models decode fastest on one: SmolLM2-135M made 20.6 tok/s on
    one thread and 3.5 tok/s on two of a busy 2-core machine. Raise it for large models on idle CPUs."""


_LOADING = threading.Lock()
"""One model load at a time in a process: transformers builds a model's modules on the meta device by patching
torch process-wide, so a second model loading at the same moment (a shadow's beside the live one) found meta
tensors ("Cannot copy out of meta tensor")."""


class LocalBackend(ChatBackend):
    """Generates with a local transformers model; one generation at a time per model."""

    supports_regex = True
    supports_choices = True

    def __init__(self, config: LocalBackendConfig | None = None, price: ModelPrice | None = None) -> None:
        self.config = config or LocalBackendConfig()
        super().__init__(self.config.model, price)
        self._load_lock = threading.Lock()
        self._one_at_a_time = LoopSemaphore(1)
        self._loaded: tuple[Any, Any, Any] | None = None
        self._grammar_tokenizer: Any = None
        self._requests = 0
        self._prompts = PromptCache(self.config.prompt_cache_mb * 2**20)

    @classmethod
    def from_loaded(
        cls, model: Any, tokenizer: Any, config: LocalBackendConfig | None = None, price: ModelPrice | None = None
    ) -> "LocalBackend":
        """A backend around a model already in memory, e.g. one being trained: it generates with the live
        weights, so RL rollouts come from the current policy. ``config.path`` and ``device`` are not used."""
        backend = cls(config, price)
        backend._loaded = (require_extra("local", "torch"), model, tokenizer)
        return backend

    def weights_changed(self) -> None:
        """Forget the cached prompts: their keys, values and logits came from the weights before the update."""
        self._prompts.clear()

    def load(self) -> tuple[Any, Any, Any]:
        """Load (once) and return ``(torch, model, tokenizer)``."""
        with self._load_lock:
            if self._loaded is None:
                with _LOADING:
                    self._loaded = self._load()
            return self._loaded

    def _load(self) -> tuple[Any, Any, Any]:
        torch = require_extra("local", "torch")
        transformers = require_extra("local", "transformers")
        transformers.utils.logging.disable_progress_bar()
        quiet_library_deprecations()
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
        if self.config.adapter:
            model = load_adapter(model, self.config.adapter)
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
            seed = self.config.seed + self._requests if request.seed is None else request.seed
            work = self._choose if request.choices else self._generate
            return await asyncio.to_thread(work, request, seed)

    def _prompt(self, request: GenerationRequest) -> tuple[Any, list[int]]:
        """The request's chat-templated prompt, as tensors and as token ids, refused past ``max_prompt_tokens``."""
        tokenizer = self.load()[2]
        inputs = tokenizer.apply_chat_template(
            _chat(request.messages), add_generation_prompt=True, return_tensors="pt", return_dict=True
        )
        prompt_tokens = inputs["input_ids"].shape[1]
        if prompt_tokens > self.config.max_prompt_tokens:
            limit = self.config.max_prompt_tokens
            raise BackendError(f"prompt of {prompt_tokens} tokens exceeds max_prompt_tokens={limit}")
        return inputs, [int(token) for token in inputs["input_ids"][0]]

    def _choose(self, request: GenerationRequest, seed: int) -> Completion:
        """One of ``request.choices``, decoded as grammar-constrained decoding would decode it (see
        :mod:`podium.backends.choices`), with every choice's probability. A single choice is forced: no model
        call."""
        torch, model, tokenizer = self.load()
        _, prompt = self._prompt(request)
        prompt_tokens = len(prompt)
        if len(request.choices) == 1:
            return Completion(request.choices[0], prompt_tokens, 0, "stop", choice_probs={request.choices[0]: 1.0})
        end = [int(tokenizer.eos_token_id)]
        sequences = [list(tokenizer(choice, add_special_tokens=False)["input_ids"]) + end for choice in request.choices]

        def next_logits(prefix: Sequence[int]) -> Any:
            return self._prompts.last_logits(torch, model, [*prompt, *prefix])

        decoded = decode_choice(sequences, next_logits, temperature=request.temperature, rng=random.Random(seed))
        text = request.choices[decoded.index]
        probs = dict(zip(request.choices, decoded.probabilities, strict=True))
        return Completion(text, prompt_tokens, len(sequences[decoded.index]), "stop", choice_probs=probs)

    def _generate(self, request: GenerationRequest, seed: int) -> Completion:
        torch, model, tokenizer = self.load()
        max_tokens, stop = request.max_tokens, list(request.stop)
        transformers = require_extra("local", "transformers")
        inputs, prompt = self._prompt(request)
        prompt_tokens = len(prompt)
        options: dict[str, Any] = {"max_new_tokens": max_tokens, "pad_token_id": tokenizer.eos_token_id}
        if request.temperature > 0:
            torch.manual_seed(seed)
            options.update(do_sample=True, temperature=request.temperature, top_p=request.top_p, top_k=0)
        else:
            options.update(do_sample=False, temperature=None, top_p=None, top_k=None)
        try:
            regex = schema_regex(request.json_schema) if request.json_schema is not None else request.regex
            if regex is not None:
                options["logits_processor"] = transformers.LogitsProcessorList([self._constraint(regex)])
        except ValueError as error:  # a grammar llguidance cannot use
            raise BackendError(f"cannot build the decoding constraint: {error}") from error
        report = token_progress.get()
        if report is not None:
            options["streamer"] = TokenCounter(report)
        if stop:
            options["stop_strings"] = stop
            options["tokenizer"] = tokenizer
        past, _ = self._prompts.prefix(prompt)
        options[cache_keyword(model)] = past
        with torch.inference_mode():
            output = model.generate(**inputs.to(model.device), **options, return_dict_in_generate=True)
        cache = returned_cache(output)
        cache.crop(prompt_tokens - cache.get_seq_length())  # keep the prompt's keys and values, not the reply's
        self._prompts.store(prompt, cache)
        generated = output.sequences[0, prompt_tokens:]
        completion_tokens = int((generated != tokenizer.eos_token_id).sum())
        text = tokenizer.decode(generated, skip_special_tokens=True)
        reason = "length" if completion_tokens >= max_tokens else "stop"
        for marker in stop:
            if marker in text:
                text, reason = text[: text.index(marker)], "stop"
        return Completion(text, prompt_tokens, completion_tokens, reason)

    def _constraint(self, regex: str) -> GrammarProcessor:
        tokenizer = self.load()[2]
        if self._grammar_tokenizer is None:  # generations run one at a time: no race
            self._grammar_tokenizer = grammar_tokenizer(tokenizer)
        return GrammarProcessor(self._grammar_tokenizer, regex)


class PromptCache:
    """The key/value caches of recent prompts and the logits after each, within a budget of bytes (least recently
    used dropped first). A prompt runs only the tokens after the longest prefix it shares with a cached prompt: the
    next turn of an episode extends the last, the episodes of a run share their system prompt, and a prompt asked
    again (every path of an explored episode starts alike) runs none when its logits are known, else its last token."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.entries: OrderedDict[tuple[int, ...], tuple[Any, Any, int]] = OrderedDict()
        """Each cached prompt's key/value cache, the logits after it (``None`` if not computed) and its bytes."""

    def clear(self) -> None:
        """Forget every cached prompt."""
        self.entries.clear()

    def last_logits(self, torch: Any, model: Any, prompt: Sequence[int]) -> Any:
        """The next-token logits after ``prompt``; only the last position's are computed."""
        key = tuple(prompt)
        if key in self.entries and self.entries[key][1] is not None:
            self.entries.move_to_end(key)
            return self.entries[key][1]
        past, shared = self.prefix(key)
        rounded = model.dtype != torch.float32
        with torch.inference_mode():
            ids = torch.tensor([list(key[shared:])], device=model.device)
            output = model(
                input_ids=ids,
                **{cache_keyword(model): past},
                use_cache=True,
                logits_to_keep=1,
                output_hidden_states=rounded,
            )
            logits = float32_logits(torch, model, output) if rounded else output.logits[0, -1].float()
        self.store(key, returned_cache(output), logits)
        return logits

    def prefix(self, key: Sequence[int]) -> tuple[Any, int]:
        """A copy of the cache of the longest prefix ``key`` shares with a cached prompt (``None`` when it shares
        none), and that prefix's length. At least one token of ``key`` is left to run: its logits are needed."""
        best: tuple[int, ...] = ()
        shared = 0
        for cached in self.entries:
            limit = min(len(cached), len(key) - 1)
            common = next((i for i in range(limit) if cached[i] != key[i]), limit)
            if common > shared:
                best, shared = cached, common
        if not shared:
            return None, 0
        past = copy.deepcopy(self.entries[best][0])
        if shared < len(best):
            past.crop(shared - len(best))  # a negative count removes that many cached tokens from the end
        return past, shared

    def store(self, key: Sequence[int], cache: Any, logits: Any = None) -> None:
        """Keep ``cache``, which holds exactly the tokens of ``key``, and the logits after them if known."""
        key = tuple(key)
        size = kv_bytes(cache)
        if size > self.max_bytes:
            return
        self.entries[key] = (cache, logits, size)
        self.entries.move_to_end(key)
        while sum(entry[2] for entry in self.entries.values()) > self.max_bytes:
            self.entries.popitem(last=False)


def cache_keyword(model: Any) -> str:
    """The keyword ``model`` takes its key/value cache by: ``cache`` in recent transformers, ``past_key_values``
    before (a keyword the model does not know would be ignored: new tokens run without their context)."""
    return _cache_keyword_of(type(model))


@functools.cache
def _cache_keyword_of(model_class: type) -> str:
    """:func:`cache_keyword` for a model class, read from its signature once."""
    return "cache" if "cache" in inspect.signature(model_class.forward).parameters else "past_key_values"


def returned_cache(output: Any) -> Any:
    """The key/value cache a forward pass or ``generate`` returned, under either name."""
    cache = getattr(output, "cache", None)
    return cache if cache is not None else output.past_key_values


def float32_logits(torch: Any, model: Any, output: Any) -> Any:
    """The last position's logits with the LM head run again in float32 on its hidden state. A model in bfloat16
    rounds the head's output to 8 significant bits, so two choices whose logits differ by less than about 0.06 (at
    magnitude 10) tie at 0.5: 8 of 100 decisions of the claim's orchestrator on an H200 did. The model's own logits
    are kept where the recomputed ones differ from them by more than that rounding (a head that scales or caps its
    output)."""
    own = output.logits[0, -1].float()
    head = model.get_output_embeddings()
    hidden = output.hidden_states[-1][0, -1].float()
    exact = torch.cat([rows.float() @ hidden for rows in head.weight.split(HEAD_ROWS)])
    if getattr(head, "bias", None) is not None:
        exact = exact + head.bias.float()
    return exact if torch.allclose(exact, own, rtol=2**-7, atol=2**-7) else own


def kv_bytes(cache: Any) -> int:
    """The bytes of a transformers cache's keys and values."""
    return sum(tensor.nbytes for layer in cache.layers for tensor in (layer.keys, layer.values) if tensor is not None)


def _chat(messages: Sequence[Message]) -> list[dict[str, str]]:
    """Messages as the chat template takes them (tool observations are user turns)."""
    return [{"role": m.role if m.role != "tool" else "user", "content": m.content} for m in messages]


def load_adapter(model: Any, adapter: str) -> Any:
    """``model`` with the LoRA adapter in directory ``adapter`` merged into its weights (needs peft)."""
    if not (Path(adapter) / "adapter_config.json").exists():
        raise BackendError(
            f"no LoRA adapter at {adapter} (adapter_config.json is missing): `podium train sft` with a `lora:` "
            "config writes one"
        )
    peft = require_extra("local", "peft")
    return peft.PeftModel.from_pretrained(model, adapter).merge_and_unload()

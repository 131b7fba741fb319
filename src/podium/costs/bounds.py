"""Cost bounds: the most a generation or a call can cost, known before it runs, so budgets can refuse it.

Prompt tokens are bounded without a tokenizer by the prompt's UTF-8 size: every tokenizer a chat model uses
(byte-level BPE, SentencePiece with byte fallback, WordPiece, tiktoken) turns each content token into at least
one byte of text, so the text's tokens are at most its UTF-8 bytes (plus a dummy prefix piece, counted in the
overheads). What a chat template adds is bounded by :data:`MESSAGE_OVERHEAD_TOKENS` per message (ChatML,
Llama 3, Gemma and Mistral frame a message with 3 to 6 special and role tokens) and
:data:`REQUEST_OVERHEAD_TOKENS` per request (a BOS token, the generation prompt and the default system prompt
that some templates insert when none is given). Characters / 3 is not a bound: a prompt of digits runs about
one token per character. A backend that has the model's tokenizer counts exactly instead (see
:meth:`podium.backends.base.ChatBackend.prompt_token_bound`).
"""

from collections.abc import Sequence
from dataclasses import dataclass

from podium.core.calls import CallUsage
from podium.core.messages import Message
from podium.costs.prices import ModelPrice

MESSAGE_OVERHEAD_TOKENS = 8
"""Most tokens a chat template adds around one message, its role name included."""
REQUEST_OVERHEAD_TOKENS = 64
"""Most tokens a chat template adds once per request (BOS, generation prompt, a default system prompt)."""
MAX_CHARS_PER_TOKEN = 256
"""Most characters one completion token decodes to, generously: the longest tokens of chat tokenizers are runs of
spaces or punctuation some dozens of characters long (SmolLM2's longest decodes to 81). A reply longer than
``max_tokens`` times this cannot have been generated within ``max_tokens``."""


@dataclass(frozen=True)
class CostBound:
    """The most a call can cost, estimated before it runs (budgets refuse calls that could overspend)."""

    usd: float = 0.0
    tokens: int = 0

    def __add__(self, other: "CostBound") -> "CostBound":
        return CostBound(self.usd + other.usd, self.tokens + other.tokens)

    def __mul__(self, times: int) -> "CostBound":
        return CostBound(self.usd * times, self.tokens * times)

    def clip(self, usage: CallUsage, *, usd: bool = True, tokens: bool = True) -> CallUsage:
        """``usage`` with its dollars (if ``usd``) and tokens (if ``tokens``) cut to this bound, ``clipped`` set
        when anything was cut: what was reserved is the most that is charged, whatever was reported."""
        spent = usage.usd if not usd else min(usage.usd, self.usd)
        input_tokens, output_tokens = usage.input_tokens, usage.output_tokens
        if tokens:
            input_tokens = min(input_tokens, self.tokens)
            output_tokens = min(output_tokens, self.tokens - input_tokens)
        if (spent, input_tokens, output_tokens) == (usage.usd, usage.input_tokens, usage.output_tokens):
            return usage
        update = {"usd": spent, "input_tokens": input_tokens, "output_tokens": output_tokens, "clipped": True}
        return usage.model_copy(update=update)


def prompt_token_bound(prompt: str | Sequence[Message]) -> int:
    """The most tokens ``prompt`` can take under any chat template: its UTF-8 bytes plus the template overheads.
    A string counts as the content of one message."""
    messages = [Message(role="user", content=prompt)] if isinstance(prompt, str) else prompt
    size = sum(len(m.content.encode("utf-8", "surrogatepass")) + len(m.role) for m in messages)
    return size + MESSAGE_OVERHEAD_TOKENS * len(messages) + REQUEST_OVERHEAD_TOKENS


def completion_chars_bound(max_tokens: int) -> int:
    """The most characters a completion of at most ``max_tokens`` tokens can hold."""
    return max_tokens * MAX_CHARS_PER_TOKEN


def estimate_tokens(text: str) -> int:
    """An upper bound of the tokens of ``text`` sent as one message (:func:`prompt_token_bound`)."""
    return prompt_token_bound(text)


def generation_bound(
    price: ModelPrice, prompt: str | Sequence[Message], max_tokens: int, prompt_tokens: int | None = None
) -> CostBound:
    """The most one generation can cost: the prompt's token bound (``prompt_tokens`` when the caller counted
    them with the model's tokenizer) plus a full completion budget."""
    tokens = prompt_token_bound(prompt) if prompt_tokens is None else prompt_tokens
    return CostBound(usd=price.cost(tokens, max_tokens), tokens=tokens + max_tokens)

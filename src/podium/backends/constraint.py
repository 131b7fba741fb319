"""Constrained decoding for local models with llguidance: a logits processor that masks every token the grammar
does not allow next, and a streamer that reports how many tokens a generation has made so far.

llguidance computes each mask lazily from the grammar (about a millisecond a token), so a grammar with long
bounded repetitions (a 400-character argument) costs nothing to build, where a precompiled index would take
tens of seconds.
"""

import json
from collections.abc import Callable
from typing import Any

from podium.extras import require_extra


class GrammarProcessor:
    """A transformers logits processor for one generation of batch size 1: the logits of tokens the grammar
    does not allow next are set to minus infinity; once the grammar is complete only end-of-sequence is left."""

    def __init__(self, tokenizer: Any, regex: str) -> None:
        llguidance = require_extra("local", "llguidance")
        self._torch = require_extra("local", "llguidance.torch")
        self.matcher = llguidance.LLMatcher(tokenizer, llguidance.LLMatcher.grammar_from_regex(regex))
        if self.matcher.is_error():
            raise ValueError(f"the grammar cannot be used: {self.matcher.get_error()}")
        self.mask = self._torch.allocate_token_bitmask(1, tokenizer.vocab_size)
        self.prompt_tokens: int | None = None

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        if self.prompt_tokens is None:
            self.prompt_tokens = input_ids.shape[1]
        elif not self.matcher.consume_token(int(input_ids[0, -1])):
            raise ValueError(f"the model produced a token the grammar refused: {self.matcher.get_error()}")
        self._torch.fill_next_token_bitmask(self.matcher, self.mask, 0)
        self._torch.apply_token_bitmask_inplace(scores, self.mask.to(scores.device))
        return scores


def grammar_tokenizer(tokenizer: Any) -> Any:
    """llguidance's view of a Hugging Face tokenizer (built once per model: about a second)."""
    return require_extra("local", "llguidance.hf").from_tokenizer(tokenizer)


def schema_regex(schema: dict[str, Any]) -> str:
    """The regular expression of JSON instances of ``schema`` (compact, at most one space between tokens)."""
    build = require_extra("local", "outlines_core.json_schema").build_regex_from_schema
    return build(json.dumps(schema), r"[ ]?")


class TokenCounter:
    """A transformers streamer that calls ``report`` with the number of tokens generated so far."""

    def __init__(self, report: Callable[[int], None]) -> None:
        self.report = report
        self.generated = -1  # the first put() carries the prompt

    def put(self, value: Any) -> None:
        self.generated += 1
        if self.generated > 0:
            self.report(self.generated)

    def end(self) -> None:
        """Generation finished; the last count was reported already."""

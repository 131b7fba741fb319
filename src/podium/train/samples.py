"""Trajectory → training samples: the orchestrator's conversation tokenized with its own chat template, with a loss
mask that is 1 exactly on the tokens the orchestrator generated (SPEC §7).

The sequence is built turn by turn. Before each assistant turn the conversation so far is rendered the way the
orchestrator was prompted (``add_generation_prompt=True``); when that rendering extends the tokens already built,
the new tokens (observation, next generation prompt) are appended with mask 0, and the turn's generated text is
tokenized in place with mask 1, followed by the end-of-turn token the model emitted. Templates that rewrite earlier
turns (Qwen3 strips the ``<think>`` blocks of past turns) break that prefix property: the model then generated the
turn conditioned on a different text than the running sequence, so a new sample starts whose prompt is exactly
that rendering. Every generated token is trained once, conditioned on what the model actually saw.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from podium.backends.choices import decision_positions
from podium.core.messages import Message
from podium.core.trajectory import Trajectory, Turn
from podium.errors import PodiumError

_SENTINEL = "PODIUMSENTINELTURN"
"""Assistant content of the probe conversation: no whitespace or tags a template could trim or rewrite."""
NO_TURN = -1
"""Turn index of tokens the orchestrator did not generate."""


class TrainingDataError(PodiumError, ValueError):
    """A trajectory or tokenizer cannot be turned into training samples; the message says why."""


@dataclass(frozen=True)
class TrainingSample:
    """One token sequence to train on."""

    input_ids: list[int]
    """Prompt, then generated turns interleaved with observations."""
    mask: list[int]
    """1 on tokens the orchestrator generated (its text and its end-of-turn token), 0 elsewhere."""
    turns: list[int]
    """Turn index (0-based, counting assistant turns) of each generated token; ``NO_TURN`` elsewhere."""
    prompt_length: int
    """Tokens before the first generated one: the rendering the orchestrator was first prompted with."""

    @property
    def labels(self) -> list[int]:
        """Causal-LM labels: the token where the mask is 1, -100 (ignored by the loss) elsewhere."""
        return [token if bit else -100 for token, bit in zip(self.input_ids, self.mask, strict=True)]


class ChatFormat:
    """A tokenizer's chat template, measured once: what it writes after an assistant message's content, and which
    of those tokens the model itself generates (its end-of-turn / EOS tokens)."""

    def __init__(self, tokenizer: Any) -> None:
        if getattr(tokenizer, "chat_template", None) is None:
            raise TrainingDataError("the tokenizer has no chat template; training needs the orchestrator's template")
        self.tokenizer = tokenizer
        probe = [
            {"role": "system", "content": "S"},
            {"role": "user", "content": "U"},
            {"role": "assistant", "content": _SENTINEL},
        ]
        rendered = self.render(probe, generation_prompt=False)
        if rendered.count(_SENTINEL) != 1:
            raise TrainingDataError("the chat template does not write assistant messages verbatim")
        self.end_of_turn = self.encode(rendered.split(_SENTINEL, 1)[1])
        """Tokens the template writes after an assistant message's content (e.g. ``<|im_end|>`` and a newline)."""
        self.stop_ids = _stop_ids(tokenizer)
        """Token ids that end a generation."""
        generated = 0
        while generated < len(self.end_of_turn) and self.end_of_turn[generated] in self.stop_ids:
            generated += 1
        self.generated_end = self.end_of_turn[:generated]
        """The leading end-of-turn tokens the model generates (mask 1); the rest is template (mask 0)."""

    def render(self, messages: Sequence[dict[str, str]], *, generation_prompt: bool) -> str:
        """The template's text for ``messages``."""
        return self.tokenizer.apply_chat_template(
            list(messages), tokenize=False, add_generation_prompt=generation_prompt
        )

    def encode(self, text: str) -> list[int]:
        """Tokens of already-templated text (the template wrote any BOS it wants)."""
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])


def _stop_ids(tokenizer: Any) -> set[int]:
    stops = tokenizer.eos_token_id
    ids = set(stops) if isinstance(stops, list | tuple | set) else {stops}
    return {int(token) for token in ids if token is not None}


def chat_dicts(messages: Sequence[Message]) -> list[dict[str, str]]:
    """Messages in the shape chat templates take; ``tool`` observations go in as ``user`` turns, as the local
    backend prompts them."""
    return [{"role": "user" if m.role == "tool" else m.role, "content": m.content} for m in messages]


def turn_mask(turn: Turn | None, generated: list[int], chat: ChatFormat, decisions: bool) -> list[int]:
    """Which of a turn's generated tokens train: all of them, or with ``decisions`` only those where the turn's
    choices branch (a free-text turn keeps all; a forced turn, none)."""
    if not decisions or turn is None or not turn.choices or turn.output not in turn.choices:
        return [1] * len(generated)
    sequences = [chat.encode(choice) + chat.generated_end for choice in turn.choices]
    positions = set(decision_positions(sequences)[turn.choices.index(turn.output)])
    return [int(position in positions) for position in range(len(generated))]


def trajectory_samples(trajectory: Trajectory, chat: ChatFormat, *, decisions: bool = False) -> list[TrainingSample]:
    """The samples of one trajectory: one when the template keeps history, one per rewritten context otherwise;
    with ``decisions`` only the decision tokens of turns with finite choices train (:func:`turn_mask`)."""
    messages = chat_dicts(trajectory.messages)
    assistant = [i for i, message in enumerate(messages) if message["role"] == "assistant"]
    if not assistant:
        raise TrainingDataError(f"trajectory {trajectory.id} has no orchestrator turn in its messages")
    if assistant[0] == 0:
        raise TrainingDataError(f"trajectory {trajectory.id} starts with an orchestrator turn: no prompt")
    samples: list[TrainingSample] = []
    ids: list[int] = []
    mask: list[int] = []
    turns: list[int] = []
    prompt_length = 0
    for turn, index in enumerate(assistant):
        context = chat.encode(chat.render(messages[:index], generation_prompt=True))
        if ids and context[: len(ids)] == ids:
            new = context[len(ids) :]
            ids, mask, turns = ids + new, mask + [0] * len(new), turns + [NO_TURN] * len(new)
        else:
            if ids:
                samples.append(_finish(ids, mask, turns, prompt_length))
            ids, mask, turns, prompt_length = context, [0] * len(context), [NO_TURN] * len(context), len(context)
        generated = chat.encode(messages[index]["content"]) + chat.generated_end
        bits = turn_mask(trajectory.turns[turn] if turn < len(trajectory.turns) else None, generated, chat, decisions)
        template_end = chat.end_of_turn[len(chat.generated_end) :]
        ids = ids + generated + template_end
        mask = mask + bits + [0] * len(template_end)
        turns = turns + [turn if bit else NO_TURN for bit in bits] + [NO_TURN] * len(template_end)
    if any(mask):
        samples.append(_finish(ids, mask, turns, prompt_length))
    return [sample for sample in samples if any(sample.mask)]


def _finish(ids: list[int], mask: list[int], turns: list[int], prompt_length: int) -> TrainingSample:
    """The sample up to its last trained token: what follows it teaches nothing. A sample with no trained token
    (only forced turns) is kept whole and dropped by the caller."""
    end = max((i for i, bit in enumerate(mask) if bit), default=len(ids) - 1) + 1
    return TrainingSample(ids[:end], mask[:end], turns[:end], prompt_length)


def single_sample(trajectory: Trajectory, chat: ChatFormat, *, decisions: bool = False) -> TrainingSample:
    """The trajectory as one sequence, as RL rollouts need (one row per rollout); with ``decisions``, a rollout of
    forced turns only is one row that trains nothing. Fails when the template rewrites history, since no single
    sequence then matches what the orchestrator saw at every turn."""
    samples = trajectory_samples(trajectory, chat, decisions=decisions)
    if decisions and not samples:
        whole = single_sample(trajectory, chat)
        size = len(whole.input_ids)
        return TrainingSample(whole.input_ids, [0] * size, [NO_TURN] * size, whole.prompt_length)
    if len(samples) != 1:
        raise TrainingDataError(
            f"the chat template rewrites earlier turns (trajectory {trajectory.id} needs {len(samples)} sequences), "
            "so a rollout is not one sequence; use a template that keeps history within an episode (for Qwen3, "
            "observations wrapped exactly in <tool_response>…</tool_response> keep the reasoning of earlier turns)"
        )
    return samples[0]


def masked_spans(sample: TrainingSample) -> list[list[int]]:
    """The generated token runs of a sample, in order (one per turn)."""
    spans: list[list[int]] = []
    previous = NO_TURN
    for token, bit, turn in zip(sample.input_ids, sample.mask, sample.turns, strict=True):
        if bit:
            if turn != previous or not spans:
                spans.append([])
            spans[-1].append(token)
        previous = turn if bit else NO_TURN
    return spans

"""Trajectory → training sample: the loss mask covers exactly the orchestrator's generated tokens."""

import pytest

pytest.importorskip("trl")

from podium.core.messages import Message
from podium.train.samples import (
    NO_TURN,
    ChatFormat,
    TrainingDataError,
    masked_spans,
    single_sample,
    trajectory_samples,
)
from tests.test_train_support import REWRITING, arithmetic_trajectory, tiny_tokenizer


def generated_texts(trajectory) -> list[str]:
    return [message.content for message in trajectory.messages if message.role == "assistant"]


def test_mask_covers_exactly_the_generated_turns() -> None:
    tokenizer = tiny_tokenizer()
    chat = ChatFormat(tokenizer)
    trajectory = arithmetic_trajectory(123456, 789, think=True)
    [sample] = trajectory_samples(trajectory, chat)
    spans = masked_spans(sample)
    assert [tokenizer.decode(span, skip_special_tokens=True) for span in spans] == generated_texts(trajectory)
    assert all(span[-1] == tokenizer.eos_token_id for span in spans)  # the model learns to end its turn
    unmasked = tokenizer.decode([t for t, bit in zip(sample.input_ids, sample.mask, strict=True) if not bit])
    for message in trajectory.messages:
        if message.role != "assistant":
            assert message.content in unmasked
    assert sample.input_ids[-1] == tokenizer.eos_token_id  # nothing after the last generated token
    assert sum(sample.mask[: sample.prompt_length]) == 0
    assert {turn for turn, bit in zip(sample.turns, sample.mask, strict=True) if bit} == {0, 1}
    assert all(turn == NO_TURN for turn, bit in zip(sample.turns, sample.mask, strict=True) if not bit)
    assert [label for label, bit in zip(sample.labels, sample.mask, strict=True) if not bit] == [-100] * (
        len(sample.mask) - sum(sample.mask)
    )


def test_sequence_is_what_the_template_renders() -> None:
    tokenizer = tiny_tokenizer()
    chat = ChatFormat(tokenizer)
    trajectory = arithmetic_trajectory(12, 34)
    [sample] = trajectory_samples(trajectory, chat)
    conversation = [{"role": m.role, "content": m.content} for m in trajectory.messages]
    rendered = chat.encode(chat.render(conversation, generation_prompt=False))
    assert rendered[: len(sample.input_ids)] == sample.input_ids


def test_history_rewriting_template_starts_a_new_sample_per_rewritten_context() -> None:
    tokenizer = tiny_tokenizer(REWRITING)
    chat = ChatFormat(tokenizer)
    trajectory = arithmetic_trajectory(123456, 789, think=True)
    samples = trajectory_samples(trajectory, chat)
    assert len(samples) == 2
    spans = [tokenizer.decode(span, skip_special_tokens=True) for s in samples for span in masked_spans(s)]
    assert spans == generated_texts(trajectory)  # the <think> block of turn 0 is trained, in its own sample
    # The second turn is conditioned on what the orchestrator saw: history without the earlier <think>.
    second = samples[1]
    seen = tokenizer.decode(second.input_ids[: second.prompt_length])
    assert "<think>" not in seen and '"print(123456*789)"' in seen
    conversation = [{"role": m.role, "content": m.content} for m in trajectory.messages[:4]]
    assert second.input_ids[: second.prompt_length] == chat.encode(chat.render(conversation, generation_prompt=True))
    with pytest.raises(TrainingDataError, match="rewrites earlier turns"):
        single_sample(trajectory, chat)


def test_history_rewriting_template_without_thinking_keeps_one_sample() -> None:
    chat = ChatFormat(tiny_tokenizer(REWRITING))
    assert len(trajectory_samples(arithmetic_trajectory(5, 7), chat)) == 1


def test_tool_messages_are_observations() -> None:
    tokenizer = tiny_tokenizer()
    trajectory = arithmetic_trajectory(5, 7)
    messages = list(trajectory.messages)
    messages[3] = Message(role="tool", content=messages[3].content, name="python")
    sample = single_sample(trajectory.model_copy(update={"messages": messages}), ChatFormat(tokenizer))
    spans = [tokenizer.decode(span, skip_special_tokens=True) for span in masked_spans(sample)]
    assert spans == generated_texts(trajectory)


def test_unusable_inputs_are_refused() -> None:
    chat = ChatFormat(tiny_tokenizer())
    trajectory = arithmetic_trajectory(5, 7)
    with pytest.raises(TrainingDataError, match="no orchestrator turn"):
        trajectory_samples(trajectory.model_copy(update={"messages": trajectory.messages[:2]}), chat)
    with pytest.raises(TrainingDataError, match="no prompt"):
        trajectory_samples(trajectory.model_copy(update={"messages": trajectory.messages[2:]}), chat)
    bare = tiny_tokenizer()
    bare.chat_template = None
    with pytest.raises(TrainingDataError, match="no chat template"):
        ChatFormat(bare)

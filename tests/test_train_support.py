"""Shared pieces of the training tests: a tiny byte-level BPE tokenizer with a ChatML template, a tiny random Llama,
and scripted orchestration trajectories. Nothing is downloaded."""

import pytest

pytest.importorskip("trl")

from typing import Any

from podium.core.calls import CallUsage, Status, ToolCall, ToolResult
from podium.core.messages import Message
from podium.core.trajectory import Trajectory, Turn

CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
"""SmolLM2's template without its default system prompt."""

REWRITING = (
    "{% set ns = namespace(last_user=0) %}{% for m in messages %}{% if m['role'] == 'user' %}"
    "{% set ns.last_user = loop.index0 %}{% endif %}{% endfor %}"
    "{% for m in messages %}{% set content = m['content'] %}"
    "{% if m['role'] == 'assistant' and loop.index0 < ns.last_user and '</think>' in content %}"
    "{% set content = content.split('</think>')[-1].lstrip() %}{% endif %}"
    "<|im_start|>{{ m['role'] }}\n{{ content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
"""Like Qwen3: the <think> blocks of assistant turns before the last user message are dropped from history."""

SYSTEM = "You are an orchestrator. Call python for arithmetic, then answer in <answer></answer>."


def tiny_tokenizer(template: str = CHATML) -> Any:
    """A byte-level BPE (any text round-trips) trained in milliseconds on orchestration-like text."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers  # here: collection stays fast
    from transformers import PreTrainedTokenizerFast

    corpus = [SYSTEM, '<tool_call>{"name": "python", "arguments": {"code": "print(12*34)"}}</tool_call>']
    corpus += ['<tool_response name="python" status="OK">\n408\n</tool_response>', "<answer>408</answer>"]
    corpus += ["<think>I should compute it.</think>", "What is 12 * 34?"] * 3
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tokenizer.train_from_iterator(
        corpus,
        trainers.BpeTrainer(
            vocab_size=400, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
        ),
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, bos_token="<|im_start|>", eos_token="<|im_end|>", pad_token="<|im_end|>"
    )
    fast.chat_template = template
    return fast


def tiny_model(tokenizer: Any, seed: int = 0) -> Any:
    """A randomly initialised 2-layer Llama with hidden size 32."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=512,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    return LlamaForCausalLM(config)


def tool_turn(index: int, output: str, observation: str, status: Status = Status.OK, usd: float = 0.0) -> Turn:
    """A turn that called python once."""
    call = ToolCall(name="python", arguments={"code": "print(1)"}, id="call_0")
    result = ToolResult(call=call, status=status, observation=observation, usage=CallUsage(usd=usd))
    return Turn(index=index, output=output, results=[result])


def arithmetic_trajectory(a: int, b: int, *, think: bool = False, answer: int | None = None) -> Trajectory:
    """question → python call → observation → answer (the correct product unless ``answer`` says otherwise)."""
    product = a * b if answer is None else answer
    call = f'<tool_call>{{"name": "python", "arguments": {{"code": "print({a}*{b})"}}}}</tool_call>'
    first = f"<think>I should compute it.</think>\n{call}" if think else call
    observation = f'<tool_response name="python" status="OK">\n{a * b}\n</tool_response>'
    final = f"<answer>{product}</answer>"
    return Trajectory(
        question=f"What is {a} * {b}?",
        turns=[tool_turn(0, first, f"{a * b}\n", usd=1e-5), Turn(index=1, output=final)],
        answer=str(product),
        messages=[
            Message(role="system", content=SYSTEM),
            Message(role="user", content=f"What is {a} * {b}?"),
            Message(role="assistant", content=first),
            Message(role="user", content=observation),
            Message(role="assistant", content=final),
        ],
    )


def test_tiny_tokenizer_round_trips_orchestration_text() -> None:
    tokenizer = tiny_tokenizer()
    text = '<tool_call>{"name": "python", "arguments": {"code": "print(987654*321)"}}</tool_call> é'
    assert tokenizer.decode(tokenizer(text, add_special_tokens=False)["input_ids"]) == text

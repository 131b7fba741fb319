"""Exact decoding among a few words: branching positions, greedy and sampled choices, probabilities that match
token-by-token constrained decoding, the prompt cache (shared with generation), and the contract every backend keeps."""

import asyncio
import math
import random
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from podium.backends.base import BackendError
from podium.backends.choices import decision_positions, decode_choice
from podium.backends.scripted import ScriptedBackend
from podium.core.messages import Message


def test_decisions_are_where_the_words_branch() -> None:
    assert decision_positions([[1, 2, 9], [3, 9]]) == [[0], [0]]
    assert decision_positions([[1, 2, 9], [1, 3, 9], [4, 9]]) == [[0, 1], [0, 1], [0]]
    assert decision_positions([[1, 9], [1, 2, 9]]) == [[1], [1]]  # a word that is a prefix of another
    assert decision_positions([[5, 6, 9]]) == [[]]  # one choice: nothing to decide


def logits_from(table: dict[tuple[int, ...], dict[int, float]], calls: list) -> object:
    def next_logits(prefix):
        calls.append(tuple(prefix))
        row = [-50.0] * 10
        for token, value in table[tuple(prefix)].items():
            row[token] = value
        return row

    return next_logits


def test_probabilities_are_the_renormalised_products_at_branching_positions() -> None:
    sequences = [[1, 2, 9], [1, 3, 9], [4, 9]]
    table = {(): {1: math.log(3), 4: 0.0}, (1,): {2: 0.0, 3: math.log(4)}}
    calls: list = []
    decoded = decode_choice(sequences, logits_from(table, calls), temperature=0.0, rng=random.Random(0))
    assert decoded.probabilities == pytest.approx([0.75 * 0.2, 0.75 * 0.8, 0.25])
    assert decoded.index == 1  # greedy: token 1 (0.75) at the first branch, then token 3 (0.8)
    assert sorted(set(calls)) == [(), (1,)]  # one model call per branching prefix


def test_sampling_follows_the_distribution_at_its_temperature() -> None:
    sequences = [[1, 9], [2, 9]]
    table = {(): {1: math.log(3), 2: 0.0}}
    rng = random.Random(7)
    picks = [decode_choice(sequences, logits_from(table, []), temperature=1.0, rng=rng).index for _ in range(4000)]
    assert picks.count(0) / len(picks) == pytest.approx(0.75, abs=0.03)
    sharp = [decode_choice(sequences, logits_from(table, []), temperature=0.25, rng=rng).index for _ in range(2000)]
    assert sharp.count(0) / len(sharp) == pytest.approx(81 / 82, abs=0.02)  # (3/1)^(1/0.25) = 81 : 1


def test_a_backend_that_cannot_choose_refuses_and_a_reply_outside_the_set_is_malformed() -> None:
    messages = [Message(role="user", content="pick")]
    with pytest.raises(BackendError, match="cannot constrain replies to a set of choices"):
        asyncio.run(ScriptedBackend(["a"]).generate(messages, choices=["a", "b"]))
    with pytest.raises(BackendError, match="none of the choices"):
        asyncio.run(ScriptedBackend(["c"], supports_choices=True).generate(messages, choices=["a", "b"]))
    with pytest.raises(BackendError, match="one of json_schema, regex or choices"):
        asyncio.run(ScriptedBackend(["a"], supports_choices=True, supports_regex=True).generate(
            messages, choices=["a"], regex="a"))  # fmt: skip


@contextmanager
def tokens_run(model: Any) -> Iterator[list[int]]:
    """The number of tokens each forward pass of ``model`` runs inside the block."""
    ran: list[int] = []
    hook = model.register_forward_pre_hook(
        lambda _, args, kwargs: ran.append(kwargs["input_ids"].shape[1]), with_kwargs=True
    )
    try:
        yield ran
    finally:
        hook.remove()


def test_a_local_model_chooses_exactly_and_caches_the_prompt() -> None:
    torch = pytest.importorskip("torch")
    pytest.importorskip("trl")
    from podium.backends.local import LocalBackend, LocalBackendConfig
    from tests.test_train_support import tiny_model, tiny_tokenizer

    tokenizer = tiny_tokenizer()
    model = tiny_model(tokenizer)
    backend = LocalBackend.from_loaded(model, tokenizer, LocalBackendConfig(model="tiny"))
    messages = [Message(role="system", content="Pick a tool."), Message(role="user", content="What is 12 * 34?")]
    words = ["python", "answer"]
    reply = asyncio.run(backend.generate(messages, choices=words, max_tokens=8))
    prompt = tokenizer.apply_chat_template(
        [{"role": m.role, "content": m.content} for m in messages], add_generation_prompt=True, tokenize=True,
        return_dict=True,
    )["input_ids"]  # fmt: skip

    sequences = [[*tokenizer(w, add_special_tokens=False)["input_ids"], tokenizer.eos_token_id] for w in words]
    first = [seq[0] for seq in sequences]
    assert len(set(first)) == 2, "the test words must branch at their first token"
    with torch.inference_mode():
        root = torch.log_softmax(model(input_ids=torch.tensor([prompt])).logits[0, -1].float(), dim=-1)
    expected = torch.softmax(torch.tensor([float(root[token]) for token in first]), dim=0).tolist()
    assert [reply.choice_probs[w] for w in words] == pytest.approx(expected, rel=1e-4)
    assert reply.text == words[max(range(2), key=expected.__getitem__)]
    extended = [*messages, Message(role="assistant", content=reply.text), Message(role="user", content="408")]
    cached = asyncio.run(backend.generate(extended, choices=words)).choice_probs
    fresh = LocalBackend.from_loaded(model, tokenizer, LocalBackendConfig(model="tiny"))
    assert asyncio.run(fresh.generate(extended, choices=words)).choice_probs == pytest.approx(cached, rel=1e-4)
    sibling = [messages[0], Message(role="user", content="What is 56 * 78?")]  # shares only the system prompt
    with tokens_run(model) as ran:
        shared = asyncio.run(backend.generate(sibling, choices=words)).choice_probs
    sibling_tokens = len(tokenizer.apply_chat_template(
        [{"role": m.role, "content": m.content} for m in sibling], add_generation_prompt=True, tokenize=True,
        return_dict=True,
    )["input_ids"])  # fmt: skip
    assert 0 < ran[0] < sibling_tokens - 4, "the shared system prompt is not run again"
    assert asyncio.run(fresh.generate(sibling, choices=words)).choice_probs == pytest.approx(shared, rel=1e-4)
    with torch.no_grad():
        next(model.parameters()).mul_(1.5)  # an RL step changes the live weights in place
    backend.weights_changed()
    updated = LocalBackend.from_loaded(model, tokenizer, LocalBackendConfig(model="tiny"))
    after = asyncio.run(backend.generate(extended, choices=words)).choice_probs
    assert after == pytest.approx(asyncio.run(updated.generate(extended, choices=words)).choice_probs, rel=1e-4)
    assert after != pytest.approx(cached, rel=1e-4)
    forced = asyncio.run(backend.generate(messages, choices=["answer"]))
    assert (forced.text, forced.choice_probs, forced.output_tokens) == ("answer", {"answer": 1.0}, 0)


def test_a_bfloat16_model_scores_its_choices_with_a_float32_head() -> None:
    """In bfloat16 the LM head's output keeps 8 significant bits: two choices whose logits differ by 0.01 at
    magnitude 10 round to one value, a 0.5/0.5 tie (8 of 100 decisions of the claim's orchestrator tied so on a GPU).
    The head is run again in float32 on the last hidden state, which keeps the difference."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("trl")
    from podium.backends.local import LocalBackend, LocalBackendConfig
    from tests.test_train_support import tiny_model, tiny_tokenizer

    tokenizer = tiny_tokenizer()
    model = tiny_model(tokenizer).to(torch.bfloat16)
    messages = [Message(role="system", content="Pick a tool."), Message(role="user", content="What is 12 * 34?")]
    words = ["python", "answer"]
    chat = [{"role": m.role, "content": m.content} for m in messages]
    ids = tokenizer.apply_chat_template(chat, add_generation_prompt=True, return_dict=True)["input_ids"]
    prompt = torch.tensor([ids])
    first = [tokenizer(word, add_special_tokens=False)["input_ids"][0] for word in words]
    with torch.inference_mode():
        hidden = model(input_ids=prompt, output_hidden_states=True).hidden_states[-1][0, -1].float()
    wide, second = hidden.abs().topk(2).indices.tolist()
    head = model.get_output_embeddings().weight
    with torch.no_grad():  # logits of about 9.99 and 10.0: both round to 10 in bfloat16
        head[first] = 0.0
        head[first, wide] = float(9.99 / hidden[wide])
        head[first[1], second] = float(0.01 / hidden[second])
        exact = head[first].float() @ hidden
        rounded = model(input_ids=prompt, logits_to_keep=1).logits[0, -1, first]
    assert rounded[0] == rounded[1] and exact[1] - exact[0] > 0.005, "the test needs a tie in bfloat16 only"
    reply = asyncio.run(LocalBackend.from_loaded(model, tokenizer, LocalBackendConfig(model="tiny")).generate(
        messages, choices=words
    ))  # fmt: skip
    assert [reply.choice_probs[word] for word in words] == pytest.approx(torch.softmax(exact, 0).tolist(), rel=1e-4)
    assert reply.text == "answer" and reply.choice_probs["answer"] > 0.5


def test_a_local_model_generates_from_the_cached_prompt_prefix() -> None:
    pytest.importorskip("torch")
    pytest.importorskip("trl")
    from podium.backends.local import LocalBackend, LocalBackendConfig
    from tests.test_train_support import tiny_model, tiny_tokenizer

    tokenizer = tiny_tokenizer()
    model = tiny_model(tokenizer)
    backend = LocalBackend.from_loaded(model, tokenizer, LocalBackendConfig(model="tiny"))
    first = [Message(role="system", content="Answer briefly."), Message(role="user", content="What is 12 * 34?")]
    reply = asyncio.run(backend.generate(first, max_tokens=6))
    second = [*first, Message(role="assistant", content=reply.text), Message(role="user", content="And 56 * 78?")]
    with tokens_run(model) as ran:
        cached = asyncio.run(backend.generate(second, max_tokens=6))
    assert 0 < ran[0] < cached.input_tokens - reply.input_tokens + 4, "the first turn is not run again"
    fresh = LocalBackend.from_loaded(model, tokenizer, LocalBackendConfig(model="tiny"))
    assert asyncio.run(fresh.generate(second, max_tokens=6)).text == cached.text
    off = LocalBackend.from_loaded(model, tokenizer, LocalBackendConfig(model="tiny", prompt_cache_mb=0))
    asyncio.run(off.generate(first, max_tokens=6))
    with tokens_run(model) as ran:
        assert asyncio.run(off.generate(second, max_tokens=6)).text == cached.text
    assert ran[0] == cached.input_tokens, "with no cache the whole prompt runs"


def test_the_prompt_cache_keeps_the_latest_prompts_within_its_memory() -> None:
    torch = pytest.importorskip("torch")
    pytest.importorskip("trl")
    from podium.backends.local import PromptCache, kv_bytes
    from tests.test_train_support import tiny_model, tiny_tokenizer

    model = tiny_model(tiny_tokenizer())
    probe = PromptCache(max_bytes=2**30)
    probe.last_logits(torch, model, list(range(10, 20)))
    ten_tokens = kv_bytes(probe.entries[tuple(range(10, 20))][0])
    assert ten_tokens > 0
    cache = PromptCache(max_bytes=2 * ten_tokens)
    prompts = [[start, *range(11, 20)] for start in (30, 40, 50)]  # ten tokens each, sharing no prefix
    for prompt in prompts:
        cache.last_logits(torch, model, prompt)
    assert list(cache.entries) == [tuple(prompt) for prompt in prompts[1:]]
    cache.last_logits(torch, model, list(range(60, 90)))  # thirty tokens: more than the whole budget, not kept
    assert list(cache.entries) == [tuple(prompt) for prompt in prompts[1:]]


def test_the_cache_goes_by_the_name_the_model_takes() -> None:
    from types import SimpleNamespace

    from podium.backends.local import cache_keyword, returned_cache

    class Recent:
        def forward(self, input_ids: Any = None, cache: Any = None, **kwargs: Any) -> None: ...

    class Older:
        def forward(self, input_ids: Any = None, past_key_values: Any = None, **kwargs: Any) -> None: ...

    assert (cache_keyword(Recent()), cache_keyword(Older())) == ("cache", "past_key_values")
    assert returned_cache(SimpleNamespace(cache="kv")) == "kv"
    assert returned_cache(SimpleNamespace(past_key_values="kv")) == "kv"

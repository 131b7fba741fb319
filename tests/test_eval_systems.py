"""Baseline systems with scripted backends, and system config files."""

import asyncio

import pytest

from podium.backends.base import BackendError
from podium.backends.scripted import ScriptedBackend
from podium.datasets.items import BenchmarkItem
from podium.errors import ConfigError
from podium.evaluate.system_config import (
    build_system,
    load_system_config,
    system_config_from_dict,
)
from podium.evaluate.systems import (
    ItemSolver,
    MajorityVoteSystem,
    ModelCaller,
    RouteRule,
    SelfRefineSystem,
    SingleModelSystem,
    StaticRouterSystem,
    critique_accepts,
)

MATH = BenchmarkItem(id="m1", question="What is 6 * 7?", gold="42", verifier="math")
LONG = BenchmarkItem(id="m2", question="Prove that " + "x" * 300, gold="1", verifier="math")


def test_single_model_records_one_turn_with_usage_and_the_boxed_answer():
    backend = ScriptedBackend(["6 * 7 = 42, so \\boxed{42}"])
    trajectory = asyncio.run(SingleModelSystem("one", ModelCaller(backend, max_tokens=64)).solve(MATH))
    assert trajectory.answer == "42" and trajectory.stop_reason == "answer"
    assert len(trajectory.turns) == 1 and trajectory.usage.output_tokens == 7  # words
    assert trajectory.metadata["item_id"] == "m1"
    system_prompt, question = backend.requests[0]
    assert "\\boxed" in system_prompt.content and question.content == MATH.question


def test_majority_vote_normalises_answers_and_keeps_the_first_winner_text():
    replies = ["\\boxed{\\dfrac{1}{2}}", "\\boxed{3}", "\\boxed{\\frac{1}{2}}", "\\boxed{3}", "\\boxed{0.5}"]
    backend = ScriptedBackend(replies)
    system = MajorityVoteSystem("vote", ModelCaller(backend, temperature=0.7), votes=5)
    trajectory = asyncio.run(system.solve(MATH))
    # \dfrac{1}{2} and \frac{1}{2} merge (2 votes) and tie with 3; the first to appear wins.
    assert trajectory.answer == "\\dfrac{1}{2}"
    assert trajectory.metadata["votes"] == {"\\frac{1}{2}": 2, "3": 2, "0.5": 1}
    assert len(trajectory.turns) == 5 and trajectory.usage.output_tokens == 5


def test_majority_vote_survives_some_failed_samples_but_not_all():
    backend = ScriptedBackend(["\\boxed{7}", "\\boxed{7}"])  # the third request has no reply: BackendError
    trajectory = asyncio.run(MajorityVoteSystem("v", ModelCaller(backend, temperature=1.0), votes=3).solve(MATH))
    assert trajectory.answer == "7" and trajectory.metadata["failed_samples"] == 1
    with pytest.raises(BackendError, match="all 2 samples failed"):
        asyncio.run(MajorityVoteSystem("v", ModelCaller(ScriptedBackend([]), temperature=1.0), votes=2).solve(MATH))
    with pytest.raises(ValueError, match="temperature"):
        MajorityVoteSystem("v", ModelCaller(backend, temperature=0.0), votes=3)


def test_self_refine_revises_until_the_critic_accepts():
    replies = [
        "\\boxed{41}",
        "6 * 7 is not 41. VERDICT: INCORRECT",
        "Fixed: \\boxed{42}",
        "All good. VERDICT: CORRECT",
    ]
    backend = ScriptedBackend(replies)
    trajectory = asyncio.run(SelfRefineSystem("refine", ModelCaller(backend), rounds=3).solve(MATH))
    assert trajectory.answer == "42"
    assert trajectory.metadata["steps"] == ["draft", "critique", "revise", "critique"]
    revise_request = backend.requests[2]
    assert revise_request[-2].content == "\\boxed{41}" and "not 41" in revise_request[-1].content


def test_self_refine_stops_after_its_rounds():
    backend = ScriptedBackend(["\\boxed{1}", "VERDICT: INCORRECT", "\\boxed{2}"], repeat_last=False)
    trajectory = asyncio.run(SelfRefineSystem("refine", ModelCaller(backend), rounds=1).solve(MATH))
    assert trajectory.answer == "2" and len(backend.requests) == 3


def test_critique_verdict_parsing():
    assert critique_accepts("fine\nVERDICT: CORRECT")
    assert not critique_accepts("VERDICT: CORRECT at first, but no. VERDICT: INCORRECT")
    assert not critique_accepts("no verdict")


def test_static_router_sends_long_or_keyword_questions_to_the_strong_model():
    cheap, strong = ScriptedBackend(["\\boxed{1}"], model="cheap"), ScriptedBackend(["\\boxed{2}"], model="strong")
    rules = [RouteRule("strong", keywords=("prove",)), RouteRule("strong", min_chars=200)]
    router = StaticRouterSystem("router", {"cheap": ModelCaller(cheap), "strong": ModelCaller(strong)}, rules, "cheap")
    assert router.route(MATH) == "cheap" and router.route(LONG) == "strong"
    trajectory = asyncio.run(router.solve(LONG))
    assert trajectory.metadata["route"] == "strong" and trajectory.answer == "2"
    with pytest.raises(ValueError, match="unknown backends"):
        StaticRouterSystem("r", {"cheap": ModelCaller(cheap)}, [RouteRule("gpt")], "cheap")


def test_system_config_files_build_each_baseline(tmp_path):
    path = tmp_path / "router.yaml"
    path.write_text(
        "kind: static_router\n"
        "default: cheap\n"
        "backends:\n"
        "  cheap: {kind: scripted, replies: ['\\boxed{1}'], price: {input_per_mtok: 1, output_per_mtok: 2}}\n"
        "  strong: {kind: scripted, replies: ['\\boxed{2}']}\n"
        "rules: [{backend: strong, keywords: [prove]}]\n"
    )
    router = build_system(load_system_config(path))
    assert isinstance(router, ItemSolver) and router.name == "static_router:cheap+strong"
    trajectory = asyncio.run(router.solve(MATH))
    words_in, words_out = trajectory.usage.input_tokens, trajectory.usage.output_tokens
    assert trajectory.usage.usd == pytest.approx((words_in * 1 + words_out * 2) / 1e6)
    assert router.callers["cheap"].backend.price.input_per_mtok == 1
    vote = build_system(
        system_config_from_dict(
            {"kind": "majority_vote", "votes": 3, "backend": {"kind": "scripted", "replies": ["x"]}}
        )
    )
    assert isinstance(vote, MajorityVoteSystem) and vote.caller.temperature == 0.7


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"backend": {"kind": "scripted", "replies": ["x"]}}, "kind: required"),
        ({"kind": "oracle9"}, "'oracle9' is not one of"),
        (
            {"kind": "single_model", "backend": {"kind": "scripted", "replies": []}},
            "backend.replies: List should have at least 1 item",
        ),
        ({"kind": "single_model", "backend": {"kind": "http", "model": "m"}}, "backend.base_url: Field required"),
        ({"kind": "majority_vote", "temperature": 0, "backend": {"kind": "scripted", "replies": ["x"]}}, "temperature"),
        ({"kind": "self_refine", "rounds": 2, "bogus": 1, "backend": {"kind": "local"}}, "bogus"),
    ],
)
def test_invalid_system_configs_name_the_field(data, message):
    with pytest.raises(ConfigError, match=message):
        system_config_from_dict(data)


def test_http_backend_without_a_known_price_must_be_given_one():
    config = system_config_from_dict(
        {
            "kind": "single_model",
            "backend": {"kind": "http", "model": "no-such-model-xyz", "base_url": "http://127.0.0.1:9/v1"},
        }
    )
    with pytest.raises(ConfigError, match="set 'price:'"):
        build_system(config)
    priced = {
        "kind": "http",
        "model": "m",
        "base_url": "http://127.0.0.1:9/v1",
        "price": {"input_per_mtok": 0, "output_per_mtok": 0},
    }
    system = build_system(system_config_from_dict({"kind": "single_model", "name": "local-vllm", "backend": priced}))
    assert system.name == "local-vllm" and system.caller.backend.model == "m"

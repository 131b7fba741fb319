"""RouteLLM's metrics against hand-computed values, the router baselines, and the escalate policy."""

import asyncio

import numpy as np
import pytest

from podium.backends.scripted import ScriptedBackend
from podium.core.calls import Status
from podium.datasets.items import BenchmarkItem
from podium.errors import ConfigError
from podium.evaluate.routing.data import STRONG, WEAK, Outcome, RoutingItem, split_of
from podium.evaluate.routing.metrics import Point, apgr, cpt, curve, pgr
from podium.evaluate.routing.routers import (
    fit_logreg,
    knn_scores,
    logreg_scores,
    operating_point,
    oracle_flags,
    random_scores,
    sweep,
)
from podium.policies import ActionParseError, Answer, Calls, EscalationPolicy, PoolView
from podium.runtime import Executor, RunConfig
from tests.runtime_fixtures import replay_pool


def test_pgr_apgr_and_cpt_match_hand_computed_values() -> None:
    weak, strong = 0.5, 0.9
    assert pgr(0.7, weak, strong) == pytest.approx(0.5)
    # one point on the diagonal: the area is that of the random router
    assert apgr([Point(0.5, 0.7)], weak, strong) == pytest.approx(0.5)
    # (0.2, PGR 0.75): 0.2·0.75/2 + 0.8·(0.75+1)/2 = 0.075 + 0.7
    point = [Point(0.2, 0.8)]
    assert apgr(point, weak, strong) == pytest.approx(0.775)
    assert cpt(point, weak, strong, 0.5) == pytest.approx(0.2 * 0.5 / 0.75)
    assert cpt(point, weak, strong, 0.8) == pytest.approx(0.2 + 0.8 * 0.05 / 0.25)
    assert apgr([], weak, strong) == pytest.approx(0.5)
    assert cpt([], weak, strong, 0.8) == pytest.approx(0.8)
    # a curve keeps the best PGR at a share; a point below the weak model cannot lower the weak endpoint
    assert curve([Point(0.0, 0.4), Point(0.5, 0.6), Point(0.5, 0.8)], weak, strong) == [
        (0.0, 0.0),
        (0.5, pytest.approx(0.75)),
        (1.0, 1.0),
    ]
    with pytest.raises(ValueError, match="more accurate"):
        pgr(0.5, 0.9, 0.5)


def item(index: int, weak: bool, strong: bool) -> RoutingItem:
    question = BenchmarkItem(id=str(index), question=f"q{index}", gold="1", verifier="math")
    outcomes = {WEAK: Outcome(weak, 0.001, "", (1000, 0)), STRONG: Outcome(strong, 0.01, "", (1000, 0))}
    return RoutingItem(question, "test", outcomes)


ITEMS = [item(0, True, True), item(1, False, True), item(2, False, False), item(3, True, False)]


def test_operating_points_sweep_and_oracle() -> None:
    point = operating_point(ITEMS, [False, True, False, False])
    assert (point.strong_share, point.accuracy) == (0.25, 0.75)
    assert point.usd_per_question == pytest.approx((0.001 * 3 + 0.01) / 4)
    assert oracle_flags(ITEMS) == [False, True, False, False]
    # scores 0.9 > 0.5 = 0.5 > 0.1: thresholds give shares 0, 1/4, 3/4 (tie together), 1
    points = sweep(ITEMS, [0.1, 0.9, 0.5, 0.5])
    assert [(p.strong_share, p.accuracy) for p in points] == [(0, 0.5), (0.25, 0.75), (0.75, 0.5), (1, 0.5)]
    assert random_scores(4, 1) == random_scores(4, 1) != random_scores(4, 2)


def test_knn_and_logreg_routers_learn_from_their_train_rows() -> None:
    train = np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]])
    train /= np.linalg.norm(train, axis=1, keepdims=True)
    gains = np.array([1.0, 1.0, 0.0, -1.0])
    queries = np.array([[1.0, 0.0], [0.0, 1.0]])
    assert knn_scores(train, gains, queries, k=2) == pytest.approx([1.0, -0.5])
    weights = fit_logreg(train, np.array([1.0, 1.0, 0.0, 0.0]), l2=0.01)
    low, high = logreg_scores(weights, queries[::-1])
    assert high > 0.8 > 0.2 > low
    # the fit is the optimum: the penalised log-likelihood's gradient vanishes there
    rng = np.random.default_rng(0)
    features, labels = rng.normal(size=(200, 3)), (rng.random(200) < 0.3).astype(float)
    fitted = fit_logreg(features, labels, l2=0.5)
    x = np.hstack([features, np.ones((200, 1))])
    probability = 1 / (1 + np.exp(-(x @ fitted)))
    assert np.abs(x.T @ (probability - labels) + 0.5 * np.r_[fitted[:-1], 0.0]).max() < 1e-6


def test_splits_are_fixed_by_the_question_text() -> None:
    assert split_of("What is 2 + 2?") == split_of("  what is 2 + 2? ")
    shares = [split_of(f"question {n}") for n in range(2000)]
    assert 0.15 < shares.count("test") / 2000 < 0.25 and 0.06 < shares.count("validation") / 2000 < 0.14


VIEW = PoolView(tools=[], table="| a | model | cheap | $1/$1 per 1M in/out tokens | reason |", workers=["a", "b"])


def test_escalate_policy_parses_one_word_and_its_grammar_offers_only_legal_words() -> None:
    policy = EscalationPolicy()
    assert policy.choices(VIEW) == ["a", "b"] and policy.grammar(VIEW).regex == "(?:a|b)"
    action = policy.parse(" a\n", VIEW, [])
    assert isinstance(action, Calls) and action.calls[0].arguments == {"model": "a"}
    assert policy.choices(VIEW, [action]) == ["b", "accept"]  # a worker asked once is not offered again
    assert policy.grammar(VIEW, [action]).regex == "(?:b|accept)"
    assert isinstance(policy.parse("accept", VIEW, [action]), Answer)
    with pytest.raises(ActionParseError, match="one of: a, b"):
        policy.parse("accept", VIEW, [])
    with pytest.raises(ActionParseError, match="one of: b, accept"):
        policy.parse("a", VIEW, [action])
    assert "- a: cheap, $1/$1 per 1M in/out tokens" in policy.system_prompt(VIEW)


def cat_pool(tmp_path, tools=()) -> object:
    recording = tmp_path / "r.csv"
    recording.write_text(
        'prompt,w,w_response,s,s_response\n"How many legs has a cat?",False,"It has 1 + 2 = 4 legs.\n#### 4",True,'
        '"It has 4 legs."\n'
    )
    return replay_pool(recording, tools)


def test_escalation_episode_escalates_and_accepts_the_whole_last_reply(tmp_path) -> None:
    pool = cat_pool(tmp_path)
    scripted = ScriptedBackend(["w", "s", "accept"])
    trajectory = asyncio.run(
        Executor(pool, RunConfig(policy="escalate"), orchestrator=scripted).run("How many legs has a cat?")
    )
    assert trajectory.answer == "It has 4 legs."  # the caller extracts what its verifier needs
    assert [r.status for r in trajectory.results] == [Status.OK, Status.OK]
    assert trajectory.messages[3].content == "w replied:\nIt has 1 + 2 = 4 legs.\n#### 4"  # the whole reply
    assert [turn.choices for turn in trajectory.turns] == [["w", "s"], ["s", "accept"], ["accept"]]
    unknown = asyncio.run(
        Executor(pool, RunConfig(policy="escalate"), orchestrator=ScriptedBackend(["w", "accept"])).run("Other?")
    )
    assert unknown.results[0].status is Status.EXEC_ERR and unknown.answer == ""
    assert "w failed (EXEC_ERR)" in unknown.messages[3].content


def test_escalation_verify_tool_reports_on_each_reply_and_reply_chars_hides_it(tmp_path) -> None:
    pool = cat_pool(tmp_path, tools=["check_arithmetic"])
    run = RunConfig(policy="escalate", verify="check_arithmetic", reply_chars=0)
    trajectory = asyncio.run(
        Executor(pool, run, orchestrator=ScriptedBackend(["w", "accept"])).run("How many legs has a cat?")
    )
    assert [result.call.name for result in trajectory.results] == ["standard_reasoner", "check_arithmetic"]
    observation = trajectory.messages[3].content
    assert observation.startswith("w replied (10 words).\ncheck_arithmetic: 1 of 1 calculations wrong: 1 + 2 = 4")
    assert "1 + 2 = 4 legs" not in observation.split("\n")[0]
    with pytest.raises(ConfigError, match="verify"):
        Executor(pool, RunConfig(policy="escalate", verify="python"))
    question_only = asyncio.run(
        Executor(pool, RunConfig(policy="escalate", reply_chars=0), orchestrator=ScriptedBackend(["w", "accept"])).run(
            "How many legs has a cat?"
        )
    )
    assert question_only.messages[3].content == "w replied." and question_only.answer.endswith("#### 4")


def test_prices_at_decision_name_each_worker_not_asked_yet_after_a_reply(tmp_path) -> None:
    pool = cat_pool(tmp_path, tools=["check_arithmetic"])
    run = RunConfig(policy="escalate", verify="check_arithmetic", prices_at_decision=True)
    trajectory = asyncio.run(
        Executor(pool, run, orchestrator=ScriptedBackend(["w", "s", "accept"])).run("How many legs has a cat?")
    )
    after_w, after_s = trajectory.messages[3].content, trajectory.messages[5].content
    assert after_w.startswith("w replied:\nIt has 1 + 2 = 4 legs.\n#### 4\ncheck_arithmetic: 1 of 1")
    assert after_w.endswith("\nNot asked yet: s at $1/$1 per 1M in/out tokens.")  # last, beside the decision
    assert "Not asked yet" not in after_s  # every worker has answered: accept is all that is left
    plain = asyncio.run(
        Executor(
            pool, run.model_copy(update={"prices_at_decision": False}), orchestrator=ScriptedBackend(["w", "s"])
        ).run("How many legs has a cat?")
    )
    assert plain.messages[3].content == after_w.rsplit("\n", 1)[0]  # off (the default), the line is all it leaves out
    with pytest.raises(ConfigError, match="prices_at_decision applies to the escalate policy, not to 'serial'"):
        Executor(pool, RunConfig(policy="serial", prices_at_decision=True))


def test_cascade_features_read_the_weak_reply() -> None:
    from podium.evaluate.routing.routers import reply_features
    from podium.pool.builtin.arithmetic import evaluate as arithmetic

    assert arithmetic("9*2") == 18 and arithmetic("1,000 - 4/2") == 998
    with pytest.raises(ValueError):
        arithmetic("__import__('os')")
    good = "She sells 9 eggs for $<<9*2=18>>18.\n#### 18"
    bad = "She sells 9 eggs for $<<9*2=20>>20, so she makes 20 dollars."
    assert reply_features(good)[0] == 1.0 and reply_features(good)[2] == 0.0
    assert reply_features(bad)[0] == 0.0 and reply_features(bad)[2] == 1.0
    cascade = operating_point(ITEMS, [True, False, False, False], cascade=True)
    assert cascade.usd_per_question == pytest.approx((0.01 + 0.001 + 0.001 * 3) / 4)


def test_the_routing_report_charts_and_tabulates_every_system(tmp_path) -> None:
    pytest.importorskip("matplotlib")
    from podium.evaluate.report import write_routing_report

    curves = {"random": [Point(0, 0.5, 0.001), Point(1, 0.9, 0.01)], "orchestrator_grpo": [Point(0.3, 0.8, 0.004)]}
    table = {"apgr": {"random": 0.5, "orchestrator_grpo": 0.61, "orchestrator_grpo_priced": 0.61}}
    page = write_routing_report(tmp_path, curves, table)
    text = page.read_text()
    assert "<td>orchestrator_grpo</td><td>0.6100</td>" in text and "<td>random</td><td>0.5000</td>" in text
    assert "<td>orchestrator_grpo_priced</td><td>0.6100</td>" in text  # a row without a curve of its own
    svg = (tmp_path / "routing.svg").read_text()
    assert "orchestrator_grpo" in svg and "random" in svg and "_priced" not in svg
    write_routing_report(tmp_path / "again", curves, table)
    assert (tmp_path / "again" / "routing.svg").read_text() == svg  # the same bytes: no date, fixed ids

"""Routing metrics against hand-computed values, the routers over any number of workers, and the escalate policy."""

import asyncio

import numpy as np
import pytest

from podium.backends.scripted import ScriptedBackend
from podium.core.calls import Status
from podium.errors import ConfigError
from podium.evaluate.routing.metrics import Point, Reference, apgr, cost_apgr, cost_cpt, cost_curve, cpt, curve, pgr
from podium.evaluate.routing.routers import (
    cascade_sweep,
    operating_point,
    oracle_routes,
    random_sweep,
    weight_sweep,
)
from podium.policies import ActionParseError, Answer, Calls, EscalationPolicy, PoolView
from podium.recording import RecordedTask, hashed_split
from podium.routers.checks import reply_checks, verify_checks
from podium.routers.data import Outcome, RoutingItem
from podium.routers.decide import cascade_stop, choose, choose_by_reward, ranked
from podium.routers.logistic import fit_logreg, logreg_probabilities
from podium.routers.models import CascadeRouter, KnnRouter, LogregRouter, MfRouter, load_router
from podium.runtime import Executor, RunConfig
from support.runtime_fixtures import replay_pool

WEAK, STRONG = Reference("w", 0.5, 0.001), Reference("s", 0.9, 0.01)


def test_pgr_apgr_and_cpt_match_hand_computed_values() -> None:
    assert pgr(0.7, 0.5, 0.9) == pytest.approx(0.5)
    # one point on the diagonal: the area is that of the random router
    assert apgr([Point(0.7, shares={"s": 0.5})], WEAK, STRONG) == pytest.approx(0.5)
    # (0.2, PGR 0.75): 0.2·0.75/2 + 0.8·(0.75+1)/2 = 0.075 + 0.7
    point = [Point(0.8, shares={"s": 0.2})]
    assert apgr(point, WEAK, STRONG) == pytest.approx(0.775)
    assert cpt(point, WEAK, STRONG, 0.5) == pytest.approx(0.2 * 0.5 / 0.75)
    assert cpt(point, WEAK, STRONG, 0.8) == pytest.approx(0.2 + 0.8 * 0.05 / 0.25)
    assert apgr([], WEAK, STRONG) == pytest.approx(0.5)
    assert cpt([], WEAK, STRONG, 0.8) == pytest.approx(0.8)
    # a curve keeps the best PGR at a share; a point below the weak model cannot lower the weak endpoint
    points = [Point(0.4, shares={"s": 0.0}), Point(0.6, shares={"s": 0.5}), Point(0.8, shares={"s": 0.5})]
    assert curve(points, WEAK, STRONG) == [(0.0, 0.0), (0.5, pytest.approx(0.75)), (1.0, 1.0)]
    with pytest.raises(ValueError, match="more accurate"):
        pgr(0.5, 0.9, 0.5)


def test_the_cost_curve_is_the_pareto_frontier_over_normalised_spend_hand_computed() -> None:
    cheapest, best = Reference("c", 0.4, 0.002), Reference("b", 0.8, 0.012)  # a span of $0.01 and of 0.4 accuracy
    points = [
        Point(0.6, 0.004),  # spend 0.2, PGR 0.5
        Point(0.55, 0.006),  # spend 0.4, PGR 0.375: dominated by the point before, off the frontier
        Point(0.76, 0.009),  # spend 0.7, PGR 0.9
        Point(0.9, 0.020),  # dearer than the best worker: past the range
        Point(0.3, 0.001),  # cheaper than the cheapest, and worse: at spend 0, below its endpoint
    ]
    line = cost_curve(points, cheapest, best)
    assert line == [(0.0, 0.0), (pytest.approx(0.2), pytest.approx(0.5)), (pytest.approx(0.7), pytest.approx(0.9)),
                    (1.0, 1.0)]  # fmt: skip
    # area: 0.2·0.5/2 + 0.5·(0.5+0.9)/2 + 0.3·(0.9+1)/2 = 0.05 + 0.35 + 0.285
    assert cost_apgr(points, cheapest, best) == pytest.approx(0.685)
    assert cost_cpt(points, cheapest, best, 0.5) == pytest.approx(0.2)
    assert cost_cpt(points, cheapest, best, 0.8) == pytest.approx(0.2 + 0.5 * 0.3 / 0.4)
    # a point past the best worker's PGR at a lower spend keeps the curve there until spend 1
    assert cost_apgr([Point(1.0, 0.007)], cheapest, best) == pytest.approx(0.5 * 1.5 / 2 + 0.5 * 1.5)
    with pytest.raises(ValueError, match="must cost more"):
        cost_curve([], best, cheapest)


def task(index: int) -> RecordedTask:
    return RecordedTask(id=str(index), question=f"q{index}", gold="1", verifier="math", split="test")


def item(index: int, **correct: bool) -> RoutingItem:
    """A task and each worker's outcome on it: worker ``w`` costs 0.001, ``m`` 0.004, ``s`` 0.01."""
    usd = {"w": 0.001, "m": 0.004, "s": 0.01}
    outcomes = {name: Outcome(right, usd[name], f"reply of {name}", (1000, 0)) for name, right in correct.items()}
    return RoutingItem(task(index), outcomes)


ITEMS = [item(0, w=True, s=True), item(1, w=False, s=True), item(2, w=False, s=False), item(3, w=True, s=False)]


def test_operating_points_routes_and_the_oracle() -> None:
    point = operating_point(ITEMS, [("w",), ("s",), ("w",), ("w",)])
    assert (point.share("s"), point.accuracy, point.calls_per_question) == (0.25, 0.75, 1.0)
    assert point.usd_per_question == pytest.approx((0.001 * 3 + 0.01) / 4)
    cascade = operating_point(ITEMS, [("w", "s"), ("w",), ("w",), ("w",)])  # a cascade pays every worker it asked
    assert cascade.usd_per_question == pytest.approx((0.01 + 0.001 * 4) / 4) and cascade.calls_per_question == 1.25
    assert cascade.shares == {"w": 1.0, "s": 0.25}
    assert oracle_routes(ITEMS, ["w", "s"]) == [("w",), ("s",), ("w",), ("w",)]
    three = [item(0, w=False, m=True, s=True), item(1, w=False, m=False, s=False)]
    assert oracle_routes(three, ["w", "m", "s"]) == [("m",), ("w",)]  # the cheapest right one; else the cheapest


def test_with_two_workers_the_weight_sweep_thresholds_the_difference_of_predicted_accuracies() -> None:
    # predicted (w, s): differences 0.8, 0.0 (a tie: the cheaper), 0.3 and 0.3 (together), -0.5
    quality = np.array([[0.1, 0.9], [0.5, 0.5], [0.3, 0.6], [0.2, 0.5], [0.9, 0.4]])
    items = [item(i, w=i % 2 == 0, s=True) for i in range(5)]
    points = weight_sweep(items, ["w", "s"], quality, [0.001, 0.01])
    assert [p.share("s") for p in points] == [1.0, 0.8, 0.6, 0.2, 0.0]  # every weight from -inf to +inf
    # a cost weight of 50 accuracy points per USD: s pays where it adds more than 50 · $0.009 = 0.45
    assert choose(quality, [0.001, 0.01], 50.0).tolist() == [1, 0, 0, 0, 0]
    assert choose(quality, [0.001, 0.01], 0.0).tolist() == [1, 0, 1, 1, 0]  # ties go to the cheaper
    assert ranked(quality[4], [0.001, 0.01], 0.0) == [0, 1]
    # under cost_penalty (w 1, s $0.015), s is worth 0.9 · (1 − 0.01/0.015) = 0.3 < w's 0.1 · (1 − 0.001/0.015)?
    assert choose_by_reward(quality[:1], [0.001, 0.01], 1.0, 0.015).tolist() == [1]


def test_the_weight_sweep_over_three_workers_meets_every_decision_hand_computed() -> None:
    quality = np.array([[0.2, 0.6, 0.9]])  # one task; w, m, s cost 0.001, 0.004, 0.01
    items = [item(0, w=False, m=True, s=True)]
    points = weight_sweep(items, ["w", "m", "s"], quality, [0.001, 0.004, 0.01])
    # m beats w above weight (0.6-0.2)/0.003 = 133.3; s beats m below (0.9-0.6)/0.006 = 50: s, m, w as it rises
    assert [max(p.shares, key=p.shares.__getitem__) for p in points] == ["s", "m", "w"]
    assert choose(quality, [0.001, 0.004, 0.01], 100.0).tolist() == [1]
    assert choose(quality, [0.001, 0.004, 0.01], 40.0).tolist() == [2]


def test_cascades_stop_at_the_first_reply_below_the_threshold() -> None:
    assert cascade_stop([0.7, 0.2], 0.5) == 1 and cascade_stop([0.4, 0.9], 0.5) == 0
    assert cascade_stop([0.7, 0.6], 0.5) == 2 and cascade_stop([0.7, 0.6], [0.8, 0.5]) == 0
    train = [item(i, w=i % 2 == 0, m=i % 3 == 0, s=True) for i in range(12)]
    for index, it in enumerate(train):  # the replies say it: a wrong one hedges
        for name, outcome in it.outcomes.items():
            text = "The answer is \\boxed{4}." if outcome.correct else "I am not sure, probably 5."
            it.outcomes[name] = Outcome(outcome.correct, outcome.usd, text + " " * index, outcome.tokens)
    replies = [[it.outcomes[n].response or "" for n in ("w", "m", "s")] for it in train]
    correct = np.array([[it.outcomes[n].correct for n in ("w", "m", "s")] for it in train])
    router = CascadeRouter.fit(["w", "m", "s"], np.array([0.001, 0.004, 0.01]), "math", replies, correct)
    assert router.arrays["levels"].shape == (2, 5)  # one logistic regression per level but the last
    points = cascade_sweep(train, router)
    assert max(point.accuracy for point in points) == 1.0  # escalating every hedged reply reaches s where needed
    assert min(point.calls_per_question for point in points) == 1.0


def test_question_routers_learn_each_workers_accuracy_from_their_train_rows(tmp_path) -> None:
    train = np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]])
    train /= np.linalg.norm(train, axis=1, keepdims=True)
    correct = np.array([[False, True], [False, True], [True, True], [True, False]])  # w is right on the second kind
    queries = np.array([[1.0, 0.0], [0.0, 1.0]])
    knn = KnnRouter.fit(["w", "s"], np.array([0.001, 0.01]), "math", train, correct, k=2)
    assert knn.quality(queries).tolist() == [[0.0, 1.0], [1.0, 0.5]]
    logreg = LogregRouter.fit(["w", "s"], np.array([0.001, 0.01]), "math", train, correct, l2=0.01)
    assert logreg.quality(queries)[0, 0] < 0.2 < 0.8 < logreg.quality(queries)[1, 0]
    mf = MfRouter.fit(["w", "s"], np.array([0.001, 0.01]), "math", train, correct, steps=300, learning_rate=0.05)
    assert mf.quality(queries)[0, 0] < 0.5 < mf.quality(queries)[1, 0]
    again = MfRouter.fit(["w", "s"], np.array([0.001, 0.01]), "math", train, correct, steps=300, learning_rate=0.05)
    assert np.array_equal(mf.quality(queries), again.quality(queries))  # a fixed seed: the same fit
    for router in (knn, logreg, mf):
        loaded = load_router(router.save(tmp_path / f"{router.kind}.npz"))
        assert type(loaded) is type(router) and loaded.workers == ["w", "s"]
        assert np.array_equal(loaded.quality(queries), router.quality(queries))
    (tmp_path / "bad.npz").write_bytes(b"not a router")
    with pytest.raises(ConfigError, match="not a fitted router"):
        load_router(tmp_path / "bad.npz")
    # the fit is the optimum: the penalised log-likelihood's gradient vanishes there
    rng = np.random.default_rng(0)
    features, labels = rng.normal(size=(200, 3)), (rng.random(200) < 0.3).astype(float)
    fitted = fit_logreg(features, labels, l2=0.5)
    x = np.hstack([features, np.ones((200, 1))])
    probability = logreg_probabilities(fitted, features)
    assert np.abs(x.T @ (probability - labels) + 0.5 * np.r_[fitted[:-1], 0.0]).max() < 1e-6


def test_the_random_router_mixes_the_cheapest_and_the_best_worker() -> None:
    points = random_sweep(ITEMS, "w", "s", seed=1)
    assert [p.share("s") for p in points] == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert [p.share("s") for p in random_sweep(ITEMS, "w", "s", seed=1)] == [p.share("s") for p in points]


def test_splits_are_fixed_by_the_key() -> None:
    assert hashed_split("What is 2 + 2?") == hashed_split("  what is 2 + 2? ")
    shares = [hashed_split(f"question {n}") for n in range(2000)]
    assert 0.15 < shares.count("test") / 2000 < 0.25 and 0.06 < shares.count("validation") / 2000 < 0.14
    assert {hashed_split(f"q {n}", 0, 0) for n in range(50)} == {"train"}


def test_reply_checks_read_what_a_reply_shows_of_its_errors() -> None:
    from podium.pool.builtin.arithmetic import evaluate as arithmetic

    assert arithmetic("9*2") == 18 and arithmetic("1,000 - 4/2") == 998
    with pytest.raises(ValueError):
        arithmetic("__import__('os')")
    good = reply_checks("She sells 9 eggs for $<<9*2=18>>18.\n#### 18", "math")
    bad = reply_checks("She sells 9 eggs for $<<9*2=20>>20, so I think she makes 20 dollars.", "math")
    assert (good[0], good[2], good[3]) == (1.0, 0.0, 0.0) and (bad[0], bad[2], bad[3]) == (0.0, 1.0, 1.0)
    assert reply_checks("Probably B, or C. Answer: B", "multiple_choice")[0] == 1.0
    assert reply_checks("It could be anything", "multiple_choice")[0] == 0.0
    assert reply_checks("```python\ndef f(:\n```", "code")[-1] == 0.0
    assert reply_checks("```python\ndef f(): pass\n```", "code")[-1] == 1.0
    assert len(reply_checks("Answer: Paris", "qa")) == 3 and reply_checks("Answer: Paris", "qa")[0] == 1.0
    assert verify_checks("x", "multiple_choice") is None and len(verify_checks("x", "math") or []) == 8


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
    run = RunConfig(policy={"name": "escalate", "verify": "check_arithmetic", "reply_chars": 0})
    trajectory = asyncio.run(
        Executor(pool, run, orchestrator=ScriptedBackend(["w", "accept"])).run("How many legs has a cat?")
    )
    assert [result.call.name for result in trajectory.results] == ["standard_reasoner", "check_arithmetic"]
    observation = trajectory.messages[3].content
    assert observation.startswith("w replied (10 words).\ncheck_arithmetic: 1 of 1 calculations wrong: 1 + 2 = 4")
    assert "1 + 2 = 4 legs" not in observation.split("\n")[0]
    with pytest.raises(ConfigError, match="verify"):
        Executor(pool, RunConfig(policy={"name": "escalate", "verify": "python"}))
    question_only = asyncio.run(
        Executor(
            pool,
            RunConfig(policy={"name": "escalate", "reply_chars": 0}),
            orchestrator=ScriptedBackend(["w", "accept"]),
        ).run("How many legs has a cat?")
    )
    assert question_only.messages[3].content == "w replied." and question_only.answer.endswith("#### 4")


def test_prices_at_decision_name_each_worker_not_asked_yet_after_a_reply(tmp_path) -> None:
    pool = cat_pool(tmp_path, tools=["check_arithmetic"])
    run = RunConfig(policy={"name": "escalate", "verify": "check_arithmetic", "prices_at_decision": True})
    trajectory = asyncio.run(
        Executor(pool, run, orchestrator=ScriptedBackend(["w", "s", "accept"])).run("How many legs has a cat?")
    )
    after_w, after_s = trajectory.messages[3].content, trajectory.messages[5].content
    assert after_w.startswith("w replied:\nIt has 1 + 2 = 4 legs.\n#### 4\ncheck_arithmetic: 1 of 1")
    assert after_w.endswith("\nNot asked yet: s at $1/$1 per 1M in/out tokens.")  # last, beside the decision
    assert "Not asked yet" not in after_s  # every worker has answered: accept is all that is left
    plain = asyncio.run(
        Executor(
            pool,
            run.model_copy(update={"policy": run.policy.model_copy(update={"prices_at_decision": False})}),
            orchestrator=ScriptedBackend(["w", "s"]),
        ).run("How many legs has a cat?")
    )
    assert plain.messages[3].content == after_w.rsplit("\n", 1)[0]  # off (the default), the line is all it leaves out
    with pytest.raises(ValueError, match="prices_at_decision applies to the escalate policy, not to 'serial'"):
        RunConfig(policy={"name": "serial", "prices_at_decision": True})


def test_the_routing_report_charts_and_tabulates_every_system(tmp_path) -> None:
    pytest.importorskip("matplotlib")
    from podium.evaluate.report import write_routing_report

    curves = {"random": [Point(0.5, 0.001), Point(0.9, 0.01)], "orchestrator_grpo": [Point(0.8, 0.004)]}
    table = {"apgr": {"random": 0.5, "orchestrator_grpo": 0.61, "orchestrator_grpo_priced": 0.61}}
    page = write_routing_report(tmp_path, curves, table)
    text = page.read_text()
    assert "<td>orchestrator_grpo</td><td>0.6100</td>" in text and "<td>random</td><td>0.5000</td>" in text
    assert "<td>orchestrator_grpo_priced</td><td>0.6100</td>" in text  # a row without a curve of its own
    svg = (tmp_path / "routing.svg").read_text()
    assert "orchestrator_grpo" in svg and "random" in svg and "_priced" not in svg
    write_routing_report(tmp_path / "again", curves, table)
    assert (tmp_path / "again" / "routing.svg").read_text() == svg  # the same bytes: no date, fixed ids

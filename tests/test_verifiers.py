"""Verifiers: hand-made cases, then every gold of the offline data verifying against itself and perturbations not."""

import asyncio
import json
from pathlib import Path

import pytest

from podium.backends.scripted import ScriptedBackend
from podium.core.answers import extract_choice, normalize_answer
from podium.datasets.items import AssertTests, HumanEvalTests
from podium.graders.code import CodeVerifier
from podium.graders.judge import JudgeVerifier, parse_judgement
from podium.graders.math import MathVerifier, math_equivalent
from podium.graders.text import MultipleChoiceVerifier, QAVerifier, exact_match, token_f1

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason="offline benchmark data not present")


def run(coroutine):
    return asyncio.run(coroutine)


def jsonl(name: str) -> list[dict]:
    return [json.loads(line) for line in (DATA / name).read_text(encoding="utf-8").splitlines() if line.strip()]


# ------------------------------------------------------------------------------------------------- math


def test_math_equivalence_cases():
    assert math_equivalent("The answer is $\\boxed{\\frac{1}{2}}$.", "0.5")
    assert math_equivalent("so x = 2,125 in total", "2125")
    assert math_equivalent("\\boxed{\\sqrt{8}}", "2\\sqrt{2}")
    assert not math_equivalent("\\boxed{3}", "2")
    assert not math_equivalent("I don't know", "2")
    verdict = run(MathVerifier().verify("Thus $\\boxed{14/3}$", "\\frac{14}{3}"))
    assert verdict.correct and verdict.outcome == 1 and verdict.score == 1.0
    wrong = run(MathVerifier().verify("no number here", "7"))
    assert not wrong.correct and wrong.reason


@needs_data
def test_every_math500_gold_verifies_and_its_perturbation_does_not():
    rows = jsonl("math/math500.jsonl")
    assert len(rows) == 500
    golds_ok = sum(math_equivalent(f"The answer is $\\boxed{{{r['answer']}}}$", r["answer"]) for r in rows)
    perturbed_ok = sum(math_equivalent(f"$\\boxed{{{r['answer']}+1}}$", r["answer"]) for r in rows)
    assert (golds_ok, perturbed_ok) == (500, 0)


@needs_data
def test_gsm8k_sample():
    rows = jsonl("math/gsm8k_test.jsonl")[::13]  # 102 questions, thousands separators included
    golds = [row["answer"].split("####")[-1].strip() for row in rows]
    assert all(math_equivalent(f"So the total is {gold}.", gold) for gold in golds)
    assert not any(math_equivalent(f"So the total is {int(gold.replace(',', '')) + 1}.", gold) for gold in golds)


# --------------------------------------------------------------------------------------------------- QA


def test_squad_normalisation_and_f1_hand_computed():
    assert normalize_answer("The  Cat, sat!") == "cat sat"
    assert exact_match("the Eiffel Tower.", "Eiffel tower")
    assert token_f1("the cat sat", "cat sat down") == pytest.approx(0.8)  # p = 1, r = 2/3
    assert token_f1("yes", "no") == 0.0
    assert token_f1("no way", "no") == 0.0  # special answers are all-or-nothing
    assert token_f1("", "anything") == 0.0
    verdict = run(QAVerifier().verify("Barack Obama Jr", ["Barack Obama", "Obama"]))
    assert not verdict.correct and verdict.score == pytest.approx(0.8)
    assert run(QAVerifier().verify("obama", ["Barack Obama", "Obama"])).correct


@needs_data
def test_hotpotqa_and_frames_golds_match_and_perturbations_do_not():
    hotpot = json.loads((DATA / "qa/hotpot_distractor_100.json").read_text(encoding="utf-8"))
    frames = jsonl("qa/frames.jsonl")
    answers = [row["answer"] for row in hotpot] + [row["answer"] for row in frames]
    verifier = QAVerifier()
    assert all(run(verifier.verify(answer, answer)).correct for answer in answers)
    # Perturbed: another question's answer (when it differs after normalisation) never matches exactly.
    pairs = [(a, b) for a, b in zip(answers, answers[1:] + answers[:1], strict=True) if not exact_match(a, b)]
    assert len(pairs) > 900
    assert not any(run(verifier.verify(b, a)).correct for a, b in pairs)


# ------------------------------------------------------------------------------------------ multiple choice


@pytest.mark.parametrize(
    ("text", "letter"),
    [
        ("C", "C"),
        ("**B**", "B"),
        ("The answer is (D).", "D"),
        ("After checking each option, Answer: J", "J"),
        ("$\\boxed{E}$", "E"),
        ("I first thought (A) but the answer is B", "B"),
        ("Option C is right", "C"),
        ("A. Paris\nbecause it is the capital", "A"),
        ("the answer is a bit unclear", None),
        ("I have no idea", None),
    ],
)
def test_choice_extraction(text, letter):
    assert extract_choice(text) == letter


def test_multiple_choice_verdicts():
    verifier = MultipleChoiceVerifier(letters="ABCD")
    assert run(verifier.verify("The answer is (B)", "b")).correct
    wrong = run(verifier.verify("The answer is (C)", "B"))
    assert not wrong.correct and wrong.extracted == "C"
    with pytest.raises(ValueError):
        run(verifier.verify("A", "E"))


@needs_data
def test_mmlu_pro_letters():
    rows = jsonl("mc/mmlu_pro_300.jsonl")
    verifier = MultipleChoiceVerifier()
    assert all(run(verifier.verify(f"Let's think. The answer is ({r['answer']}).", r["answer"])).correct for r in rows)
    other = {letter: "ABCDEFGHIJ"[("ABCDEFGHIJ".index(letter) + 1) % 10] for letter in "ABCDEFGHIJ"}
    assert not any(run(verifier.verify(f"The answer is {other[r['answer']]}", r["answer"])).correct for r in rows)


# ------------------------------------------------------------------------------------------------- code


def test_code_formats_and_failures(sandbox):
    verifier = CodeVerifier(sandbox)
    tests = HumanEvalTests(
        prompt='def add(a, b):\n    """Sum."""\n',
        test="def check(candidate):\n    assert candidate(2, 3) == 5\n",
        entry_point="add",
    )
    assert run(verifier.verify("    return a + b\n", tests)).correct
    fenced = "Here it is:\n```python\ndef add(a, b):\n    return b + a\n```"
    assert run(verifier.verify(fenced, tests)).correct
    wrong = run(verifier.verify("    return a - b\n", tests))
    assert not wrong.correct and "AssertionError" in (wrong.reason or "")
    looping = run(verifier.verify("    while True:\n        pass\n", tests))
    assert not looping.correct and "TIMEOUT" in (looping.reason or "")
    asserts = AssertTests(test_list=["assert double(2) == 4"], test_setup_code="import math")
    assert run(verifier.verify("def double(x):\n    return 2 * x", asserts)).correct
    assert not run(verifier.verify("def double(x):\n    return x", asserts)).correct


async def _check_all(verifier, cases):
    return await asyncio.gather(*(verifier.verify(answer, tests) for answer, tests in cases))


@needs_data
def test_every_humaneval_canonical_solution_passes_and_a_stub_fails(sandbox):
    rows = jsonl("code/humaneval.jsonl")
    tests = [HumanEvalTests(prompt=r["prompt"], test=r["test"], entry_point=r["entry_point"]) for r in rows]
    verifier = CodeVerifier(sandbox)
    gold = run(_check_all(verifier, [(r["canonical_solution"], t) for r, t in zip(rows, tests, strict=True)]))
    stub = run(_check_all(verifier, [("    return None\n", t) for t in tests]))
    assert (sum(v.correct for v in gold), sum(v.correct for v in stub)) == (164, 0)


@needs_data
def test_mbpp_test_split_sample(sandbox):
    rows = [r for r in jsonl("code/mbpp.jsonl") if 11 <= r["task_id"] <= 510][::10]  # 50 problems
    verifier = CodeVerifier(sandbox)
    cases = [(r["code"], AssertTests(test_list=r["test_list"], test_setup_code=r["test_setup_code"])) for r in rows]
    gold = run(_check_all(verifier, cases))
    assert all(v.correct for v in gold), [v.reason for v in gold if not v.correct]
    broken = [(code + "\n\ndef _unused():\n    pass\nraise SystemExit(1)\n", tests) for code, tests in cases]
    assert not any(v.correct for v in run(_check_all(verifier, broken)))


# ------------------------------------------------------------------------------------------------ judge


@pytest.mark.parametrize(
    ("reply", "decision"),
    [
        ("yes", True),
        ("No.", False),
        ("**Yes** - same person", True),
        ("<think>is it yes? maybe</think>\nVerdict: no", False),
        ("The response names the same date, so yes.", True),
        ("Final answer: YES", True),
        ("I cannot tell", None),
        ("Yes and no: it depends", True),
        ("It could be yes, it could be no.", None),
    ],
)
def test_judgement_parsing(reply, decision):
    assert parse_judgement(reply) == decision


def test_judge_verdicts_and_failures():
    backend = ScriptedBackend(["yes", "no", "hmm, hard to say"], model="judge")
    judge = JudgeVerifier(backend)
    assert run(judge.verify("Paris", "Paris, France", question="Capital of France?")).correct
    assert "Gold answer: Paris, France" in backend.requests[0][-1].content
    said_no = run(judge.verify("Lyon", "Paris"))
    assert not said_no.correct and said_no.error is None
    unclear = run(judge.verify("x", "y"))
    assert not unclear.correct and "no yes/no verdict" in (unclear.error or "")
    failed = run(judge.verify("x", "y"))  # the scripted backend has no reply left: BackendError
    assert not failed.correct and "failed" in (failed.error or "")

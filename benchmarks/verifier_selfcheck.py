"""Verifier self-check on the full offline data: every gold must verify against itself, perturbations must not.
Also replays every tau2 task's golden actions.

    python benchmarks/verifier_selfcheck.py [--data ../shared/data] [--math-only]

Math (the full oracle; the test suite runs all golds in the first three renderings on the reply path, a sample
in the others, and a subset of the rejection checks): each gold of MATH-500, GSM8K, AIME 24/25 and AMC 23 written
bare, boxed, in a sentence, bold at a sentence's end, ending in "?" or "…", and written twice, graded as a whole
reply and as an extracted final answer; unevaluated expressions (real GSM8K calculations and
sums/products of the integer golds) that must be rejected; and agreement with RouteLLM's recorded correctness of
real Mixtral and GPT-4 GSM8K replies. Then one line per other data set: golds verified / total, perturbed
verified / total (should be 0). GPQA is read from its encrypted zip in memory only; nothing is extracted to disk.
"""

import argparse
import asyncio
import csv
import io
import json
import logging
import random
import re
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

from podium.core.answers import extract_answer
from podium.datasets.items import AssertTests, HumanEvalTests
from podium.datasets.loaders import get_benchmark
from podium.envs.domain import golden_actions, load_domain
from podium.envs.evaluation import replay
from podium.graders.code import CodeVerifier
from podium.graders.math import grade_math
from podium.graders.text import MultipleChoiceVerifier, QAVerifier, exact_match
from podium.sandbox import Sandbox

GPQA_PASSWORD = b"deserted-untie-orchid"  # published by the GPQA authors in their README
LETTERS = "ABCDEFGHIJ"


def jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def report(name: str, golds: list[bool], perturbed: list[bool], started: float) -> None:
    print(
        f"{name:<22} gold {sum(golds):>4}/{len(golds):<4}  perturbed {sum(perturbed):>3}/{len(perturbed):<4}"
        f"  ({time.perf_counter() - started:.1f} s)",
        flush=True,
    )


MATH_SETS = ("math500", "gsm8k", "aime24", "aime25", "amc23")
RENDERINGS: dict[str, Callable[[str], str]] = {
    "bare": lambda gold: gold,
    "boxed": lambda gold: f"\\boxed{{{gold}}}",
    "sentence": lambda gold: f"The answer is {gold}.",
    "bold": lambda gold: f"So the answer is **{gold}**.",
    "question": lambda gold: f"So the answer is {gold}?",
    "ellipsis": lambda gold: f"So the answer is {gold}…",
    "repeated": lambda gold: f"${gold}$, or equivalently ${gold}$",
}
"""How the oracle writes a gold as the model's answer: bare, boxed, in a sentence, bold at a sentence's end (as
chat models write it), ending in a question mark or an ellipsis, and the same value written twice."""


def math_oracle(data: Path) -> None:
    """Every gold of the five math sets, in each rendering, graded as the model's whole reply (``podium grade``)
    and as the final answer a system extracted (``podium eval``, training): all must be correct. The gold plus
    one must never be."""
    for name in MATH_SETS:
        items = get_benchmark(name).items(data_dir=data)
        for rendering, render in RENDERINGS.items():
            started = time.perf_counter()
            reply = [grade_math(render(i.gold), i.gold, i.question).correct for i in items]
            path = [grade_math(extract_answer(render(i.gold), "math") or "", i.gold, i.question).correct for i in items]
            perturbed = [grade_math(render(_plus_one(i.gold)), i.gold, i.question).correct for i in items]
            print(
                f"{name:<8} {rendering:<9} reply {sum(reply):>4}/{len(items):<4}  "
                f"eval path {sum(path):>4}/{len(items):<4}  gold+1 accepted {sum(perturbed):>3}  "
                f"({time.perf_counter() - started:.1f} s)",
                flush=True,
            )


def _plus_one(gold: str) -> str:
    return str(int(gold) + 1) if gold.lstrip("-").isdigit() else f"{gold}+1"


def unevaluated_answers(data: Path) -> list[tuple[str, str, str]]:
    """(expression, gold, question) answers that restate the computation instead of its result: each GSM8K
    solution's last calculation (``<<9*2=18>>`` gives ``9*2`` for the gold 18), and for every integer gold of
    MATH-500, AIME and AMC a sum ``(g+7) - 7`` and, when g has a factor, a product."""
    cases = []
    rows = jsonl(data / "math/gsm8k_test.jsonl")
    for row, item in zip(rows, get_benchmark("gsm8k").items(data_dir=data), strict=True):
        calculations = re.findall(r"<<([^=<>]+)=([^<>]+)>>", row["answer"])
        if calculations and _same_number(calculations[-1][1], item.gold) and not _is_number(calculations[-1][0]):
            cases.append((calculations[-1][0].strip(), item.gold, item.question))
    for name in ("math500", "aime24", "aime25", "amc23"):
        for item in get_benchmark(name).items(data_dir=data):
            if not item.gold.isdigit():
                continue
            value = int(item.gold)
            cases.append((f"{value + 7} - 7", item.gold, item.question))
            factor = next((f for f in range(2, int(value**0.5) + 1) if value % f == 0), None)
            if factor:
                cases.append((f"{factor} \\times {value // factor}", item.gold, item.question))
    return cases


def _is_number(text: str) -> bool:
    return re.fullmatch(r"\s*-?[\d.]+\s*", text) is not None


def _same_number(text: str, gold: str) -> bool:
    try:
        return float(text) == float(gold)
    except ValueError:
        return False


def math_unevaluated(data: Path) -> None:
    """Answers left as an unevaluated expression must be wrong in every rendering; the same expression followed
    by its result (``9*2 = 18``) must be right."""
    cases = unevaluated_answers(data)
    for rendering, render in RENDERINGS.items():
        started = time.perf_counter()
        echoed = sum(grade_math(render(expression), gold, question).correct for expression, gold, question in cases)
        computed = sum(grade_math(render(f"{e} = {g}"), g, q).correct for e, g, q in cases)
        print(
            f"unevaluated {rendering:<9} accepted {echoed}/{len(cases)} (must be 0); "
            f"'expression = result' accepted {computed}/{len(cases)}  ({time.perf_counter() - started:.1f} s)",
            flush=True,
        )


def routellm_agreement(data: Path) -> None:
    """Real GSM8K replies of Mixtral-8x7B and GPT-4 graded by Podium (the eval path) against RouteLLM's recorded
    correctness labels: agreement, and where each side says correct."""
    rows = list(csv.DictReader((data / "routing/gsm8k_responses.csv").open(encoding="utf-8")))
    items = get_benchmark("gsm8k").items(data_dir=data)
    for model in ("mistralai/Mixtral-8x7B-Instruct-v0.1", "gpt-4-1106-preview"):
        started = time.perf_counter()
        labels = [row[model] == "True" for row in rows]
        answers = [extract_answer(row[f"{model}_response"], "math") or "" for row in rows]
        podium = [grade_math(a, i.gold, i.question).correct for a, i in zip(answers, items, strict=True)]
        agree = sum(p == label for p, label in zip(podium, labels, strict=True))
        print(
            f"RouteLLM {model.split('/')[-1]:<26} agree {agree}/{len(rows)}; correct: Podium {sum(podium)}, "
            f"label {sum(labels)}  ({time.perf_counter() - started:.1f} s)",
            flush=True,
        )


async def code_sets(data: Path) -> None:
    verifier = CodeVerifier(Sandbox())
    started = time.perf_counter()
    rows = jsonl(data / "code/humaneval.jsonl")
    tests = [HumanEvalTests(prompt=r["prompt"], test=r["test"], entry_point=r["entry_point"]) for r in rows]
    golds = await asyncio.gather(
        *(verifier.verify(r["canonical_solution"], t) for r, t in zip(rows, tests, strict=True))
    )
    stubs = await asyncio.gather(*(verifier.verify("    return None\n", t) for t in tests))
    report("HumanEval", [v.correct for v in golds], [v.correct for v in stubs], started)
    started = time.perf_counter()
    rows = [r for r in jsonl(data / "code/mbpp.jsonl") if 11 <= r["task_id"] <= 510]
    cases = [(r["code"], AssertTests(test_list=r["test_list"], test_setup_code=r["test_setup_code"])) for r in rows]
    golds = await asyncio.gather(*(verifier.verify(code, t) for code, t in cases))
    # Perturbed: the function under test (named in the first assert) redefined to return None.
    broken = []
    for code, t in cases:
        name = t.test_list[0].removeprefix("assert").strip().split("(")[0].strip()
        broken.append((f"{code}\n\ndef {name}(*args, **kwargs):\n    return None\n", t))
    stubs = await asyncio.gather(*(verifier.verify(code, t) for code, t in broken))
    report("MBPP test (11-510)", [v.correct for v in golds], [v.correct for v in stubs], started)
    for verdict, row in zip(golds, rows, strict=True):
        if not verdict.correct:
            print(f"    MBPP {row['task_id']}: {verdict.reason}")


async def choice_sets(data: Path) -> None:
    verifier = MultipleChoiceVerifier()
    started = time.perf_counter()
    rows = jsonl(data / "mc/mmlu_pro_300.jsonl")
    golds = [await verifier.verify(f"The answer is ({r['answer']}).", r["answer"]) for r in rows]
    other = [LETTERS[(LETTERS.index(r["answer"]) + 1) % 10] for r in rows]
    perturbed = [await verifier.verify(f"The answer is ({o}).", r["answer"]) for o, r in zip(other, rows, strict=True)]
    report("MMLU-Pro 300", [v.correct for v in golds], [v.correct for v in perturbed], started)
    started = time.perf_counter()
    with zipfile.ZipFile(data / "mc/gpqa_dataset.zip") as archive:
        text = archive.read("dataset/gpqa_diamond.csv", pwd=GPQA_PASSWORD).decode("utf-8")
    rows = list(csv.DictReader(io.StringIO(text)))
    shuffle = random.Random(0)
    four = MultipleChoiceVerifier(letters="ABCD")
    golds, perturbed = [], []
    for row in rows:
        options = [row["Correct Answer"], *(row[f"Incorrect Answer {i}"] for i in (1, 2, 3))]
        shuffle.shuffle(options)
        gold = "ABCD"[options.index(row["Correct Answer"])]
        golds.append((await four.verify(f"Answer: {gold}", gold)).correct)
        perturbed.append((await four.verify(f"Answer: {'ABCD'[('ABCD'.index(gold) + 1) % 4]}", gold)).correct)
    report("GPQA diamond (memory)", golds, perturbed, started)


async def qa_sets(data: Path) -> None:
    verifier = QAVerifier()
    for name, answers in (
        ("HotpotQA dev 100", [r["answer"] for r in json.loads((data / "qa/hotpot_distractor_100.json").read_text())]),
        ("FRAMES 824", [r["answer"] for r in jsonl(data / "qa/frames.jsonl")]),
    ):
        started = time.perf_counter()
        golds = [(await verifier.verify(a, a)).correct for a in answers]
        pairs = [(a, b) for a, b in zip(answers, answers[1:] + answers[:1], strict=True) if not exact_match(a, b)]
        perturbed = [(await verifier.verify(b, a)).correct for a, b in pairs]
        report(name, golds, perturbed, started)


def tau2() -> None:
    for name in ("airline", "retail"):
        started = time.perf_counter()
        domain = load_domain(name)
        replays = [replay(domain, task, golden_actions(task)) for task in domain.tasks]
        clean = sum(r.ok for r in replays)
        changed = sum(r.changed for r in replays)
        failing = [task.id for task, r in zip(domain.tasks, replays, strict=True) if not r.ok]
        print(
            f"tau2 {name:<8} {len(replays)} tasks: {clean} replay cleanly, {changed} change the database; "
            f"tasks with actions designed to fail: {failing or 'none'}  ({time.perf_counter() - started:.1f} s)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[1].parent / "shared" / "data")
    parser.add_argument("--math-only", action="store_true", help="Only the math oracle and its rejection checks.")
    arguments = parser.parse_args()
    data = arguments.data
    logging.disable(logging.WARNING)  # math-verify logs every answer it cannot parse
    math_oracle(data)
    math_unevaluated(data)
    routellm_agreement(data)
    if arguments.math_only:
        return
    asyncio.run(code_sets(data))
    asyncio.run(choice_sets(data))
    asyncio.run(qa_sets(data))
    tau2()


if __name__ == "__main__":
    main()

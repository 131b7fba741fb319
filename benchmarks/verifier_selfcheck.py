"""Verifier self-check on the full offline data: every gold must verify against itself, perturbations must not.
Also replays every tau2 task's golden actions.

    python benchmarks/verifier_selfcheck.py [--data ../shared/data]

Prints one line per data set: golds verified / total, perturbed verified / total (should be 0).
GPQA is read from its encrypted zip in memory only; nothing is extracted to disk.
"""

import argparse
import asyncio
import csv
import io
import json
import random
import time
import zipfile
from pathlib import Path

from podium.benchmarks.items import AssertTests, HumanEvalTests
from podium.envs.domain import golden_actions, load_domain
from podium.envs.evaluation import replay
from podium.graders.code import CodeVerifier
from podium.graders.math import math_equivalent
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


def math_sets(data: Path) -> None:
    started = time.perf_counter()
    rows = jsonl(data / "math/math500.jsonl")
    golds = [math_equivalent(f"The answer is $\\boxed{{{r['answer']}}}$", r["answer"]) for r in rows]
    report("MATH-500", golds, [math_equivalent(f"$\\boxed{{{r['answer']}+1}}$", r["answer"]) for r in rows], started)
    started = time.perf_counter()
    answers = [r["answer"].split("####")[-1].strip() for r in jsonl(data / "math/gsm8k_test.jsonl")]
    golds = [math_equivalent(f"So the answer is {a}.", a) for a in answers]
    perturbed = [math_equivalent(f"So the answer is {int(a.replace(',', '')) + 1}.", a) for a in answers]
    report("GSM8K test", golds, perturbed, started)


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
    data = parser.parse_args().data
    math_sets(data)
    asyncio.run(code_sets(data))
    asyncio.run(choice_sets(data))
    asyncio.run(qa_sets(data))
    tau2()


if __name__ == "__main__":
    main()

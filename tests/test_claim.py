"""The claim's evaluation path end to end (`make claim-eval`) on three test questions with the committed adapters,
so that a change anywhere on that path (policies, backends, eval, routing) cannot break it unnoticed; and the
claim's configs load."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from podium.evaluate.runner import load_run

pytest.importorskip("peft")

ROOT = Path(__file__).resolve().parents[1]


def make(target: str, *variables: str) -> subprocess.CompletedProcess[str]:
    """Run ``make TARGET VARIABLES…`` with this environment."""
    venv = Path(sys.executable).parent.parent
    environment = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    # -o: the environment running the tests is set up; make must not reinstall it from this checkout
    command = ["make", "--no-print-directory", "-o", f"{venv}/.installed", target, f"VENV={venv}", *variables]
    return subprocess.run(command, cwd=ROOT, env=environment, capture_output=True, text=True, timeout=900)


def run_make(target: str, *variables: str) -> list[str]:
    """Run ``make TARGET VARIABLES…``, check it succeeded and return the lines it printed on stdout."""
    done = make(target, *variables)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip().splitlines()


def make_claim(target: str, *variables: str) -> dict:
    """Run ``make TARGET VARIABLES…`` and return the JSON object of its last line."""
    return json.loads(run_make(target, *variables)[-1])


@pytest.mark.slow
def test_claim_eval_prints_the_comparison_as_its_last_line(tmp_path) -> None:
    # the routers fitted on 40 train questions (the shipped table: the whole train split), to keep CI short
    # and the GRPO adapter calibrated on 10 validation questions (the shipped table: all 139)
    result = make_claim(
        "claim-eval", f"CLAIM_RUNS={tmp_path}", "CLAIM_LIMIT=3", "CLAIM_TRAIN=40", "CLAIM_VALID_LIMIT=10"
    )
    assert result["n_test"] == 3
    # On the first three test questions GPT-4 is no better than Mixtral: no gap to recover, and the table says so.
    assert set(result["apgr"].values()) == {None} and "undefined" in result["notes"][0]
    for metric in ("apgr", "accuracy", "usd_per_question", "cpt50", "cpt80", "strong_share"):
        assert {"orchestrator_grpo", "orchestrator_sft", "random", "knn", "logreg", "cascade", "cascade_checks"} <= set(
            result[metric]
        ), metric
    priced = {"orchestrator_grpo_priced", "logreg_priced", "cascade_priced", "cascade_checks_priced"}
    assert priced <= set(result["strong_share"]) and 0.0 < result["breakeven"] < 1.0
    assert "orchestrator_sft_priced" not in result["strong_share"]  # no validation run calibrates it, as noted:
    assert "orchestrator_sft has no orchestrator_sft_priced row" in result["notes"][1]
    assert all(0.0 <= share <= 1.0 for share in result["strong_share"].values())
    assert all(0.0 <= accuracy <= 1.0 for accuracy in result["accuracy"].values())
    records = [json.loads(line) for line in (tmp_path / "eval-grpo-first3" / "results.jsonl").read_text().splitlines()]
    assert len(records) == 3
    decisions = [turn["choice_probs"] for record in records for turn in record["trajectory"]["turns"]]
    assert all(probs and sum(probs.values()) == pytest.approx(1.0) for probs in decisions)
    # the same comparison on the validation questions the GRPO adapter was calibrated on, with its intervals
    validation = json.loads((tmp_path / "valid-grpo-first10.json").read_text())
    assert validation["n_test"] == 10 and {"orchestrator_grpo", "cascade_checks"} <= set(validation["apgr"])
    intervals = validation["bootstrap"]["intervals"]["apgr"]
    assert "orchestrator_grpo" in intervals and all(-5.0 < bound < 5.0 for pair in intervals.values() for bound in pair)


@pytest.mark.slow
def test_claim_sweep_evaluates_the_grpo_adapter_under_each_sheet(tmp_path) -> None:
    sheets = ["sweep-gpt4-x0.35", "sweep-gpt4-x2.8"]  # one pair, played side by side
    lines = run_make(
        "claim-sweep", f"CLAIM_RUNS={tmp_path}", f"CLAIM_SWEEP={' '.join(sheets)}", "CLAIM_SWEEP_LIMIT=2",
        f"CLAIM_SWEEP_OUT={tmp_path / 'out'}", "CLAIM_TRAIN=40", "CLAIM_VALID_LIMIT=10",
    )  # fmt: skip
    printed = [json.loads(line) for line in lines if line.startswith("{")]
    cheap, dear = (json.loads((tmp_path / "out" / sheet / "results.json").read_text()) for sheet in sheets)
    assert sorted(printed, key=lambda result: result["usd_per_question"]["always_gpt4"]) == [cheap, dear]
    assert cheap["n_test"] == dear["n_test"] == 2
    assert "orchestrator_grpo" in cheap["strong_share"] and "orchestrator_sft" not in cheap["strong_share"]
    # Only GPT-4's price differs between the sheets: always-strong costs 2.8 / 0.35 = 8 times as much, always-weak
    # the same.
    usd = [result["usd_per_question"] for result in (cheap, dear)]
    assert usd[1]["always_gpt4"] == pytest.approx(8 * usd[0]["always_gpt4"], rel=1e-3)
    assert usd[1]["always_mixtral"] == usd[0]["always_mixtral"]
    # The dearer strong model raises the break-even probability, and the priced orchestrator calls it no more often.
    assert cheap["breakeven"] < dear["breakeven"]
    shares = [result["strong_share"]["orchestrator_grpo_priced"] for result in (cheap, dear)]
    assert shares[1] <= shares[0]
    for sheet, result in zip(sheets, (cheap, dear), strict=True):
        records = (tmp_path / f"eval-grpo-{sheet}-first2" / "results.jsonl").read_text().splitlines()
        assert len(records) == 2
        # The run deciding at the sheet's threshold is the one the priced row predicts from the greedy run.
        threshold = json.loads((tmp_path / f"eval-grpo-threshold-{sheet}-first2.json").read_text())
        assert threshold["breakeven"] == pytest.approx(result["breakeven"], abs=5e-5)  # the table rounds it
        assert 0.0 < threshold["escalate_above"] < 1.0
        for metric in ("strong_share", "accuracy", "usd_per_question", "calls_per_question"):
            assert result[metric]["orchestrator_grpo_threshold"] == result[metric]["orchestrator_grpo_priced"], metric
    assert len((tmp_path / "valid-grpo-first10" / "results.jsonl").read_text().splitlines()) == 10  # one calibration


@pytest.mark.slow
def test_claim_unseen_evaluates_the_grpo_adapter_with_members_it_never_saw(tmp_path) -> None:
    result = make_claim(
        "claim-unseen", f"CLAIM_RUNS={tmp_path}", "CLAIM_UNSEEN_LIMIT=3", "CLAIM_TRAIN=40", "CLAIM_VALID_LIMIT=10"
    )
    assert result["n_test"] == 3
    for name, pool, stranger in [
        ("unseen", "pool-unseen.yaml", "smollm2"),
        ("batch", "pool-batch.yaml", "gpt4_batch"),
        ("batch-dear", "pool-batch-dear.yaml", "gpt4_batch"),
    ]:
        assert {"orchestrator_grpo", f"orchestrator_grpo_{name.replace('-', '_')}"} <= set(result["accuracy"])
        manifest = json.loads((tmp_path / f"eval-grpo-{name}-first3" / "manifest.json").read_text())
        assert manifest["system_config"]["pool"].endswith(pool)
        records = [json.loads(line) for line in (tmp_path / f"eval-grpo-{name}-first3" / "results.jsonl").open()]
        offered = {
            word for record in records for turn in record["trajectory"]["turns"] for word in turn["choice_probs"] or {}
        }
        assert {"mixtral", "gpt4", stranger} <= offered  # the third worker is one of its choices
    for name, cheaper in [("batch", "gpt4_batch"), ("batch-dear", "gpt4")]:  # decided at each worker's break-even
        assert f"orchestrator_grpo_{name.replace('-', '_')}_threshold" in result["accuracy"]
        system = yaml.safe_load((tmp_path / f"eval-grpo-{name}-threshold-first3.yaml").read_text())
        assert list(system["policy"]["escalate_above"]) == [cheaper]  # only the cheaper copy of GPT-4 ever pays
        _, runs = load_run(tmp_path / f"eval-grpo-{name}-threshold-first3")
        asked = [[result.call.arguments["model"] for result in run.trajectory.results
                  if result.call.name == "standard_reasoner"] for run in runs]  # fmt: skip
        assert len(asked) == 3 and all(workers[1:] in ([], [cheaper]) for workers in asked), asked
    over = make("claim-unseen", f"CLAIM_RUNS={tmp_path / 'over'}", "CLAIM_UNSEEN_LIMIT=101")
    assert over.returncode != 0 and "recorded on the first 100 test questions only" in over.stderr
    batch = make("claim-unseen", "-n", f"CLAIM_RUNS={tmp_path}", "CLAIM_UNSEEN=batch", "CLAIM_UNSEEN_LIMIT=101")
    assert batch.returncode == 0 and "system-grpo-$name.yaml" in batch.stdout and "--limit 101" in batch.stdout


@pytest.mark.parametrize(
    ("target", "variable"),
    [
        ("claim-sweep", "CLAIM_SWEEP"),
        ("claim-priced-data", "CLAIM_PRICED_SHEETS"),
        ("claim-priced-teacher", "CLAIM_PRICED_SHEET"),
        ("claim-unseen", "CLAIM_UNSEEN"),
        ("claim-unseen-eval", "CLAIM_UNSEEN"),
    ],
)
def test_a_target_without_sheets_or_pools_is_an_error(tmp_path, target, variable) -> None:
    done = make(target, f"CLAIM_RUNS={tmp_path}", f"{variable}=")
    assert done.returncode != 0 and re.search(f"{variable} names no (price sheet|pool)", done.stderr)
    assert list(tmp_path.iterdir()) == []  # nothing ran


@pytest.mark.slow
def test_claim_mmlu_eval_routes_from_the_question_and_prints_the_comparison(tmp_path) -> None:
    # the routers fitted on 40 train questions (the shipped target: the orchestrator's 1,000), to keep CI short
    result = make_claim("claim-mmlu-eval", f"CLAIM_MMLU_RUNS={tmp_path}", "CLAIM_LIMIT=3", "CLAIM_MMLU_TRAIN=40")
    assert result["n_test"] == 3
    # no reply is recorded: no cascade among the routers
    assert set(result["strong_share"]) == {
        "orchestrator_mmlu", "always_mixtral", "always_gpt4", "oracle", "random", "knn", "logreg", "mf",
    }  # fmt: skip
    records = [json.loads(line) for line in (tmp_path / "eval-first3" / "results.jsonl").read_text().splitlines()]
    assert len(records) == 3 and all(record["verdict"]["grader"] == "recorded outcome (replay)" for record in records)
    observations = [m["content"] for r in records for m in r["trajectory"]["messages"][3::2] if m["role"] == "user"]
    assert observations and all(text in ("mixtral replied.", "gpt4 replied.") for text in observations)


@pytest.mark.slow
def test_claim_priced_data_labels_each_sheets_questions_with_its_threshold(tmp_path) -> None:
    sheets = {"train-gpt4-x0.25": "$2.5/$7.5", "train-gpt4-x4": "$40/$120"}  # GPT-4's price in each worker table
    run_make(
        "claim-priced-data", f"CLAIM_RUNS={tmp_path}", f"CLAIM_PRICED_SHEETS={' '.join(sheets)}",
        "CLAIM_PRICED_TRAIN=3", "CLAIM_VALID_LIMIT=10",
    )  # fmt: skip
    thresholds = {sheet: json.loads((tmp_path / "priced" / f"teacher-{sheet}.json").read_text()) for sheet in sheets}
    assert thresholds["train-gpt4-x0.25"]["escalate_above"] < 1.0 == thresholds["train-gpt4-x4"]["escalate_above"]
    for sheet, price in sheets.items():
        line = f"\nNot asked yet: gpt4 at {price} per 1M in/out tokens."  # the price beside the decision
        _, calibration = load_run(tmp_path / "priced" / f"valid-{sheet}")  # each sheet calibrates its own teacher
        assert len(calibration) == 10 and thresholds[sheet]["calibration"] is not None
        assert all(record.trajectory.messages[3].content.endswith(line) for record in calibration)
        rows = [json.loads(text) for text in (tmp_path / "priced" / f"collect-{sheet}" / "sft.jsonl").open()]
        assert rows and all(f"gpt4: strong, dear, {price} per 1M" in row["messages"][0]["content"] for row in rows)
        assert all(row["messages"][3]["content"].endswith(line) for row in rows)
        if sheet == "train-gpt4-x4":  # escalating never pays at 4x: the teacher accepts every reply
            assert all(m["content"] != "gpt4" for row in rows for m in row["messages"] if m["role"] == "assistant")
    # sft-priced.yaml trains on what the target writes with its defaults
    config = yaml.safe_load((ROOT / "experiments" / "claim" / "sft-priced.yaml").read_text())
    defaults = re.search(r"^CLAIM_PRICED_SHEETS \?= (.+)$", (ROOT / "Makefile").read_text(), re.M).group(1).split()
    assert config["trajectories"] == [f"runs/claim/priced/collect-{sheet}/sft.jsonl" for sheet in defaults]

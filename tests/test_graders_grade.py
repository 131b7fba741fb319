"""``podium grade``, the grader each verdict names, the LLM judge in ``podium grade`` and in eval system configs,
and the report naming the grader of its accuracy."""

import asyncio
import json

import pytest
import yaml
from typer.testing import CliRunner

from podium.cli import app
from podium.core.trajectory import Trajectory
from podium.datasets.items import BenchmarkItem
from podium.datasets.loaders import shared_data_dir
from podium.errors import ConfigError
from podium.evaluate.metrics import UNRECORDED_GRADER, run_metrics
from podium.graders.grader import Grader, GradingConfig
from podium.graders.math import MATH_GRADER
from podium.graders.text import QAVerifier, TokenF1Verifier

from .eval_fixtures import record

needs_data = pytest.mark.skipif(not (shared_data_dir() / "math").is_dir(), reason="offline math data not present")
runner = CliRunner()


def _write_jsonl(path, rows) -> str:
    path.write_text("".join((row if isinstance(row, str) else json.dumps(row)) + "\n" for row in rows))
    return str(path)


def _json_lines(output: str) -> list[dict]:
    return [json.loads(line) for line in output.splitlines() if line.startswith("{")]


@needs_data
def test_rows_are_graded_in_input_order_by_benchmark_id_with_malformed_rows_reported(tmp_path):
    responses = _write_jsonl(
        tmp_path / "responses.jsonl",
        [
            {
                "id": "math500-test/precalculus/807.json",
                "response": "So $\\boxed{\\left( 3, \\frac{\\pi}{2} \\right)}$.",
            },
            {"id": "test/precalculus/807.json", "response": "\\boxed{(3, 0)}"},  # the item's own id field
            {"id": 0, "response": "She makes 9 * 2 = $18.\nThe answer is 18."},  # gsm8k has no id: its line number
            {"id": "gsm8k-0", "response": "9 * 2"},
            {"id": "gsm8k-1", "response": "It is either 3 or 5."},
            "",
            "not json",
            {"id": "gsm8k-2"},
            {"id": "nope", "response": "5"},
            {"response": "5"},
        ],
    )
    math500 = runner.invoke(app, ["grade", "--responses", responses, "--benchmark", "math500", "--json", "--quiet"])
    assert math500.exit_code == 1
    rows = _json_lines(math500.stdout)
    assert [row["line"] for row in rows] == [1, 2, 3, 4, 5, 7, 8, 9, 10]  # the blank line 6 is not a row
    assert [row["correct"] for row in rows[:2]] == [True, False]
    assert rows[0]["grader"] == MATH_GRADER and rows[0]["id"] == "math500-test/precalculus/807.json"
    assert rows[2]["error"] == "malformed row: no item with id '0' in the benchmark"

    gsm8k = runner.invoke(app, ["grade", "--responses", responses, "--benchmark", "gsm8k", "--json", "--quiet"])
    rows = _json_lines(gsm8k.stdout)
    assert [(row["correct"], row["error"] is None) for row in rows[2:5]] == [(True, True), (False, True), (False, True)]
    assert "unevaluated expression" in rows[3]["reason"] and "several candidate answers" in rows[4]["reason"]
    assert rows[5] == {
        "line": 7, "correct": False, "score": 0.0, "extracted": None, "grader": None,
        "reason": "malformed row: not JSON (Expecting value)", "error": "malformed row: not JSON (Expecting value)",
    }  # fmt: skip
    assert "no 'response'" in rows[6]["error"] and "no item with id 'nope'" in rows[7]["error"]
    assert "needs an 'id'" in rows[8]["error"] and "id" not in rows[8]


@needs_data
def test_the_table_and_summary_and_exit_0_when_every_row_is_graded(tmp_path):
    responses = _write_jsonl(
        tmp_path / "r.jsonl", [{"id": 0, "response": "\\boxed{18}"}, {"id": 1, "response": "\\boxed{4}"}]
    )
    result = runner.invoke(app, ["grade", "--responses", responses, "--benchmark", "gsm8k", "--quiet"])
    assert result.exit_code == 0, result.output
    assert "2 rows: 1 correct, 1 wrong, 0 not graded; accuracy 0.500" in result.stdout
    assert f"graded by {MATH_GRADER}" in result.stdout


def test_rows_with_their_own_gold_use_the_kind_named(tmp_path):
    double = "def double(x):\n    return 2 * x"
    rows = {
        "math": [{"response": "x = \\frac{1}{2}", "gold": "0.5"}, {"response": "27", "gold": 27.0}],
        "mc": [{"response": "The answer is (B).", "gold": "B"}, {"response": "A", "gold": "Z"}],
        "em": [
            {"response": "It is tall.\nAnswer: The Eiffel Tower", "gold": ["Eiffel Tower", "Tour Eiffel"]},
            {"response": "a", "gold": "b"},
        ],
        "f1": [{"id": "q1", "response": "the cat sat", "gold": "cat sat down"}, {"response": "dog", "gold": "cat"}],
        "code": [{"response": double, "gold": ["assert double(2) == 4"]}, {"response": "x", "gold": 5}],
    }
    expected = {
        "math": [(True, None), (True, None)],
        "mc": [(True, None), (False, "malformed row: gold 'Z' is not one of the letters ABCDEFGHIJ")],
        "em": [(True, None), (False, None)],
        "f1": [(True, None), (False, None)],
        "code": [(True, None), (False, "malformed row: a code gold is {prompt, test, entry_point}, "
                 "{test_list, test_setup_code} or a list of asserts")],
    }  # fmt: skip
    for kind, kind_rows in rows.items():
        responses = _write_jsonl(tmp_path / f"{kind}.jsonl", kind_rows)
        result = runner.invoke(app, ["grade", "--responses", responses, "--kind", kind, "--json", "--quiet"])
        graded = _json_lines(result.stdout)
        assert [(row["correct"], row["error"]) for row in graded] == expected[kind], kind
        assert result.exit_code == (1 if any(error for _, error in expected[kind]) else 0), kind
    f1 = _json_lines(
        runner.invoke(app, ["grade", "--responses", str(tmp_path / "f1.jsonl"), "--kind", "f1", "--json"]).stdout
    )
    assert f1[0]["id"] == "q1" and f1[0]["score"] == pytest.approx(0.8) and f1[0]["grader"] == TokenF1Verifier().name


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ([], "give --benchmark"),
        (["--benchmark", "nope"], "unknown benchmark 'nope'"),
        (["--benchmark", "tau2_airline"], "graded from trajectories"),
        (["--benchmark", "gsm8k", "--kind", "math"], "--kind with --benchmark must be judge"),
        (["--kind", "judge"], "--kind judge needs --judge-model"),
        (["--kind", "math", "--judge-model", "x"], "--judge-model needs --kind judge"),
    ],
)
def test_invalid_invocations_exit_2_with_the_reason(tmp_path, arguments, message):
    responses = _write_jsonl(tmp_path / "r.jsonl", [{"response": "1", "gold": "1"}])
    result = runner.invoke(app, ["grade", "--responses", responses, *arguments])
    assert result.exit_code == 2 and message in result.output, result.output
    missing = runner.invoke(app, ["grade", "--responses", str(tmp_path / "absent.jsonl"), "--kind", "math"])
    assert missing.exit_code == 2 and "cannot read" in missing.output


def _judge_pool(tmp_path, replies: list[str]) -> str:
    pool = {"workers": [{"name": "judge", "backend": "scripted", "model": "strict-judge", "replies": replies}]}
    (tmp_path / "pool.yaml").write_text(yaml.safe_dump(pool))
    return str(tmp_path / "pool.yaml")


def test_a_judge_from_the_pool_grades_every_row(tmp_path):
    responses = _write_jsonl(
        tmp_path / "r.jsonl",
        [
            {"response": "Paris, of course", "gold": "Paris", "question": "Capital of France?"},
            {"response": "Lyon", "gold": "Paris"},
            {"response": "Marseille", "gold": "Paris"},
        ],
    )
    pool = _judge_pool(tmp_path, ["Verdict: yes", "no", "hard to say"])
    arguments = ["grade", "--responses", responses, "--kind", "judge", "--judge-model", "judge", "--pool", pool]
    result = runner.invoke(app, [*arguments, "--json", "--concurrency", "1", "--quiet"])
    rows = _json_lines(result.stdout)
    assert result.exit_code == 1  # the third verdict is no verdict
    judge = "LLM judge (strict-judge)"
    assert [(row["correct"], row["grader"]) for row in rows[:2]] == [(True, judge), (False, judge)]
    assert "gave no yes/no verdict" in rows[2]["error"]
    unknown = runner.invoke(app, [*arguments[:-2], "--pool", pool, "--judge-model", "nobody"])
    assert unknown.exit_code == 2 and "no worker 'nobody'" in unknown.output


def test_grading_config_names_the_missing_judge():
    with pytest.raises(ConfigError, match="verifier: judge needs a judge model"):
        GradingConfig.from_dict({"verifier": "judge"})
    config = GradingConfig.from_dict({"verifier": "judge", "judge": {"kind": "scripted", "replies": ["no"]}})
    grader = Grader.from_config(config)
    item = BenchmarkItem(id="a", question="2+2?", gold="4", verifier="math")
    verdict = asyncio.run(grader.grade(item, Trajectory(question="2+2?", answer="4")))
    assert not verdict.correct and verdict.grader == "LLM judge (scripted)"


def test_every_verdict_names_its_grader():
    grader = Grader()
    cases = [
        (BenchmarkItem(id="m", question="q", gold="4", verifier="math"), "\\boxed{4}", MATH_GRADER),
        (
            BenchmarkItem(id="q", question="q", gold="Paris", verifier="qa"),
            "paris",
            QAVerifier.name,
        ),
        (BenchmarkItem(id="c", question="q", gold="B", verifier="multiple_choice"), "(B)", "option letter"),
    ]
    for item, answer, name in cases:
        verdict = asyncio.run(grader.grade(item, Trajectory(question="q", answer=answer)))
        assert verdict.correct and verdict.grader == name == grader.grader_name(item.verifier)
    unanswered = asyncio.run(grader.grade(cases[0][0], Trajectory(question="q")))
    assert not unanswered.correct and unanswered.grader == MATH_GRADER


def test_run_metrics_list_the_graders_of_the_accuracy():
    graded = [record("a"), record("b"), record("c", error="BackendError: down"), record("d")]
    graded[0].verdict.grader = graded[1].verdict.grader = MATH_GRADER
    assert run_metrics(graded).graders == [MATH_GRADER, UNRECORDED_GRADER]  # the failed attempt c was not graded


@needs_data
def test_eval_with_a_judge_in_the_system_config_and_the_report_names_each_grader(tmp_path):
    answers = {"kind": "scripted", "replies": ["The eggs make \\boxed{18} dollars."]}
    judge = {"kind": "scripted", "model": "strict-judge", "replies": ["no"]}
    grading = {"verifier": "judge", "judge": judge}
    judged = {"kind": "single_model", "name": "judged", "backend": answers, "grading": grading}
    plain = {"kind": "single_model", "name": "plain", "backend": answers}
    for config in (judged, plain):
        (tmp_path / f"{config['name']}.yaml").write_text(yaml.safe_dump(config))
        command = ["eval", "--benchmark", "gsm8k", "--system", str(tmp_path / f"{config['name']}.yaml")]
        result = runner.invoke(app, [*command, "--out", str(tmp_path / config["name"]), "--limit", "2", "--quiet"])
        assert result.exit_code == 0, result.output
        # The judge says no even to item 0's right answer 18.
        correct = (
            "0/2 correct (0.000, graded by LLM judge"
            if config is judged
            else f"1/2 correct (0.500, graded by {MATH_GRADER})"
        )
        assert correct in result.output
    manifest = json.loads((tmp_path / "judged" / "manifest.json").read_text())
    assert manifest["system_config"]["grading"]["verifier"] == "judge"
    assert "grading" not in json.loads((tmp_path / "plain" / "manifest.json").read_text())["system_config"]
    report = runner.invoke(
        app, ["report", str(tmp_path / "judged"), str(tmp_path / "plain"), "--out", str(tmp_path / "r")]
    )
    assert report.exit_code == 0, report.output
    index = (tmp_path / "r" / "index.html").read_text()
    assert f"accuracy (pass@1, pass@2, mean@k): LLM judge (strict-judge); {MATH_GRADER}" in index
    assert "<td>LLM judge (strict-judge)</td>" in index and f"<td>{MATH_GRADER}</td>" in index

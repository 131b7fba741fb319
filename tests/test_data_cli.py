"""``podium data`` and ``podium synth`` from the command line: help with defaults, configs that name the bad field,
JSON Lines, the USD cap's exit status, funnels in ``podium report``, and SIGKILL at random moments then resume."""

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import yaml
from typer.testing import CliRunner

from podium.cli import app
from support.servers import FaultServer
from tests.data_fixtures import scripted_worker, write_tasks
from tests.kill_resume import kill_while_writing

REPO = Path(__file__).resolve().parents[1]
runner = CliRunner()
TASKS = [("q1", "What is 2 + 2?", "4"), ("q2", "What is 3 + 3?", "6")]


def teacher_file(tmp_path, replies: list[str], **worker: object) -> Path:
    path = tmp_path / "teacher.yaml"
    path.write_text(yaml.safe_dump({"pool": {"workers": [scripted_worker("t", replies, **worker)], "tools": []}}))
    return path


def test_help_lists_the_stages_with_their_defaults():
    top = runner.invoke(app, ["--help"])
    assert top.exit_code == 0 and "data" in top.output and "synth" in top.output
    collect = runner.invoke(app, ["data", "collect", "--help"], env={"COLUMNS": "200"})
    assert collect.exit_code == 0
    assert "Attempts per question (ParaManager: 8)." in collect.output and "[default: (8)]" in collect.output
    for command in (["data", "filter-rl"], ["data", "curriculum"], ["data", "classify-failures"],
                    ["data", "preferences"], ["synth", "domain"]):  # fmt: skip
        assert runner.invoke(app, [*command, "--help"]).exit_code == 0


def test_bad_input_exits_2_naming_the_field_or_file(tmp_path):
    config = tmp_path / "collect.yaml"
    config.write_text("samples: 0\nper_question: -1\n")
    result = runner.invoke(app, ["data", "collect", "--config", str(config), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2 and "samples" in result.output and "per_question" in result.output
    result = runner.invoke(app, ["data", "collect", "--tasks", str(tmp_path / "missing.jsonl"), "--out", str(tmp_path)])
    assert result.exit_code == 2 and "missing.jsonl" in result.output
    result = runner.invoke(app, ["synth", "domain", "a zoo", "--out", str(tmp_path / "s")])
    assert result.exit_code == 2 and "name" in result.output


def test_json_lines_the_cap_and_the_report(tmp_path):
    tasks = write_tasks(tmp_path / "tasks.jsonl", TASKS)
    priced = teacher_file(tmp_path, ["<answer>4</answer>"], price={"input_per_mtok": 500.0, "output_per_mtok": 500.0})
    common = ["data", "collect", "--tasks", str(tasks), "--teacher", str(priced), "--samples", "1", "--quiet"]
    capped = runner.invoke(app, [*common, "--out", str(tmp_path / "capped"), "--max-run-usd", "0.000001"])
    assert capped.exit_code == 1 and "USD cap" in capped.output
    done = runner.invoke(app, [*common, "--out", str(tmp_path / "capped"), "--json"])
    assert done.exit_code == 0, done.output
    lines = [json.loads(line) for line in done.output.splitlines() if line.startswith("{")]
    assert [line["type"] for line in lines][-1] == "summary" and lines[-1]["outputs"]["sft.jsonl"] == 1
    assert lines[0] == {"type": "step", "name": "attempted", "unit": "questions", "entered": 2, "kept": 2, "left": {}}
    report = runner.invoke(app, ["report", str(tmp_path / "capped"), "--out", str(tmp_path / "report")])
    assert report.exit_code == 0, report.output
    page = (tmp_path / "report" / "index.html").read_text()
    assert "Data funnels" in page and "<td>verifier</td>" in page


def test_sigkill_at_random_moments_then_resume_loses_and_repeats_nothing(tmp_path):
    items = 30
    tasks = write_tasks(tmp_path / "tasks.jsonl", [(f"q{i}", f"What is {i} + 1?", str(i + 1)) for i in range(items)])
    work = tmp_path / "out" / "work" / "attempts.jsonl"
    rng = random.Random(3)
    with FaultServer(["ok"], hold_s=0.05).running() as url:
        teacher = tmp_path / "teacher.yaml"
        worker = {"name": "remote", "backend": "http", "model": "faulty", "base_url": url,
                  "price": {"input_per_mtok": 0, "output_per_mtok": 0}}  # fmt: skip
        teacher.write_text(yaml.safe_dump({"pool": {"workers": [worker], "tools": []}}))
        command = [sys.executable, "-m", "podium", "data", "collect", "--tasks", str(tasks), "--teacher", str(teacher),
                   "--samples", "1", "--concurrency", "2", "--out", str(tmp_path / "out"), "--quiet"]  # fmt: skip
        killed = kill_while_writing(command, REPO, work, rounds=2, lines_before=5, rng=rng, wait_s=90)
        assert killed >= 1, "the run finished before it could be interrupted"
        final = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=180)
    # Every answer is wrong ("ok"): nothing survives the verifier, which is no success.
    assert final.returncode == 1 and "nothing reached sft.jsonl: 'verifier' removed all 30" in final.stderr
    done = [json.loads(line)["item_id"] for line in work.read_text().splitlines()]
    assert sorted(done) == sorted(f"q{i}" for i in range(items)) and len(done) == len(set(done))
    funnel = json.loads((tmp_path / "out" / "funnel.json").read_text())
    assert funnel["steps"][0] == {"name": "attempted", "unit": "questions", "entered": items, "kept": items, "left": {}}


def test_the_example_files_are_valid():
    from podium.solve.config import SystemConfig
    from podium.solve.jsonl import read_tasks
    from podium.train.config import SFTConfig

    examples = REPO / "examples" / "data"
    teacher = SystemConfig.from_file(examples / "embedded_teacher.yaml")
    assert (teacher.policy.name, teacher.allow, teacher.pool) == ("serial", [], None)
    assert [item.verifier for item in read_tasks(examples / "quiz.jsonl")] == ["multiple_choice"] * 4
    sft = SFTConfig.from_file(examples / "train_sft_collected.yaml")
    assert sft.max_steps == 2 and sft.model.path is None
    script = (REPO / "examples" / "data_collect_sft.sh").read_text()
    assert (
        "data collect" in script
        and "train sft" in script
        and os.access(REPO / "examples" / "data_collect_sft.sh", os.X_OK)
    )

"""Descriptions that feed the pool: ``podium describe-model`` and ``podium pool refresh-descriptions`` record them
with provenance; a pool naming the file shows them to the orchestrator while they describe its current workers."""

import asyncio
import hashlib
import json

import yaml
from typer.testing import CliRunner

from podium.cli import app
from podium.pool.descriptions import read_descriptions, worker_fingerprint
from podium.pool.pool import build_pool, load_pool_config
from podium.runtime import Executor, RunConfig
from support.runtime_fixtures import orchestrator

runner = CliRunner()


def write_pool(tmp_path, solver_replies, writer_replies, solver_model="solver-m"):
    path = tmp_path / "pool.yaml"
    workers = [
        {"name": "solver", "backend": "scripted", "model": solver_model, "replies": solver_replies,
         "description": "Hand-written: a solver."},
        {"name": "writer", "backend": "scripted", "model": "writer-m", "replies": writer_replies},
    ]  # fmt: skip
    path.write_text(yaml.safe_dump({"workers": workers, "tools": [], "descriptions": "descriptions.yaml"}))
    return path


def write_tasks(tmp_path, count=5):
    path = tmp_path / "tasks.jsonl"
    path.write_text("\n".join(json.dumps({"question": f"{i}+{i}?", "answer": str(2 * i)}) for i in range(count)))
    return path


def system_prompt(pool_file) -> str:
    pool = build_pool(load_pool_config(pool_file))
    executor = Executor(pool, RunConfig(policy="serial"), orchestrator=orchestrator("<answer>x</answer>"))
    return asyncio.run(executor.run("What is 2+2?")).messages[0].content


def test_a_recorded_description_changes_the_orchestrators_prompt(tmp_path):
    pool_file = write_pool(tmp_path, ["Answer: 0", "Answer: 2", "Answer: 5"], ["Adds small numbers, slips on carries."])
    tasks = write_tasks(tmp_path)
    before = system_prompt(pool_file)
    assert "Hand-written: a solver." in before
    result = runner.invoke(
        app,
        [
            "describe-model",
            "solver",
            "--tasks",
            str(tasks),
            "--pool",
            str(pool_file),
            "--describer",
            "writer",
            "-n",
            "3",
        ],
    )
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == "Adds small numbers, slips on carries."
    assert "recorded in" in result.stderr and "solver: task 3/3" in result.stderr
    after = system_prompt(pool_file)
    entry = read_descriptions(tmp_path / "descriptions.yaml").workers["solver"]
    shown = "Adds small numbers, slips on carries. (measured: solved"
    assert entry.shown().startswith(shown) and entry.shown() in after and "Hand-written: a solver." not in after
    assert after.replace(entry.shown(), "Hand-written: a solver.") == before
    provenance = entry.provenance
    assert provenance.tasks == str(tasks) and provenance.tasks_sha256 == hashlib.sha256(tasks.read_bytes()).hexdigest()
    assert len(provenance.task_ids) == 3 and set(provenance.task_ids) <= {1, 2, 3, 4, 5}
    assert provenance.describer == "writer (writer-m)" and provenance.written_at.endswith("+00:00")
    assert provenance.worker_sha256 == worker_fingerprint(load_pool_config(pool_file).workers[0])


def test_a_claim_the_figures_contradict_is_left_out_and_the_prompt_shows_the_figures(tmp_path):
    # Issue 25: a worker that solved 0 of 4 tasks was described as "exceptional, with a 99.99% accuracy rate".
    boast = "This model is exceptional, with a 99.99% accuracy rate. It answers in one short line."
    pool_file = write_pool(tmp_path, ["Answer: -1"], [boast])
    tasks = tmp_path / "tasks.jsonl"
    rows = [
        {"question": f"{i}+{i}?", "answer": str(2 * i), "kind": "addition" if i % 2 else "doubling"} for i in range(4)
    ]
    tasks.write_text("".join(json.dumps(row) + "\n" for row in rows))
    args = ["describe-model", "solver", "--tasks", str(tasks), "--pool", str(pool_file), "--describer", "writer"]
    result = runner.invoke(app, [*args, "-n", "4"])
    assert result.exit_code == 0, result.output
    entry = read_descriptions(tmp_path / "descriptions.yaml").workers["solver"]
    assert entry.description == "It answers in one short line."
    assert entry.rejected == [
        "This model is exceptional, with a 99.99% accuracy rate. [claims 99.99% where it solved 0 of 4]"
    ]
    figures = entry.figures
    assert (figures.solved, figures.attempted) == (0, 4) and figures.seconds_per_task >= 0
    assert {kind: (f.solved, f.attempted) for kind, f in figures.by_kind.items()} == {
        "addition": (0, 2),
        "doubling": (0, 2),
    }
    prompt = system_prompt(pool_file)
    assert "99.99%" not in prompt and "measured: solved 0/4 sampled tasks (addition 0/2, doubling 0/2)" in prompt
    assert "left out (contradicts the figures)" in result.stderr


def test_grounding_keeps_claims_the_figures_bear_out():
    from podium.evaluate.describe import grounded
    from podium.pool.descriptions import Figures

    strong = Figures(solved=9, attempted=10, usd_per_task=0.001, seconds_per_task=1.0)
    text = "Highly accurate on arithmetic, about 90% correct. It is weak at dates."
    assert grounded(text, strong) == (text, [])
    weak = Figures(solved=1, attempted=10, usd_per_task=0.0, seconds_per_task=1.0)
    kept, rejected = grounded("Highly accurate on arithmetic. Solves about 10% of tasks.", weak)
    assert kept == "Solves about 10% of tasks." and rejected[0].startswith("Highly accurate on arithmetic.")
    assert grounded("Perfect, flawless, 100% correct.", weak) == (
        "Solved 1 of 10 sampled tasks.",
        ["Perfect, flawless, 100% correct. [claims 100% where it solved 1 of 10]"],
    )


def test_a_description_of_a_changed_worker_is_stale_and_not_shown(tmp_path):
    pool_file = write_pool(tmp_path, ["Answer: 0"], ["Described."])
    tasks = write_tasks(tmp_path, 1)
    args = ["describe-model", "solver", "--tasks", str(tasks), "--pool", str(pool_file), "--describer", "writer"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "Described." in system_prompt(pool_file)
    write_pool(tmp_path, ["Answer: 0"], ["Described."], solver_model="another-model")
    assert "Described." not in system_prompt(pool_file) and "Hand-written: a solver." in system_prompt(pool_file)


def test_refresh_redescribes_every_worker_on_one_sample(tmp_path):
    writer = ["Solver-written text.", "Answer: 4", "wrong", "Writer-written text."]
    pool_file = write_pool(tmp_path, ["Answer: 4"], writer)
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text('{"question": "2+2?", "answer": "4"}\n{"question": "3+1?", "answer": "4"}\n')
    args = ["pool", "refresh-descriptions", "--tasks", str(tasks), "--pool", str(pool_file), "-n", "2", "--json"]
    args += ["--describer", "writer"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(r["worker"], r["before"], r["solved"]) for r in rows] == [
        ("solver", "missing", 2),
        ("writer", "missing", 1),
    ]
    saved = read_descriptions(tmp_path / "descriptions.yaml").workers
    assert saved["solver"].provenance.task_ids == saved["writer"].provenance.task_ids, "one sample for every worker"
    assert "[1/2] describing solver (was missing)" in result.stderr
    prompt = system_prompt(pool_file)
    assert rows[0]["description"] in prompt and rows[1]["description"] in prompt


def test_refresh_needs_a_descriptions_file_and_rejects_a_malformed_one(tmp_path):
    tasks = write_tasks(tmp_path, 1)
    no_file = runner.invoke(app, ["pool", "refresh-descriptions", "--tasks", str(tasks)])
    assert no_file.exit_code == 2 and "no descriptions file" in no_file.output
    pool_file = write_pool(tmp_path, ["x"], ["x"])
    unknown = runner.invoke(
        app, ["pool", "refresh-descriptions", "--tasks", str(tasks), "--pool", str(pool_file), "--worker", "nobody"]
    )
    assert unknown.exit_code == 2 and "no worker ['nobody']" in unknown.output
    (tmp_path / "descriptions.yaml").write_text("version: 1\nworkers:\n  solver: {description: hi}\n")
    broken = runner.invoke(app, ["pool", "refresh-descriptions", "--tasks", str(tasks), "--pool", str(pool_file)])
    assert broken.exit_code == 2 and "workers.solver.provenance" in broken.output

"""The resumable runner: end-to-end runs with scripted systems, resume, manifest checks, torn lines, USD cap."""

import asyncio
import json

import pytest

from podium.backends.scripted import ScriptedBackend
from podium.core.budget import StopReason
from podium.core.trajectory import Trajectory, Turn
from podium.datasets.loaders import get_benchmark, shared_data_dir
from podium.envs import communicate_info, golden_actions, load_domain
from podium.evaluate.metrics import run_metrics
from podium.evaluate.runner import RESULTS_FILE, EvalError, load_run, read_results, run_eval
from podium.evaluate.systems import ModelCaller, SingleModelSystem
from podium.graders.grader import Grader
from podium.sandbox import SandboxConfig

from .eval_runner import OracleSystem, oracle_knows

pytestmark = pytest.mark.skipif(not shared_data_dir().is_dir(), reason="shared benchmark data not present")
GSM8K = get_benchmark("gsm8k")


def _gold_by_question(limit: int) -> dict[str, str]:
    return {item.question: str(item.gold) for item in GSM8K.items()[:limit]}


def _half_right_backend(limit: int) -> ScriptedBackend:
    """Replies with the gold, boxed, to even-numbered items and a wrong number to the others."""
    golds = _gold_by_question(limit)
    order = list(golds)

    def reply(messages):
        question = messages[-1].content
        right = order.index(question) % 2 == 0
        return f"Working... so the result is \\boxed{{{golds[question] if right else '-1'}}}"

    return ScriptedBackend([reply], repeat_last=True, model="half-right")


def _run(system, out, **options):
    return asyncio.run(run_eval(GSM8K, system, out=out, progress=False, **options))


def test_end_to_end_scripted_eval_writes_one_verified_record_per_sample(tmp_path):
    backend = _half_right_backend(6)
    system = SingleModelSystem("half-right", ModelCaller(backend))
    summary = _run(system, tmp_path, limit=6, samples=2, concurrency=3)
    assert (summary.total, summary.done, summary.correct, summary.errors) == (12, 12, 6, 0)
    manifest, records = load_run(tmp_path)
    assert manifest.benchmark == "gsm8k" and manifest.samples == 2
    assert sorted(r.key for r in records) == sorted((f"gsm8k-{i}", s) for i in range(6) for s in range(2))
    first = next(r for r in records if r.key == ("gsm8k-0", 0))
    assert first.answer == "18" and first.verdict.correct and first.gold == "18"
    assert first.trajectory.turns[0].usage.output_tokens == len(first.trajectory.turns[0].output.split())
    assert first.usage.tokens > 0
    metrics = run_metrics(records)
    assert metrics.pass_at_1 == pytest.approx(0.5) and metrics.pass_at_2 == pytest.approx(0.5)
    assert len(backend.requests) == 12


def test_rerun_resumes_without_repeating_or_duplicating(tmp_path):
    backend = _half_right_backend(8)
    system = SingleModelSystem("half-right", ModelCaller(backend))
    _run(system, tmp_path, limit=5)
    summary = _run(system, tmp_path, limit=8)
    assert (summary.resumed, summary.done, summary.total) == (5, 8, 8)
    assert len(backend.requests) == 8
    again = _run(system, tmp_path, limit=8)
    assert again.resumed == 8 and len(backend.requests) == 8
    lines = (tmp_path / RESULTS_FILE).read_text().splitlines()
    assert len(lines) == len({(json.loads(line)["item_id"], json.loads(line)["sample"]) for line in lines}) == 8


def test_resume_with_other_settings_is_refused(tmp_path):
    system = SingleModelSystem("half-right", ModelCaller(_half_right_backend(2)))
    _run(system, tmp_path, limit=2)
    other = SingleModelSystem("other", ModelCaller(_half_right_backend(2)))
    with pytest.raises(EvalError, match="system: was 'half-right', now 'other'"):
        _run(other, tmp_path, limit=2)
    with pytest.raises(EvalError, match="samples: was 1, now 3"):
        _run(system, tmp_path, limit=2, samples=3)
    with pytest.raises(EvalError, match="system_config"):
        _run(system, tmp_path, limit=2, system_config={"temperature": 0.5})


def test_a_torn_last_line_is_dropped_and_its_sample_rerun(tmp_path):
    system = OracleSystem("oracle", delay_s=0.0, usd_per_attempt=0.0)
    _run(system, tmp_path, limit=4)
    results = tmp_path / RESULTS_FILE
    lines = results.read_bytes().splitlines(keepends=True)
    torn_key = (json.loads(lines[-1])["item_id"], json.loads(lines[-1])["sample"])
    results.write_bytes(b"".join(lines[:-1]) + lines[-1][: len(lines[-1]) // 2])
    records, dropped = read_results(results)
    assert (len(records), dropped) == (3, 1)
    assert not results.read_bytes().endswith(b"\n"), "reading must not change the file"

    summary = _run(system, tmp_path, limit=4)
    assert (summary.dropped_lines, summary.resumed, summary.done) == (1, 3, 4)
    repaired = results.read_text().splitlines()
    assert len(repaired) == 4 and all(json.loads(line) for line in repaired)
    assert torn_key in {r.key for r in read_results(results)[0]}


def test_a_complete_last_record_without_newline_is_kept_and_terminated(tmp_path):
    system = OracleSystem("oracle", delay_s=0.0, usd_per_attempt=0.0)
    _run(system, tmp_path, limit=2)
    results = tmp_path / RESULTS_FILE
    results.write_bytes(results.read_bytes().rstrip(b"\n"))
    summary = _run(system, tmp_path, limit=3)
    assert (summary.dropped_lines, summary.resumed, summary.done) == (0, 2, 3)
    assert len(results.read_text().splitlines()) == 3


def test_usd_cap_stops_launching_and_a_higher_cap_finishes(tmp_path):
    system = OracleSystem("oracle", delay_s=0.0, usd_per_attempt=0.01)
    capped = _run(system, tmp_path, limit=10, concurrency=1, max_run_usd=0.025)
    # A third sample could cost 0.01 more than the 0.005 left: it never starts.
    assert capped.stopped_by_budget and capped.done == 2 and capped.usd == pytest.approx(0.02)
    # The cap covers the whole run, earlier invocations included.
    still = _run(system, tmp_path, limit=10, concurrency=1, max_run_usd=0.0301)
    assert still.stopped_by_budget and still.done == 3
    finished = _run(system, tmp_path, limit=10, concurrency=4, max_run_usd=1.0)
    assert not finished.stopped_by_budget and finished.done == 10
    assert finished.correct == sum(oracle_knows(f"gsm8k-{i}") for i in range(10))


def test_backend_failures_become_error_records(tmp_path):
    system = SingleModelSystem("broken", ModelCaller(ScriptedBackend([], model="empty")))
    summary = _run(system, tmp_path, limit=3)
    assert (summary.done, summary.errors, summary.correct) == (3, 3, 0)
    record = load_run(tmp_path)[1][0]
    assert "no reply left" in record.error and record.trajectory.stop_reason == "error"
    assert record.verdict.reason.startswith("system failed")


def test_systems_must_support_the_benchmark(tmp_path):
    system = SingleModelSystem("plain", ModelCaller(ScriptedBackend(["hi"])))
    with pytest.raises(EvalError, match="cannot attempt tau2_airline"):
        asyncio.run(run_eval(get_benchmark("tau2_airline"), system, out=tmp_path, progress=False))


def test_code_items_are_graded_in_the_sandbox(tmp_path):
    humaneval = get_benchmark("humaneval")
    items = humaneval.items()[:2]
    solutions = {
        item.question: json.loads(line)["canonical_solution"]
        for item, line in zip(
            items, (shared_data_dir() / "code" / "humaneval.jsonl").read_text().splitlines(), strict=False
        )
    }
    backend = ScriptedBackend([lambda messages: f"```python\n{solutions[messages[-1].content]}```"], repeat_last=True)
    grader = Grader(sandbox_config=SandboxConfig(cpu_time_s=2, wall_time_s=10, memory_mb=512))
    system = SingleModelSystem("canonical", ModelCaller(backend))
    summary = asyncio.run(run_eval(humaneval, system, out=tmp_path, limit=2, grader=grader, progress=False))
    assert (summary.done, summary.correct) == (2, 2)


def test_tool_use_items_are_graded_by_their_environment():
    domain = load_domain("airline", shared_data_dir() / "tau2")
    items = get_benchmark("tau2_airline").items()
    refusal = next(
        i for i in items if not golden_actions(domain.task(i.gold)) and not communicate_info(domain.task(i.gold))
    )
    writes = {name for name, kind in domain.tool_kinds.items() if kind == "write"}
    booking = next(i for i in items if {a.name for a in golden_actions(domain.task(i.gold))} & writes)

    def apology(question: str) -> Trajectory:  # the agent only apologises, then the user stops
        said = ["Hi! How can I help you today?", question, "Sorry, I cannot help.", "Bye. ###STOP###"]
        dialogue = [{"role": ("assistant", "user")[n % 2], "content": text} for n, text in enumerate(said)]
        turn = Turn(index=0, output="<answer>Sorry, I cannot help.</answer>")
        metadata = {"tau2_dialogue": dialogue, "user_stopped": True}
        return Trajectory(question=question, turns=[turn], stop_reason=StopReason.ENV_DONE, metadata=metadata)

    grader = Grader()
    # Doing nothing solves a task whose right outcome is no change, and fails one that needs actions.
    assert asyncio.run(grader.grade(refusal, apology(refusal.question))).correct
    verdict = asyncio.run(grader.grade(booking, apology(booking.question)))
    assert not verdict.correct and "DB" in verdict.reason

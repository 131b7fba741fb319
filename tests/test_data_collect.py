"""``podium data collect`` with scripted teachers: the funnel counted by hand, recoveries preferred, a worker's 5xx
told apart from the orchestrator's own mistakes, tool balance, provenance, eval results as input, resume."""

import asyncio
import json

import pytest

from podium.core.calls import CallUsage, Status, ToolCall, ToolResult
from podium.core.messages import Message
from podium.core.trajectory import Trajectory, Turn
from podium.data.collect import CollectConfig, collect
from podium.data.provenance import pool_hash
from podium.data.selection import balance_tools
from podium.data.store import DataError
from podium.pool.config import PoolConfig
from podium.solve.records import DataRow, Provenance, read_funnel
from podium.train.samples import TrainingDataError
from podium.train.sft import load_trajectories
from support.servers import FaultServer
from tests.data_fixtures import scripted_worker, write_tasks
from tests.eval_fixtures import record

TASKS = [("q1", "What is 12 * 34?", "408"), ("q2", "What is 2 + 2?", "4"), ("q3", "What is 3 + 4?", "7")]
CALL_REMOTE = '<tool_call>{"name": "remote", "arguments": {"prompt": "check 12 * 34"}}</tool_call>'
CALL_UNKNOWN = '<tool_call>{"name": "nope", "arguments": {}}</tool_call>'
CALL_HELPER = '<tool_call>{"name": "helper", "arguments": {"prompt": "3 + 4?"}}</tool_call>'
BROKEN = "<tool_call>{oops</tool_call>"
TEACHER_REPLIES = [
    CALL_REMOTE, "<answer>408</answer>",  # q1 #0: right, but the remote worker answered HTTP 500
    "<answer>408</answer>",  # q1 #1: right
    BROKEN, BROKEN, BROKEN,  # q2 #0: never repaired its call format
    CALL_UNKNOWN, "<answer>4</answer>",  # q2 #1: right after recovering from a PARSE_ERR
    "<answer>7</answer>",  # q3 #0: right
    CALL_HELPER, "<answer>7</answer>",  # q3 #1: right, with a tool call
]  # fmt: skip


def teacher_pool(url: str) -> dict:
    remote = {"name": "remote", "backend": "http", "model": "remote-model", "base_url": url, "max_retries": 0,
              "timeout_s": 5, "price": {"input_per_mtok": 0, "output_per_mtok": 0}}  # fmt: skip
    return {
        "workers": [scripted_worker("teacher", TEACHER_REPLIES), remote, scripted_worker("helper", ["7"])],
        "tools": [],
    }


@pytest.fixture
def tasks(tmp_path):
    return write_tasks(tmp_path / "tasks.jsonl", TASKS)


def rows(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_collect_counts_every_filter_and_keeps_one_recovery_first_trajectory_per_question(tmp_path, tasks):
    with FaultServer(["500"]).running() as url:
        pool = teacher_pool(url)
        config = CollectConfig(
            out=str(tmp_path / "out"), tasks=str(tasks), samples=2, concurrency=1,
            teacher={"name": "teacher", "pool": pool, "max_turns": 3},
        )  # fmt: skip
        funnel = asyncio.run(collect(config, progress=False))
    steps = {step.name: step for step in funnel.steps}
    assert all(step.consistent for step in funnel.steps)
    assert (steps["attempted"].entered, steps["attempted"].kept) == (3, 3)
    assert (steps["infrastructure"].entered, steps["infrastructure"].left) == (
        6,
        {"infrastructure: worker call EXEC_ERR": 1},
    )
    assert steps["format errors"].left == {"format: last turn malformed": 1}
    assert (steps["verifier"].entered, steps["verifier"].kept) == (4, 4)
    assert steps["at most 1 per question"].left == {"another trajectory of the question kept": 1}
    assert (steps["tool balance"].entered, steps["tool balance"].kept) == (3, 3)
    assert funnel.outputs == {"sft.jsonl": 3, "failures.jsonl": 1}
    kept = {row["item_id"]: row for row in rows(tmp_path / "out" / "sft.jsonl")}
    assert sorted(kept) == ["q1", "q2", "q3"]
    assert (kept["q1"]["sample"], kept["q2"]["sample"], kept["q3"]["sample"]) == (1, 1, 0)
    recovery = next(d for d in kept["q2"]["decisions"] if d["filter"] == "per question")
    assert recovery == {
        "stage": "collect",
        "filter": "per question",
        "kept": True,
        "reason": "recovered from PARSE_ERR",
    }
    provenance = Provenance.model_validate(kept["q1"]["provenance"])
    assert (provenance.stage, provenance.source, provenance.model, provenance.policy) == (
        "collect",
        "tasks",
        "teacher",
        "serial",
    )
    assert provenance.temperature == 1.0 and provenance.seed is not None and provenance.podium_version
    assert provenance.pool_hash == pool_hash(PoolConfig.model_validate(pool))
    [failure] = rows(tmp_path / "out" / "failures.jsonl")
    assert (failure["item_id"], failure["correct"], failure["answer"]) == ("q2", False, None)
    assert read_funnel(tmp_path / "out") == funnel


def _row(item_id: str, calls: list[str], sample: int = 0) -> DataRow:
    results = [ToolResult(call=ToolCall(name=name), status=Status.OK, usage=CallUsage()) for name in calls]
    trajectory = Trajectory(question=item_id, turns=[Turn(index=0, output="x", results=results)], answer="1")
    provenance = Provenance(stage="collect", source="t", item_id=item_id, podium_version="0")
    return DataRow(id=f"{item_id}:{sample}", item_id=item_id, benchmark="t", question=item_id, gold="1",
                   verifier="math", sample=sample, answer="1", correct=True, trajectory=trajectory,
                   provenance=provenance)  # fmt: skip


def test_tool_balance_swaps_then_drops_until_no_tool_exceeds_its_share():
    chosen = {
        "a": [_row("a", ["search", "search"])],
        "b": [_row("b", ["search"])],
        "c": [_row("c", ["python"])],
        "d": [_row("d", ["search", "search", "search"])],
    }
    spare = {"a": [_row("a", ["python"], sample=1)]}
    outcome = balance_tools(chosen, spare, max_share=0.5)
    # search makes 6 of 7 calls. Swapping a's trajectory for its python one gives 4 of 6; no swap helps further,
    # so d, which leans on search most, goes (python 2 of 3); swapping a back would make it worse (search 3 of 4),
    # so a python-only row goes too, leaving one search and one python call.
    assert outcome.swaps == 1
    assert [(row.id, reason) for row, reason in outcome.dropped] == [
        ("d:0", "tool balance: search above 0.5 of calls"),
        ("a:1", "tool balance: python above 0.5 of calls"),
    ]
    assert outcome.note is None and [item for item, rows in outcome.chosen.items() if rows] == ["b", "c"]
    assert balance_tools({"a": [_row("a", ["search"])]}, {}, 0.5).note.startswith("tool balance: only 1 tool")


def test_collect_from_eval_results_needs_no_teacher(tmp_path):
    conversation = [Message(role="user", content="q"), Message(role="assistant", content="<answer>42</answer>")]
    good = record("gsm8k-0", benchmark="gsm8k")
    good.trajectory.messages = conversation
    baseline = record("gsm8k-2", benchmark="gsm8k")  # a model-only baseline records no orchestrator conversation
    wrong = record("gsm8k-1", correct=False, benchmark="gsm8k")
    wrong.trajectory.messages = conversation
    results = tmp_path / "run" / "results.jsonl"
    results.parent.mkdir()
    results.write_text("".join(entry.model_dump_json() + "\n" for entry in (good, baseline, wrong)))
    config = CollectConfig(out=str(tmp_path / "out"), from_eval=[str(tmp_path / "run")])
    funnel = asyncio.run(collect(config, progress=False))
    steps = {step.name: step for step in funnel.steps}
    assert steps["format errors"].left == {"format: no recorded orchestrator conversation": 1}
    assert steps["verifier"].left == {"wrong answer": 1}
    assert funnel.outputs == {"sft.jsonl": 1, "failures.jsonl": 1}
    [row] = rows(tmp_path / "out" / "sft.jsonl")
    assert (row["item_id"], row["provenance"]["solver"], row["verifier"]) == ("gsm8k-0", "system", "math")
    # keep_wrong: the wrong attempt is a label too (and still a failure); the format error still leaves
    labels = CollectConfig(out=str(tmp_path / "labels"), from_eval=[str(tmp_path / "run")], keep_wrong=True)
    funnel = asyncio.run(collect(labels, progress=False))
    assert "verifier" not in {step.name for step in funnel.steps}
    assert funnel.outputs == {"sft.jsonl": 2, "failures.jsonl": 1}
    assert funnel.notes == ["keep_wrong: 1 wrong attempt(s) kept as labels"]
    kept = {row["item_id"]: row for row in rows(tmp_path / "labels" / "sft.jsonl")}
    assert sorted(kept) == ["gsm8k-0", "gsm8k-1"] and kept["gsm8k-1"]["correct"] is False
    decisions = kept["gsm8k-1"]["decisions"]
    assert decisions[0]["reason"] == "wrong, kept (keep_wrong)" and all(decision["kept"] for decision in decisions)
    # podium train sft trains on what the stage kept, the wrong label included, and never on a failure
    assert len(load_trajectories([str(tmp_path / "labels" / "sft.jsonl")])) == 2
    with pytest.raises(TrainingDataError, match=r"failures\.jsonl: 1 wrong and 0 failed of 1 lines left out"):
        load_trajectories([str(tmp_path / "labels" / "failures.jsonl")])


def test_a_resumed_collection_reruns_only_what_the_cap_or_a_torn_line_left(tmp_path, tasks):
    teacher = {"pool": {"workers": [scripted_worker("teacher", ["<answer>4</answer>"],
               price={"input_per_mtok": 1000.0, "output_per_mtok": 1000.0})], "tools": []}}  # fmt: skip
    out = tmp_path / "out"
    capped = CollectConfig(out=str(out), tasks=str(tasks), samples=1, concurrency=1, teacher=teacher, max_run_usd=1e-9)
    funnel = asyncio.run(collect(capped, progress=False))
    assert funnel.stopped_by_budget and funnel.steps[0].left == {"not attempted: USD cap reached": 2}
    work = out / "work" / "attempts.jsonl"
    assert len(work.read_text().splitlines()) == 1
    full = capped.model_copy(update={"max_run_usd": None})
    funnel = asyncio.run(collect(full, progress=False))
    assert not funnel.stopped_by_budget and funnel.steps[0].kept == 3
    lines = work.read_text().splitlines()
    work.write_text("\n".join(lines[:-1]) + "\n" + lines[-1][: len(lines[-1]) // 2])  # a kill mid-write
    funnel = asyncio.run(collect(full, progress=False))
    assert [json.loads(line)["item_id"] for line in work.read_text().splitlines()] == ["q1", "q2", "q3"]
    assert funnel.outputs["sft.jsonl"] == 1  # only q2's answer, 4, is right
    with pytest.raises(DataError, match="samples: was 1, now 2"):
        asyncio.run(collect(full.model_copy(update={"samples": 2}), progress=False))


def test_a_collection_reads_its_teacher_pool_file_once(tmp_path, tasks, monkeypatch):
    import yaml

    import podium.pool.pool

    path = tmp_path / "pool.yaml"
    path.write_text(yaml.safe_dump({"workers": [scripted_worker("teacher", ["<answer>408</answer>"])], "tools": []}))
    loads = []
    load = podium.pool.pool.load_pool_config
    monkeypatch.setattr(podium.pool.pool, "load_pool_config", lambda source: loads.append(source) or load(source))
    config = CollectConfig(
        tasks=str(tasks), out=str(tmp_path / "out"), teacher={"pool": str(path), "orchestrator": "teacher"}, limit=1
    )
    asyncio.run(collect(config))
    assert loads == [str(path)]

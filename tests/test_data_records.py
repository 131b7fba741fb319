"""The shared records: graded trajectories (the eval row, read by evaluate, data and train alike), data rows that the
``datasets`` library loads however their calls vary, one trajectory reader for every row shape, funnels that add
up, the stage store's manifest and torn-line repair, and ``podium train sft`` on eval and collect outputs."""

import json

import pytest

from podium.core.calls import Status, ToolCall, ToolResult
from podium.core.trajectory import Trajectory, Turn, write_trajectories
from podium.data.funnel import FunnelBuilder
from podium.data.store import DataError, check_stage
from podium.evaluate.runner import EvalRecord, read_results
from podium.solve.jsonl import JsonlLog, RecordError
from podium.solve.records import DataRow, GradedTrajectory, Provenance, read_graded, read_trajectory_lines
from tests.eval_fixtures import record


def data_row(item_id: str, value: object, arguments: dict) -> DataRow:
    """A row whose one call has the given value and arguments (their JSON types vary between rows)."""
    result = ToolResult(call=ToolCall(name="tool", arguments=arguments), status=Status.OK, value=value)
    trajectory = Trajectory(question="q", turns=[Turn(index=0, output="o", results=[result])], answer="1")
    return DataRow(
        id=item_id, item_id=item_id, benchmark="b", question="q", gold="1", verifier="math", answer="1", correct=True,
        trajectory=trajectory, provenance=Provenance(stage="collect", source="b", item_id=item_id, podium_version="0"),
    )  # fmt: skip


def test_the_eval_row_is_the_shared_graded_trajectory():
    assert EvalRecord is GradedTrajectory and read_results is read_graded


def test_data_rows_keep_their_trajectory_as_one_json_text_that_datasets_loads(tmp_path):
    datasets = pytest.importorskip("datasets")
    rows = [data_row("a", "text", {"x": 1}), data_row("b", {"nested": [1, 2]}, {"y": "z", "w": [True]})]
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(row.model_dump_json() + "\n" for row in rows))
    raw = json.loads(path.read_text().splitlines()[0])
    assert isinstance(raw["trajectory"], str) and json.loads(raw["trajectory"])["answer"] == "1"
    assert DataRow.model_validate_json(path.read_text().splitlines()[1]) == rows[1]
    loaded = datasets.load_dataset("json", data_files=str(path), split="train")
    assert loaded.num_rows == 2 and loaded[1]["provenance"]["stage"] == "collect"
    assert Trajectory.model_validate_json(loaded[1]["trajectory"]).results[0].value == {"nested": [1, 2]}


def test_one_reader_takes_the_trajectory_out_of_every_row_shape(tmp_path):
    bare = Trajectory(question="bare")
    path = tmp_path / "mixed.jsonl"
    write_trajectories(path, [bare])
    lines = [record("i1").model_dump_json(), record("i2", correct=False).model_dump_json(),
             data_row("r", "v", {}).model_dump_json()]  # fmt: skip
    with path.open("a") as handle:
        handle.write("\n".join(lines) + "\n")
    found = list(read_trajectory_lines(path))
    assert [(line.trajectory.question, line.correct) for line in found] == [
        ("bare", None), ("question i1", True), ("question i2", False), ("q", True),
    ]  # fmt: skip
    path.write_text('{"trajectory": 3}\n')
    with pytest.raises(RecordError, match=r"mixed\.jsonl:1 is not a trajectory"):
        list(read_trajectory_lines(path))


def test_funnel_steps_must_add_up():
    funnel = FunnelBuilder("collect")
    kept = funnel.apply("even", "numbers", range(10), lambda n: None if n % 2 == 0 else "odd")
    assert kept == [0, 2, 4, 6, 8]
    step = funnel.count("small", "numbers", 5, {"too big": 2})
    assert (step.kept, step.consistent) == (3, True)
    with pytest.raises(ValueError, match="more units left"):
        funnel.count("broken", "numbers", 1, {"x": 2})


def test_a_work_log_sets_a_torn_last_line_aside_and_a_manifest_refuses_other_settings(tmp_path):
    path = tmp_path / "work.jsonl"
    log = JsonlLog(path, DataRow, lambda row: row.id)
    log.append(data_row("a", 1, {}))
    log.append(data_row("b", 2, {}))
    text = path.read_text()
    path.write_text(text + text.splitlines()[0][:40])
    reopened = JsonlLog(path, DataRow, lambda row: row.id)
    assert (list(reopened.done), reopened.dropped) == (["a", "b"], 1)
    assert path.read_text() == text
    assert (tmp_path / "work.rejected.jsonl").read_text() == text.splitlines()[0][:40] + "\n"
    check_stage(tmp_path, "collect", {"samples": 8})
    check_stage(tmp_path, "collect", {"samples": 8})
    with pytest.raises(DataError, match="samples: was 8, now 4"):
        check_stage(tmp_path, "collect", {"samples": 4})
    with pytest.raises(DataError, match="holds a 'collect' stage"):
        check_stage(tmp_path, "curriculum", {"samples": 8})


def test_train_sft_reads_eval_results_and_collect_rows(tmp_path, caplog):
    pytest.importorskip("trl")
    from podium.train.samples import ChatFormat, TrainingDataError
    from podium.train.sft import load_trajectories, sft_rows
    from tests.test_train_support import arithmetic_trajectory, tiny_tokenizer

    right = record("i1")
    right.trajectory = arithmetic_trajectory(12, 34)
    wrong = record("i2", correct=False)
    wrong.trajectory = arithmetic_trajectory(2, 3, answer=7)
    failed = record("i3", error="backend down")
    failed.trajectory = arithmetic_trajectory(4, 5)
    results = tmp_path / "results.jsonl"
    results.write_text("".join(entry.model_dump_json() + "\n" for entry in (right, wrong, failed)))
    collected = data_row("c", 1, {}).model_copy(update={"trajectory": arithmetic_trajectory(6, 7)})
    rows = tmp_path / "sft.jsonl"
    rows.write_text(collected.model_dump_json() + "\n")
    trajectories = load_trajectories([str(results), str(rows)])
    assert [t.question for t in trajectories] == ["What is 12 * 34?", "What is 6 * 7?"]  # wrong and failed left out
    assert len(sft_rows(trajectories, ChatFormat(tiny_tokenizer()), max_length=4096)) == 2
    # What is left out is said, per file; a set with nothing left is an error, not an empty run.
    assert [entry.getMessage().split(" (")[0] for entry in caplog.records] == [
        f"{results}: 1 wrong and 1 failed of 3 lines left out"
    ]
    only_wrong = tmp_path / "wrong.jsonl"
    only_wrong.write_text(wrong.model_dump_json() + "\n")
    with pytest.raises(TrainingDataError, match=r"no trajectory to train on: .*wrong\.jsonl: 1 wrong and 0 failed"):
        load_trajectories([str(only_wrong)])
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(TrainingDataError, match=r"empty\.jsonl: no lines"):
        load_trajectories([str(empty)])


def test_backends_decode_without_upper_size_bounds_and_replies_are_checked_against_the_whole_schema():
    import asyncio

    from podium.backends.scripted import ScriptedBackend
    from podium.data.llm import ask_json, decoding_schema

    items = {"type": "array", "items": {"type": "string", "maxLength": 3}, "minItems": 1, "maxItems": 2}
    schema = {"type": "object", "properties": {"items": items}, "required": ["items"]}
    loose = {"type": "array", "items": {"type": "string"}, "minItems": 1}
    assert decoding_schema(schema) == {"type": "object", "properties": {"items": loose}, "required": ["items"]}
    backend = ScriptedBackend(['{"items": ["a", "b", "c"]}', 'Here: {"items": ["ab"]}'], supports_regex=False)
    reply = asyncio.run(ask_json(backend, "list", schema, attempts=2))
    assert reply.value == {"items": ["ab"]} and reply.reason is None
    assert "is too long" in backend.requests[1][-1].content  # the first reply had three items: sent back once

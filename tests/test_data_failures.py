"""``podium data classify-failures``: the rule-based pre-classifier, the LLM classifier whose evidence must be a
real slice of the trajectory and whose constraint must fit in 30 words (a bad reply is sent back once), the
constraints file, and the constraints reaching the teacher's system prompt in the next round."""

import asyncio
import json

from podium.backends.scripted import ScriptedBackend
from podium.core.budget import StopReason
from podium.core.messages import Message
from podium.core.trajectory import Trajectory, Turn
from podium.data.collect import CollectConfig, collect
from podium.data.failures import ClassifyConfig, classify_failures, evidence_problem
from podium.solve.records import DataRow, Provenance
from tests.data_fixtures import scripted_worker, write_tasks

GOOD_CONSTRAINT = "Always finish the arithmetic before answering."
LONG_CONSTRAINT = " ".join(["word"] * 40)


def failed(item_id: str, *, answer: str | None, stop: StopReason, reason: str = "", parse_error: str | None = None,
           correct: bool = False) -> DataRow:  # fmt: skip
    output = f"working on {item_id}: partial sum 12"
    messages = [Message(role="user", content=f"question {item_id}"), Message(role="assistant", content=output)]
    if parse_error:
        rejection = f'<tool_response status="PARSE_ERR">\n{parse_error}\n</tool_response>'
        messages.append(Message(role="user", content=rejection))
    trajectory = Trajectory(
        question=f"question {item_id}", turns=[Turn(index=0, output=output, parse_error=parse_error)],
        answer=answer, stop_reason=stop, messages=messages,
    )  # fmt: skip
    return DataRow(
        id=item_id, item_id=item_id, benchmark="t", question=trajectory.question, gold="24", verifier="math",
        answer=answer, correct=correct, reason=reason, messages=messages, trajectory=trajectory,
        provenance=Provenance(stage="collect", source="t", item_id=item_id, podium_version="0"),
    )  # fmt: skip


def classifier_llm():
    """Replies by failure: for r4 a made-up evidence first, then a good reply; for r5 too long a constraint."""
    seen: dict[str, int] = {}

    def reply(messages: list[Message]) -> str:
        item = "r4" if "question r4" in messages[0].content else "r5"
        seen[item] = seen.get(item, 0) + 1
        evidence = "partial sum 12" if item == "r5" or seen[item] > 1 else "the model gave up"
        constraint = GOOD_CONSTRAINT if item == "r4" else LONG_CONSTRAINT
        return json.dumps(
            {"category": "premature_aggregation", "evidence_span": evidence, "suggested_constraint": constraint}
        )

    return ScriptedBackend([reply], repeat_last=True, model="classifier")


def test_failures_are_classified_by_rule_or_by_a_checked_llm_reply(tmp_path):
    rows = [
        failed("r1", answer=None, stop=StopReason.MAX_PARSE_ERRORS, parse_error="the call is not valid JSON"),
        failed("r2", answer=None, stop=StopReason.MAX_TURNS),
        failed("r3", answer="twenty four", stop=StopReason.ANSWER, reason="no mathematical expression found"),
        failed("r4", answer="12", stop=StopReason.ANSWER, reason="'12' is not equivalent to '24'"),
        failed("r5", answer="12", stop=StopReason.ANSWER),
        failed("r6", answer="24", stop=StopReason.ANSWER, correct=True),
        failed("r7", answer=None, stop=StopReason.ERROR),
    ]
    inputs = tmp_path / "failures.jsonl"
    inputs.write_text("".join(row.model_dump_json() + "\n" for row in rows))
    backend = classifier_llm()
    config = ClassifyConfig(out=str(tmp_path / "out"), inputs=[str(inputs)], concurrency=1)
    funnel = asyncio.run(classify_failures(config, progress=False, backend=backend))
    steps = [(step.name, step.entered, step.kept, step.left) for step in funnel.steps]
    assert steps == [
        ("failures", 7, 5, {"correct (not a failure)": 1, "infrastructure: orchestrator backend failed": 1}),
        ("rule-based pre-classifier", 5, 2, {"by rule: format_mismatch": 2, "by rule: delegation_scope_error": 1}),
        ("LLM classifier (checked)", 2, 1, {"unclassified: the constraint has 40 words, more than 30": 1}),
        ("constraints", 3, 3, {}),
    ]
    assert len(backend.requests) == 4  # r4 twice (its first evidence was made up), r5 twice (too long both times)
    assert "not a verbatim slice" in backend.requests[1][-1].content
    by_id = {row["id"]: row for row in map(json.loads, (tmp_path / "out" / "classifications.jsonl").open())}
    assert (by_id["r1"]["category"], by_id["r1"]["evidence_span"], by_id["r1"]["by"]) == (
        "format_mismatch", "the call is not valid JSON", "rule",
    )  # fmt: skip
    assert (by_id["r2"]["category"], by_id["r2"]["evidence_span"]) == ("delegation_scope_error", "max_turns")
    assert (by_id["r4"]["category"], by_id["r4"]["constraint"], by_id["r4"]["by"]) == (
        "premature_aggregation", GOOD_CONSTRAINT, "llm",
    )  # fmt: skip
    assert by_id["r4"]["provenance"]["prompt"].startswith("failures/classify@v1#")
    assert by_id["r5"]["category"] is None and "40 words" in by_id["r5"]["reason"]
    constraints = json.loads((tmp_path / "out" / "constraints.json").read_text())
    assert constraints["histogram"] == {"format_mismatch": 2, "delegation_scope_error": 1, "premature_aggregation": 1}
    assert [entry["category"] for entry in constraints["constraints"]] == [
        "format_mismatch", "delegation_scope_error", "premature_aggregation",
    ]  # fmt: skip
    assert all(len(entry["constraint"].split()) <= 30 for entry in constraints["constraints"])

    # The next round: the constraints join the teacher's system prompt.
    tasks = write_tasks(tmp_path / "tasks.jsonl", [("q1", "What is 2 + 2?", "4")])
    teacher = {"pool": {"workers": [scripted_worker("teacher", ["<answer>4</answer>"])], "tools": []}}
    again = CollectConfig(out=str(tmp_path / "next"), tasks=str(tasks), samples=1, teacher=teacher,
                          constraints=str(tmp_path / "out" / "constraints.json"))  # fmt: skip
    asyncio.run(collect(again, progress=False))
    [row] = map(json.loads, (tmp_path / "next" / "sft.jsonl").open())
    system = row["messages"][0]["content"]
    assert "Constraints learned from earlier failed attempts" in system and GOOD_CONSTRAINT in system


def test_evidence_must_be_a_real_slice_whitespace_aside():
    trace = "[assistant]\nThe partial   sum is\n12."
    assert evidence_problem("partial sum is 12.", trace) is None
    assert evidence_problem("partial sum is 13", trace) == "the evidence span is not a verbatim slice of the trajectory"
    assert evidence_problem(" a ", trace).startswith("the evidence span is empty")

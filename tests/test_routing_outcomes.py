"""Outcome-only recordings (RouteLLM's MMLU): a replay that refers to its recorded answer, the verifier that grades
that reference by the recording, the MMLU routing split by subject, and an orchestrator routing from the question."""

import asyncio
from pathlib import Path

import numpy as np
import pytest

from podium.backends.replay import ReplayBackend, count_tokens, recorded_reference, referenced_model
from podium.backends.scripted import ScriptedBackend
from podium.core.messages import Message
from podium.costs.prices import ModelPrice, PriceCatalog
from podium.datasets.items import BenchmarkItem
from podium.errors import ConfigError
from podium.evaluate.routing.importers import GPT4, MIXTRAL, import_routellm
from podium.evaluate.routing.routers import available_routers, router_curves
from podium.graders import Grader, RecordedVerifier
from podium.recording import Recording, hashed_split
from podium.routers.data import routing_set
from podium.runtime import Executor, RunConfig
from support.runtime_fixtures import replay_pool

pytest.importorskip("bpe_openai")

ANATOMY = "Which bone is the longest?\nA. femur\nB. tibia\nAnswer:"
ALGEBRA = "What is the order of the group Z_4?\nA. 2\nB. 4\nAnswer:"
BOTH = "Which is a prime?\nA. 4\nB. 7\nAnswer:"


def write_subjects(directory: Path, weak: str = "w", strong: str = "s") -> Path:
    """Two subjects' outcomes, no responses; BOTH is recorded in each subject (with different outcomes)."""
    directory.mkdir(parents=True)
    header = f"prompt,{weak},{strong}\n"
    (directory / "mmlu_anatomy.csv").write_text(f'{header}"{ANATOMY}",True,True\n"{BOTH}",True,False\n')
    (directory / "mmlu_abstract_algebra.csv").write_text(f'{header}"{ALGEBRA}",False,True\n"{BOTH}",False,False\n')
    return directory


def test_an_outcome_only_replay_refers_to_its_recorded_answer_and_the_recorded_verifier_grades_it(tmp_path) -> None:
    replay = ReplayBackend.from_file(
        write_subjects(tmp_path / "mmlu"), "w", price=ModelPrice(input_per_mtok=1.0, output_per_mtok=4.0)
    )
    generation = asyncio.run(replay.generate([Message(role="user", content=f"{ALGEBRA}\n\nAnswer the question.")]))
    # the reply names the model, never its outcome: the recorded answer was wrong here and right on ANATOMY
    assert generation.text == recorded_reference("w") and referenced_model(generation.text) == "w"
    assert asyncio.run(replay.generate([Message(role="user", content=ANATOMY)])).text == generation.text
    # the recorded prompt's tokens and one output token (the option letter)
    assert (generation.input_tokens, generation.output_tokens) == (count_tokens(ALGEBRA), 1)
    assert generation.usd == pytest.approx((count_tokens(ALGEBRA) + 4.0) / 1e6)
    verifier = RecordedVerifier()
    right = asyncio.run(verifier.verify(recorded_reference("s"), ["s"]))
    wrong = asyncio.run(verifier.verify(recorded_reference("w"), ["s"]))
    assert right.correct and right.extracted == "s"
    assert not wrong.correct and wrong.reason == "w was recorded wrong"
    assert "not a replayed model" in (asyncio.run(verifier.verify("B", ["s"])).reason or "")
    assert referenced_model("the recorded answer of s") is None
    with pytest.raises(ConfigError, match=r"no \.csv"):
        ReplayBackend.from_file(tmp_path, "w")


def test_mmlu_imports_split_by_subject_priced_for_one_output_token_without_questions_recorded_twice(tmp_path) -> None:
    write_subjects(tmp_path / "routing" / "mmlu", MIXTRAL, GPT4)
    assert import_routellm("routellm-mmlu", tmp_path / "mmlu", data_dir=tmp_path) == 4
    sheet = PriceCatalog(models={GPT4: ModelPrice(input_per_mtok=2.0, output_per_mtok=8.0)})
    data = routing_set(Recording.load(tmp_path / "mmlu"), sheet)
    by_id = {item.item.id: item for item in data.items}
    assert set(by_id) == {"mmlu-anatomy-0", "mmlu-abstract_algebra-0"}  # BOTH is in two subjects: left out
    algebra = by_id["mmlu-abstract_algebra-0"]
    assert algebra.split == hashed_split("abstract_algebra") and algebra.item.metadata == {
        "subject": "abstract_algebra"
    }
    assert algebra.item.gold == [GPT4] and algebra.item.verifier == "recorded"
    assert by_id["mmlu-anatomy-0"].item.gold == [MIXTRAL, GPT4]
    assert algebra.outcomes["gpt4"].usd == pytest.approx((count_tokens(ALGEBRA) * 2.0 + 8.0) / 1e6)
    assert algebra.outcomes["mixtral"].response is None and not algebra.outcomes["mixtral"].correct
    # no reply is recorded, so there is no cascade to read one
    assert available_routers(data) == ["knn", "logreg", "mf"]
    curves = router_curves(data, data.items, data.items, embed=lambda texts: np.eye(2)[: len(texts)])
    assert set(curves.curves) == {"always_mixtral", "always_gpt4", "oracle", "random", "knn", "logreg", "mf"}
    with pytest.raises(Exception, match="no MMLU recording"):
        import_routellm("routellm-mmlu", tmp_path / "absent", data_dir=tmp_path / "absent")


def test_an_orchestrator_reading_no_reply_routes_from_the_question_and_is_graded_by_the_recording(tmp_path) -> None:
    pool = replay_pool(write_subjects(tmp_path / "mmlu"))
    orchestrator = ScriptedBackend(["w", "s", "accept"])
    trajectory = asyncio.run(
        Executor(pool, RunConfig(policy={"name": "escalate", "reply_chars": 0}), orchestrator=orchestrator).run(ALGEBRA)
    )
    assert [message.content for message in trajectory.messages if message.role == "user"][1:] == [
        "w replied.",
        "s replied.",
    ]
    assert trajectory.answer == recorded_reference("s")
    item = BenchmarkItem(id="a", question=ALGEBRA, gold=["s"], verifier="recorded")
    verdict = asyncio.run(Grader().grade(item, trajectory))
    assert verdict.correct and verdict.grader == RecordedVerifier.name


def test_podium_routing_tasks_writes_recorded_tasks_of_unseen_subjects(tmp_path) -> None:
    import json

    from typer.testing import CliRunner

    from podium.cli import app

    recording, out = tmp_path / "mmlu", tmp_path / "test.jsonl"
    imported = CliRunner().invoke(app, ["routing", "import", "routellm-mmlu", "--out", str(recording)])
    assert imported.exit_code == 0, imported.output
    done = CliRunner().invoke(
        app, ["routing", "tasks", "--recording", str(recording), "--split", "test", "--limit", "3", "--out", str(out)]
    )
    assert done.exit_code == 0, done.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 3 and {row["verifier"] for row in rows} == {"recorded"}
    assert all(
        hashed_split(row["metadata"]["subject"]) == "test" and set(row["gold"]) <= {MIXTRAL, GPT4} for row in rows
    )
    bad = CliRunner().invoke(app, ["routing", "import", "hellaswag", "--out", str(out)])
    assert bad.exit_code != 0 and "not routellm-gsm8k or routellm-mmlu" in bad.output
    absent = CliRunner().invoke(app, ["routing", "tasks", "--recording", str(tmp_path / "none"), "--out", str(out)])
    assert absent.exit_code != 0 and "not a recording" in absent.output

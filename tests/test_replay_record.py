"""A recorded worker replays: `record` writes RouteLLM's layout, graded by the math verifier."""

import asyncio
from pathlib import Path

import pytest

from podium.backends.replay import ReplayBackend
from podium.backends.scripted import ScriptedBackend
from podium.core.messages import Message
from podium.datasets.items import BenchmarkItem
from podium.errors import ConfigError
from podium.evaluate.routing.data import RoutingItem
from podium.evaluate.routing.record import record

pytest.importorskip("bpe_openai")


def items() -> list[RoutingItem]:
    return [
        RoutingItem(BenchmarkItem(id=str(n), question=q, gold=g, verifier="math"), "test", {})
        for n, (q, g) in enumerate([("What is 2 + 3?", "5"), ("What is 4 * 4?", "16")])
    ]


def test_recorded_answers_are_graded_and_replay(tmp_path: Path) -> None:
    model = ScriptedBackend(["2 + 3 = \\boxed{5}", "4 * 4 is \\boxed{15}"], model="tiny")
    seen: list[tuple[int, int]] = []
    out = tmp_path / "tiny.csv"
    right = record(model, items(), out, "tiny", progress=lambda done, total: seen.append((done, total)))
    assert right == 1 and seen == [(1, 2), (2, 2)]
    assert "math" in model.requests[0][0].content.lower() or "\\boxed" in model.requests[0][0].content
    replay = ReplayBackend.from_file(out, "tiny")
    reply = asyncio.run(replay.generate([Message(role="user", content="Please: What is 4 * 4?")]))
    assert reply.text == "4 * 4 is \\boxed{15}"
    assert [record.correct for record in replay.index.by_key.values()] == [True, False]


def test_an_interrupted_recording_resumes_without_asking_again(tmp_path: Path) -> None:
    out = tmp_path / "tiny.csv"
    first, second = items()
    assert record(ScriptedBackend(["\\boxed{5}"], model="tiny"), [first], out, "tiny") == 1
    with open(out, "a", encoding="utf-8") as handle:
        handle.write('"What is 4 * 4?",False,"4 * 4 is \\bo')  # killed while writing the second row
    model = ScriptedBackend(["\\boxed{16}"], model="tiny")
    seen: list[tuple[int, int]] = []
    assert record(model, items(), out, "tiny", progress=lambda done, total: seen.append((done, total))) == 2
    assert len(model.requests) == 1 and "4 * 4" in model.requests[0][-1].content  # the first is not asked again
    assert seen == [(1, 2), (2, 2)]
    replay = ReplayBackend.from_file(out, "tiny")
    assert [(r.question, r.correct) for r in replay.index.by_key.values()] == [
        (first.question, True),
        (second.question, True),
    ]
    assert out.read_text().count("prompt,tiny,tiny_response") == 1
    with pytest.raises(ConfigError, match="not a recording of 'other'"):
        record(model, items(), out, "other")


def test_load_routing_grades_prices_and_splits_each_recorded_outcome(tmp_path: Path) -> None:
    import json

    from podium.backends.replay import count_tokens
    from podium.costs.prices import ModelPrice, PriceCatalog
    from podium.evaluate.routing.data import STRONG, WEAK, load_routing, split_of

    (tmp_path / "math").mkdir()
    (tmp_path / "routing").mkdir()
    rows = [{"question": "What is 2 + 3?", "answer": "2 + 3 = 5\\n#### 5"}]
    (tmp_path / "math" / "gsm8k_test.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    (tmp_path / "routing" / "gsm8k_responses.csv").write_text(
        f'prompt,{WEAK},{STRONG},{WEAK}_response,{STRONG}_response\n"What is 2 + 3?",False,True,"#### 6","It is 5."\n'
    )
    sheet = PriceCatalog(models={STRONG: ModelPrice(input_per_mtok=2.5, output_per_mtok=7.5)})
    [item] = load_routing(data_dir=tmp_path, prices=sheet)
    assert item.split == split_of("What is 2 + 3?")
    assert (item.outcomes[WEAK].correct, item.outcomes[STRONG].correct) == (False, True)
    tokens_in = count_tokens("What is 2 + 3?")
    assert item.outcomes[STRONG].usd == pytest.approx((tokens_in * 2.5 + count_tokens("It is 5.") * 7.5) / 1e6)
    assert item.outcomes[WEAK].usd == pytest.approx((tokens_in + count_tokens("#### 6")) * 0.7 / 1e6)


def test_podium_routing_record_writes_a_replayable_recording(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    from typer.testing import CliRunner

    from podium.cli import app
    from podium.evaluate.routing.data import STRONG, WEAK, split_of

    questions = [f"What is {n} + {n}?" for n in range(40)]
    test_questions = [q for q in questions if split_of(q) == "test"][:2]
    (tmp_path / "math").mkdir()
    (tmp_path / "routing").mkdir()
    (tmp_path / "math" / "gsm8k_test.jsonl").write_text(
        "".join(json.dumps({"question": q, "answer": f"#### {2 * int(q.split()[2])}"}) + "\n" for q in questions)
    )
    header = f"prompt,{WEAK},{STRONG},{WEAK}_response,{STRONG}_response\n"
    (tmp_path / "routing" / "gsm8k_responses.csv").write_text(
        header + "".join(f'"{q}",True,True,"#### 0","#### 0"\n' for q in questions)
    )
    pool = tmp_path / "pool.yaml"
    pool.write_text(
        "workers:\n  - {name: tiny, backend: scripted, model: tiny, replies: ['\\\\boxed{2}']}\ntools: []\n"
    )
    monkeypatch.setenv("PODIUM_DATA", str(tmp_path))
    out = tmp_path / "tiny.csv"
    result = CliRunner().invoke(
        app, ["routing", "record", "--out", str(out), "--pool", str(pool), "--limit", "2", "--json"]
    )
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert lines[-1] == {
        "out": str(out),
        "model": "tiny",
        "questions": 2,
        "correct": int("What is 1 + 1?" in test_questions),
    }
    assert [record.question for record in ReplayBackend.from_file(out, "tiny").index.by_key.values()] == test_questions
    bad = CliRunner().invoke(app, ["routing", "record", "--out", str(out), "--pool", str(pool), "--split", "dev"])
    assert bad.exit_code == 2
    for option in ("--limit", "--max-tokens"):  # nothing to ask is an error, not a header-only file and exit 0
        empty = tmp_path / "empty.csv"
        refused = CliRunner().invoke(app, ["routing", "record", "--out", str(empty), "--pool", str(pool), option, "0"])
        assert refused.exit_code == 2 and not empty.exists()
        assert option in refused.output

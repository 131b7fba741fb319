"""A recorded worker replays: `record` writes RouteLLM's layout, graded by the math verifier."""

import asyncio
from pathlib import Path

import pytest

from podium.backends.replay import ReplayBackend
from podium.backends.scripted import ScriptedBackend
from podium.benchmarks.items import BenchmarkItem
from podium.core.messages import Message
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

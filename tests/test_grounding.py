"""Answers held by observations are never lost or miscopied; conversations, cancellation and sampling in the
runtime (issue 27 items 1, 5, 8; issue 25 item 10)."""

import asyncio
import json

import pytest

from podium.backends.scripted import ScriptedBackend
from podium.core.budget import StopReason
from podium.core.calls import Status, ToolCall, ToolResult
from podium.core.messages import Message
from podium.core.progress import EpisodeEvent
from podium.pool.config import PoolConfig, WorkerConfig
from podium.pool.pool import build_pool
from podium.pool.tool import tool
from podium.runtime import Executor, RunConfig
from podium.runtime.grounding import final_value, ground, recover
from support.runtime_fixtures import PRICE, orchestrator, run, scripted_pool

PRODUCT = "121932631112635269"
MISCOPY = "12193263111126311111111"  # what the demo's 135M summarizer wrote from the product above


def call(name: str, **arguments: object) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def result(observation: str, status: Status = Status.OK, name: str = "python", call_id: str = "call_0") -> ToolResult:
    return ToolResult(call=ToolCall(name=name, id=call_id), status=status, observation=observation)


@tool
def multiply(a: int, b: int) -> int:
    """Multiply two integers.

    Args:
        a: First factor.
        b: Second factor.
    """
    return a * b


def test_a_miscopied_long_number_is_replaced_by_the_observed_one() -> None:
    results = [result(f"{PRODUCT}\n")]
    answer, corrections = ground(f"The product is {MISCOPY}.", "What is 123456789 * 987654321?", results)
    assert answer == f"The product is {PRODUCT}." and [c.observed for c in corrections] == [PRODUCT]
    assert ground(PRODUCT, "q", results) == (PRODUCT, [])  # copied right: nothing to do
    assert ground("123456789", "What is 123456789 * 2?", results)[0] == "123456789"  # the question's own number
    assert ground("246913578", "double 123456789", results)[0] == "246913578"  # starts unlike any observation
    assert ground("121932.63", "q", [result("121932.631112")])[0] == "121932.63"  # a rounding is not a miscopy
    assert ground(MISCOPY, "q", [result(PRODUCT, Status.EXEC_ERR)])[0] == MISCOPY  # failed calls are no evidence
    assert ground("1,219,326,311,126,311", "q", [result("1,219,326,311,126,352,690")])[0] == "1219326311126352690"


def test_the_final_value_a_call_printed_is_its_answer() -> None:
    assert final_value("391\n") == "391"
    assert final_value("[code]\nprint(17*23)\n[output]\n391") == "391"
    assert final_value("391\n[stderr]\nDeprecationWarning: x") == "391"
    assert final_value("[no output]") is None
    assert final_value("x" * 200) is None
    found = recover([result("17\n", call_id="a"), result("boom", Status.EXEC_ERR, call_id="b")])
    assert found is not None and found[0] == "17" and found[1].call.id == "a"
    assert recover([result("[no output]")]) is None


def test_the_parallel_summarizer_copies_the_observed_product() -> None:
    workers = [
        WorkerConfig(
            name="writer", backend="scripted", model="writer-model", replies=[f"So \\boxed{{{MISCOPY}}}"], price=PRICE
        )
    ]
    pool = build_pool(PoolConfig(workers=workers, tools=[]))
    backend = orchestrator(
        "<reasoning>multiply</reasoning>" + call("multiply", a=123456789, b=987654321),
        "<reasoning>done</reasoning>" + call("final_answer"),
    )
    trajectory = run(pool, backend, "What is 123456789 * 987654321?", tools=(multiply,), policy="parallel")
    assert trajectory.stop_reason is StopReason.ANSWER and trajectory.answer == PRODUCT
    assert trajectory.metadata["answer_corrections"] == [{"written": MISCOPY, "observed": PRODUCT, "call": "call_0"}]


def test_an_episode_out_of_turns_keeps_the_value_its_call_returned() -> None:
    backend = orchestrator(call("multiply", a=17, b=23), repeat_last=True)
    trajectory = run(scripted_pool(), backend, "What is 17*23?", tools=(multiply,), max_turns=1)
    assert trajectory.stop_reason is StopReason.MAX_TURNS and trajectory.answer == "391"
    assert trajectory.metadata["answer_source"] == {"call": "call_0", "tool": "multiply"}


def test_history_comes_before_the_task_and_keeps_its_newest_turns() -> None:
    backend = orchestrator("<answer>Ada</answer>")
    history = [Message(role="user", content="a" * 3000), Message(role="user", content="My name is Ada.")]
    history.append(Message(role="assistant", content="Hello Ada."))
    executor = Executor(scripted_pool(), RunConfig(max_history_tokens=200), orchestrator=backend)
    trajectory = asyncio.run(executor.run("What is my name?", history=history))
    assert [m.content for m in trajectory.messages[1:]] == [
        "My name is Ada.",
        "Hello Ada.",
        "What is my name?",
        "<answer>Ada</answer>",
    ]
    assert trajectory.metadata["history"] == {"messages": 3, "shown": 2}


def test_sampling_options_reach_the_orchestrator() -> None:
    seen: list[tuple[float, float, int | None]] = []

    class Recording(ScriptedBackend):
        async def _complete(self, request):  # type: ignore[no-untyped-def]
            seen.append((request.temperature, request.top_p, request.seed))
            return await super()._complete(request)

    backend = Recording([call("multiply", a=2, b=3), "<answer>6</answer>"], model="orchestrator")
    run(scripted_pool(), backend, tools=(multiply,), temperature=0.5, top_p=0.8, sampling_seed=7)
    assert seen == [(0.5, 0.8, 7), (0.5, 0.8, 8)]


def test_a_cancelled_episode_reports_what_ran_and_what_it_cut_short() -> None:
    events: list[EpisodeEvent] = []

    class SlowSecondTurn(ScriptedBackend):
        async def _complete(self, request):  # type: ignore[no-untyped-def]
            if self.requests:
                await asyncio.sleep(30)
            return await super()._complete(request)

    backend = SlowSecondTurn([call("multiply", a=2, b=3), "<answer>6</answer>"], model="orchestrator", price=PRICE)
    executor = Executor(scripted_pool(), RunConfig(max_episode_usd=100.0), orchestrator=backend)

    async def cancel_during_the_second_generation() -> None:
        episode = asyncio.ensure_future(executor.run("q", tools=(multiply,), on_event=events.append))
        for _ in range(500):  # until the second generation runs (bounded: 5 s)
            if any(e.kind == "generating" and e.turn == 1 for e in events):
                break
            await asyncio.sleep(0.01)
        episode.cancel()
        with pytest.raises(asyncio.CancelledError):
            await episode

    asyncio.run(cancel_during_the_second_generation())
    [stopped] = [event for event in events if event.kind == "stopped"]
    trajectory = stopped.trajectory
    assert trajectory is not None and trajectory.stop_reason is StopReason.CANCELLED
    assert [r.call.name for r in trajectory.results] == ["multiply"] and trajectory.usage.usd > 0
    assert trajectory.metadata["abandoned_usd"] > 0  # the generation cut short, at its cost bound

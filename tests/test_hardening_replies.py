"""Every worker reply shape is data, not a crash: malformed, lying and stalling servers on 127.0.0.1."""

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from podium.backends.base import BackendError, ChatBackend, Completion, GenerationRequest
from podium.backends.http import HttpBackend, HttpBackendConfig, reply_bytes_bound
from podium.core.budget import StopReason
from podium.core.calls import Status
from podium.core.messages import Message
from podium.core.trajectory import Trajectory, to_json_line
from podium.costs.bounds import completion_chars_bound, prompt_token_bound
from podium.costs.prices import ModelPrice
from podium.datasets.loaders import shared_data_dir
from podium.pool.config import PoolConfig, WorkerConfig
from podium.pool.pool import build_pool
from podium.runtime import Executor, RunConfig
from support.runtime_fixtures import orchestrator
from support.servers import LYING, MALFORMED, TRANSPORT_FAULTS, FaultServer

QUESTION = [Message(role="user", content="What is two plus two?")]
PRICE = ModelPrice(input_per_mtok=1.0, output_per_mtok=1.5)
"""$1.5 per 1M completion tokens: a server claiming 10M tokens would charge $15."""


def backend(url: str, **config: object) -> HttpBackend:
    settings = {"model": "faulty", "max_retries": 1, "timeout_s": 0.5, "max_reply_bytes": 1_000_000, **config}
    return HttpBackend(HttpBackendConfig(base_url=url, **settings), price=PRICE)  # type: ignore[arg-type]


def generate(http: HttpBackend, **options: object):
    return asyncio.run(http.generate(QUESTION, **options))  # type: ignore[arg-type]


@pytest.mark.parametrize("shape", sorted(MALFORMED))
def test_every_malformed_reply_is_exec_err_with_a_reason_and_not_retried(shape: str) -> None:
    server = FaultServer([shape])
    with server.running() as url, pytest.raises(BackendError) as error:
        generate(backend(url))
    assert error.value.status is Status.EXEC_ERR
    assert str(error.value), "the reason is shown to the orchestrator"
    assert server.requests == 1, "a 200 reply is an answer, not a transient failure"


def test_the_reasons_name_what_was_wrong() -> None:
    expected = {
        "empty_usage": "usage.prompt_tokens",
        "negative_tokens": "usage.completion_tokens is -5",
        "numeric_content": "content is int",
        "null_content": "content is NoneType",
        "no_choices": "no choices",
        "wrong_content_type": "text/html",
        "huge": "larger than max_reply_bytes",
        "deep_json": "nested too deeply",
        "error_with_200": "overloaded",
        "refusal": "refused",
    }
    for shape, reason in expected.items():
        server = FaultServer([shape])
        with server.running() as url, pytest.raises(BackendError, match=reason):
            generate(backend(url))


def test_a_server_trickling_one_byte_at_a_time_cannot_stretch_the_call() -> None:
    for fault in ("trickle", "trickle_headers"):
        server = FaultServer([fault], trickle_s=0.05)
        with server.running() as url:
            started = time.monotonic()
            with pytest.raises(BackendError) as error:
                generate(backend(url, timeout_s=1.5, max_retries=0))
            elapsed = time.monotonic() - started
        assert error.value.status is Status.TIMEOUT
        assert elapsed < 3 * 1.5, f"{fault}: a 1.5 s attempt lasted {elapsed:.1f} s"


def test_the_overall_deadline_holds_across_trickled_retries() -> None:
    server = FaultServer(["trickle"], trickle_s=0.05)
    with server.running() as url:
        started = time.monotonic()
        with pytest.raises(BackendError) as error:
            generate(backend(url, timeout_s=1.0, max_retries=10, deadline_s=1.5))
        elapsed = time.monotonic() - started
    assert error.value.status is Status.TIMEOUT and elapsed < 3 * 1.5
    assert 1 <= server.requests <= 3


def test_a_lying_server_is_charged_at_most_what_was_asked_for() -> None:
    server = FaultServer(["lying_usage"])
    with server.running() as url:
        generation = generate(backend(url), max_tokens=100)
    assert generation.output_tokens == 100
    assert generation.input_tokens == prompt_token_bound(QUESTION)
    assert generation.usd == pytest.approx(PRICE.cost(generation.input_tokens, 100))
    assert generation.clipped and "10000000" in generation.clipped and generation.usage.clipped


def test_surrogate_escapes_in_a_reply_become_replacement_characters() -> None:
    server = FaultServer(["surrogate_content"])
    with server.running() as url:
        generation = generate(backend(url))
    assert generation.text == "\ufffd lone \ufffd"


class Garbage(ChatBackend):
    """A backend whose completions break every rule, or which raises."""

    def __init__(self, completion: object) -> None:
        super().__init__("garbage")
        self.completion = completion

    async def _complete(self, request: GenerationRequest) -> Completion:
        if isinstance(self.completion, BaseException):
            raise self.completion
        return self.completion  # type: ignore[return-value]


@pytest.mark.parametrize(
    ("completion", "status"),
    [
        (Completion(None, 1, 1), Status.EXEC_ERR),  # type: ignore[arg-type]
        (Completion("x", -1, 1), Status.EXEC_ERR),
        (Completion("x", 1, True), Status.EXEC_ERR),
        (Completion("x", 1, 1.5), Status.EXEC_ERR),  # type: ignore[arg-type]
        (Completion("x", 1, 1, finish_reason=3), Status.EXEC_ERR),  # type: ignore[arg-type]
        ("just a string", Status.EXEC_ERR),
        (KeyError("choices"), Status.EXEC_ERR),
        (TimeoutError(), Status.TIMEOUT),
    ],
)
def test_the_base_class_checks_every_backend_s_completion(completion: object, status: Status) -> None:
    with pytest.raises(BackendError) as error:
        asyncio.run(Garbage(completion).generate(QUESTION))
    assert error.value.status is status


def _pool(url: str, price: ModelPrice = PRICE):
    worker = WorkerConfig(
        name="worker", backend="http", model="faulty", base_url=url, price=price, timeout_s=0.3, max_retries=1,
        max_tokens=50,
    )  # fmt: skip
    return build_pool(PoolConfig(workers=[worker], tools=[], roles=[]))


def _call(name: str) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': {'prompt': '2+2?'}})}</tool_call>"


@pytest.mark.parametrize("shape", sorted(MALFORMED) + TRANSPORT_FAULTS)
def test_every_fault_of_a_worker_is_a_status_in_the_trajectory(shape: str) -> None:
    server = FaultServer([shape], slow_s=1.0, trickle_s=0.05)
    with server.running() as url:
        executor = Executor(
            _pool(url), RunConfig(max_seconds=20), orchestrator=orchestrator(_call("worker"), "<answer>4</answer>")
        )
        trajectory = asyncio.run(executor.run("What is 2+2?"))
    (result,) = trajectory.results
    assert result.status in (Status.EXEC_ERR, Status.TIMEOUT) and result.reason
    assert trajectory.stop_reason is StopReason.ANSWER
    assert Trajectory.model_validate_json(to_json_line(trajectory)) is not None


@pytest.mark.parametrize("shape", ["empty_usage", "numeric_content", "hang", "close"])
def test_a_faulty_orchestrator_ends_the_episode_with_a_named_stop(shape: str) -> None:
    server = FaultServer([shape])
    with server.running() as url:
        pool = _pool(url)
        executor = Executor(pool, RunConfig(max_seconds=3))
        trajectory = asyncio.run(executor.run("What is 2+2?"))
    assert trajectory.stop_reason in (StopReason.ERROR, StopReason.DEADLINE)
    assert trajectory.answer is None


def test_a_lying_worker_cannot_overspend_the_cap() -> None:
    server = FaultServer(["lying_usage"])
    expensive = ModelPrice(input_per_mtok=100.0, output_per_mtok=300.0)  # 10M tokens would cost $3,000
    with server.running() as url:
        calls = orchestrator(_call("worker"), repeat_last=True)
        executor = Executor(_pool(url, expensive), RunConfig(max_episode_usd=0.05, max_turns=20), orchestrator=calls)
        trajectory = asyncio.run(executor.run("What is 2+2?"))
    served = [result for result in trajectory.results if result.ok]
    assert served and all(result.usage.output_tokens == 50 for result in served)  # max_tokens, not 10M
    assert any(result.refused for result in trajectory.results), "the cap was reached"
    assert trajectory.usage.usd <= 0.05 and set(server.served) <= set(LYING)


def test_a_reply_longer_than_max_tokens_can_decode_to_is_cut_and_its_size_kept() -> None:
    long = "7" * 100_000  # a server claiming 20 tokens for it
    generation = asyncio.run(Garbage(Completion(long, 3, 20, finish_reason="stop")).generate(QUESTION, max_tokens=10))
    assert generation.text == long[: completion_chars_bound(10)] and generation.text_chars == 100_000
    assert generation.finish_reason == "length"
    honest = asyncio.run(Garbage(Completion("7" * 2_000, 3, 20)).generate(QUESTION, max_tokens=10))
    assert honest.text_chars is None and len(honest.text) == 2_000


def test_a_body_larger_than_max_tokens_can_take_is_refused_naming_its_size() -> None:
    server = FaultServer(
        ["reported"], reported_content="9" * 3_000_000, reported_usage={"prompt_tokens": 3, "completion_tokens": 20}
    )
    with server.running() as url, pytest.raises(BackendError) as error:
        generate(backend(url, max_reply_bytes=16 << 20), max_tokens=256)
    assert f"larger than {reply_bytes_bound(256)} bytes, the most a reply of max_tokens=256 takes" in str(error.value)
    assert "it declared 3000" in str(error.value) and server.requests == 1


EVAL_PEAK_RSS_MB = 200
"""The most an evaluation of two items may hold at once, whatever its orchestrator replies (it holds ~125 MB)."""


@pytest.mark.skipif(not shared_data_dir().is_dir(), reason="shared benchmark data not present")
@pytest.mark.parametrize("megabytes", [15, 0.5], ids=["refused-body", "cut-text"])
def test_a_huge_reply_claiming_20_tokens_costs_a_bounded_record_and_memory(tmp_path: Path, megabytes: float) -> None:
    # Issue 54: a remote orchestrator replying 15 MB while claiming 20 tokens (max_tokens 256) made a 90 MB results
    # line per item (the text stored six times) and held 708 MB for 2 items. Now a body larger than 256 tokens can
    # take is refused, and a text longer than they can decode to is cut, its size kept; each text is stored once.
    text = "<answer>" + "1" * int(megabytes * 1_000_000) + "</answer>"
    server = FaultServer(
        ["reported"], reported_content=text, reported_usage={"prompt_tokens": 30, "completion_tokens": 20}
    )
    with server.running() as url:
        worker = {"name": "o", "backend": "http", "model": "m", "base_url": url, "max_retries": 0,
                  "price": {"input_per_mtok": 0, "output_per_mtok": 0}}  # fmt: skip
        system = tmp_path / "system.yaml"
        system.write_text(json.dumps({"kind": "orchestrator", "name": "huge", "max_tokens": 256, "max_turns": 2,
                                      "pool": {"workers": [worker], "tools": []}}))  # fmt: skip
        command = [sys.executable, "-m", "podium", "eval", "--benchmark", "gsm8k", "--system", str(system),
                   "--limit", "2", "--out", str(tmp_path / "run"), "--quiet"]  # fmt: skip
        peak_mb = _run_measured(command, tmp_path / "stderr", timeout_s=300)
    lines = (tmp_path / "run" / "results.jsonl").read_bytes().splitlines()
    assert len(lines) == 2 and max(len(line) for line in lines) < 2_000_000
    assert peak_mb < EVAL_PEAK_RSS_MB, f"peak RSS {peak_mb:.0f} MB"
    stderr = (tmp_path / "stderr").read_bytes()
    assert len(stderr) < 10_000, stderr[:500]  # warnings, not the text
    records = [json.loads(line) for line in lines]
    if megabytes > 1:
        assert all("larger than" in record["error"] and "max_tokens=256" in record["error"] for record in records)
    else:
        turns = [turn for record in records for turn in record["trajectory"]["turns"]]
        assert turns and all(turn["output_chars"] == len(text) and "output" not in turn for turn in turns)


PEAK_RSS_WRAPPER = """
import os, subprocess, sys, time
stderr, timeout_s, *command = sys.argv[1:]
child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=open(stderr, "wb"))
deadline = time.monotonic() + float(timeout_s)
while not (ended := os.wait4(child.pid, os.WNOHANG))[0]:
    if time.monotonic() > deadline:
        child.kill()
        sys.exit(f"{command} did not end within {timeout_s} s")
    time.sleep(0.05)
print(ended[2].ru_maxrss)
"""
"""Runs a command and prints its peak resident memory (KiB). Measured from this small process rather than from
the test's: a child's ru_maxrss includes what its parent had resident when it forked (torch, in a test worker)."""


def _run_measured(command: list[str], stderr: Path, timeout_s: float) -> float:
    """Run ``command``, its stderr to the file ``stderr``; its peak resident memory in MB (of the command and the
    descendants it waited for)."""
    wrapper = [sys.executable, "-I", "-c", PEAK_RSS_WRAPPER, str(stderr), str(timeout_s), *command]
    measured = subprocess.run(wrapper, capture_output=True, text=True, check=False)
    assert measured.returncode == 0, measured.stderr
    return int(measured.stdout) / 1024

"""A real third-party OpenAI-compatible server: llama.cpp's (llama-cpp-python's `llama_cpp.server`) hosting the
embedded SmolLM2 GGUF, started by the test on 127.0.0.1 with examples/llamacpp/serve_smollm2.py, used through
the example pool: an episode calling it as a tool and one with it as the orchestrator, usage as the server
reports it, and retries across a server the test kills (by its pid) and starts again."""

import asyncio
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("llama_cpp.server.app")

from podium.core.calls import ToolCall, ToolResult
from podium.pool.pool import build_pool, load_pool_config
from podium.runtime import Executor, RunConfig
from support.runtime_fixtures import orchestrator

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
WORKER = "smollm2_llamacpp"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_server(port: int) -> subprocess.Popen:
    """llama.cpp's server on ``port``, once it answers (bounded: 120 s)."""
    command = [sys.executable, str(REPO / "examples/llamacpp/serve_smollm2.py"), "--port", str(port), "--threads", "1"]
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(600):
        if server.poll() is not None:
            raise AssertionError(f"llama.cpp's server exited with {server.returncode}")
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return server
        time.sleep(0.2)
    server.kill()
    raise AssertionError("llama.cpp's server did not listen")


def stop(server: subprocess.Popen) -> None:
    if server.poll() is None:
        server.send_signal(signal.SIGKILL)
        server.wait(timeout=30)


@pytest.fixture
def llamacpp():
    """The example pool pointed at a llama.cpp server on a free port; yields (pool, port, servers started)."""
    port = free_port()
    servers = [start_server(port)]
    config = load_pool_config(REPO / "examples/llamacpp/pool.yaml")
    worker = config.workers[0].model_copy(update={"base_url": f"http://127.0.0.1:{port}/v1"})
    pool = build_pool(config.model_copy(update={"workers": [worker]}))
    try:
        yield pool, port, servers
    finally:
        for server in servers:
            stop(server)


def test_an_episode_calls_the_llamacpp_worker_and_records_its_usage(llamacpp) -> None:
    pool, _, _ = llamacpp
    question = "What is the capital of France? Answer in one word."
    script = orchestrator(
        f'<tool_call>{{"name": "{WORKER}", "arguments": {{"prompt": "{question}"}}}}</tool_call>',
        "<answer>Paris</answer>",
    )
    trajectory = asyncio.run(Executor(pool, RunConfig(), orchestrator=script).run(question))
    [result] = trajectory.results
    assert result.status == "OK" and result.worker == "smollm2-llamacpp"
    assert "paris" in result.observation.lower()  # SmolLM2 knows this one (greedy decoding)
    assert result.usage.input_tokens > 10 and 0 < result.usage.output_tokens <= 128  # as llama.cpp counted them
    assert trajectory.answer == "Paris"


def test_llamacpp_model_as_the_orchestrator(llamacpp) -> None:
    pool, _, _ = llamacpp
    executor = Executor(pool, RunConfig(max_turns=2, max_tokens=64, deny=[WORKER]))
    trajectory = asyncio.run(executor.run("What is 2 + 2?"))
    assert trajectory.stop_reason != "error", trajectory.metadata
    assert trajectory.turns and all(turn.usage.output_tokens > 0 for turn in trajectory.turns)
    assert trajectory.metadata["orchestrator"] == "smollm2-llamacpp"


def test_calls_retry_across_a_killed_server(llamacpp) -> None:
    pool, port, servers = llamacpp

    async def calls() -> tuple[ToolResult, ToolResult, ToolResult, float]:
        # One event loop for all three calls: the backend's connection pool belongs to the loop that opened it.
        first = await pool.registry.call(ToolCall(name=WORKER, arguments={"prompt": "Say hello."}))
        stop(servers[0])
        restart = threading.Timer(1.5, lambda: servers.append(start_server(port)))
        restart.start()
        started = time.perf_counter()
        # Connection refused, retried with backoff until the new server answers.
        again = await pool.registry.call(ToolCall(name=WORKER, arguments={"prompt": "Say hello."}))
        waited = time.perf_counter() - started
        restart.join()
        stop(servers[-1])
        down = await pool.registry.call(ToolCall(name=WORKER, arguments={"prompt": "Say hello."}))
        return first, again, down, waited

    first, again, down, waited = asyncio.run(calls())
    assert first.status == "OK" and again.status == "OK", again.reason
    assert waited > 1.5
    assert down.status == "EXEC_ERR" and "connection failed" in (down.reason or "")  # no server: retries run out

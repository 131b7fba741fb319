"""The embedded SmolLM2-135M-Instruct end to end: offline load, constrained JSON, every role, the model server.

Quality is not the point (it is a 135M model); the paths are."""

import asyncio
import json
import os
import socket
import subprocess
import sys
import time

import httpx
import openai
import pytest

from podium.backends.http import HttpBackend, HttpBackendConfig
from podium.backends.local import LocalBackend
from podium.core import Message, Status, ToolCall
from podium.pool.context import EpisodeContext, current_episode
from podium.pool.pool import build_pool, embedded_pool_config

pytestmark = pytest.mark.slow
OFFLINE = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


@pytest.fixture(scope="module")
def embedded_pool():
    config = embedded_pool_config()
    config.workers[0].max_tokens = 48
    config.ensemble_samples = 2
    return build_pool(config)


def test_ask_answers_offline():
    completed = subprocess.run(
        [sys.executable, "-m", "podium", "ask", "What is the capital of France?"],
        capture_output=True,
        text=True,
        timeout=600,
        env=OFFLINE,
    )
    assert completed.returncode == 0, completed.stderr
    assert "Paris" in completed.stdout
    assert "smollm2-135m-instruct" in completed.stderr


def test_json_schema_constrains_the_tiny_model_to_valid_json():
    backend = LocalBackend()
    schema = {
        "type": "object",
        "properties": {"tool": {"type": "string", "enum": ["python", "search"]}, "n": {"type": "integer"}},
        "required": ["tool", "n"],
        "additionalProperties": False,
    }
    messages = [Message(role="user", content="Pick a tool and a number.")]
    generation = asyncio.run(backend.generate(messages, max_tokens=40, json_schema=schema))
    parsed = json.loads(generation.text)
    assert parsed["tool"] in ("python", "search") and isinstance(parsed["n"], int)
    assert generation.input_tokens > 0 and generation.output_tokens > 0 and generation.usd == 0
    stopped = asyncio.run(
        backend.generate([Message(role="user", content="Count: 1, 2, 3,")], max_tokens=30, stop=["5"])
    )
    assert "5" not in stopped.text


@pytest.mark.parametrize(
    "role", ["standard_reasoner", "critical_reviewer", "knowledge_searcher", "code_reasoner", "ensemble_solver"]
)
def test_every_role_runs_end_to_end_on_the_embedded_model(embedded_pool, role):
    async def run():
        current_episode.set(EpisodeContext(question="What is 17 * 23?", history="turn 1: I guessed 391."))
        return await embedded_pool.registry.call(ToolCall(name=role, arguments={}))

    result = asyncio.run(run())
    assert result.status in (Status.OK, Status.EXEC_ERR), result.reason  # code the tiny model writes may fail
    assert result.worker == "smollm2-135m-instruct"
    assert result.usage.output_tokens > 0 and result.observation


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_serve_model_speaks_openai_to_the_official_client_and_podium():
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "podium", "serve-model", "--port", str(port)],
        env=OFFLINE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 300
        while True:
            assert server.poll() is None, server.stderr.read()
            try:
                if httpx.get(f"{base_url}/models", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "serve-model did not come up"
            time.sleep(0.5)
        client = openai.OpenAI(base_url=base_url, api_key="unused")
        assert client.models.list().data[0].id == "smollm2-135m-instruct"
        reply = client.chat.completions.create(
            model="smollm2-135m-instruct",
            messages=[{"role": "user", "content": "Name a colour."}],
            max_tokens=10,
            response_format={
                "type": "json_schema",
                "json_schema": {
                    "name": "c",
                    "schema": {
                        "type": "object",
                        "properties": {"colour": {"type": "string", "maxLength": 12}},
                        "required": ["colour"],
                    },
                },
            },
        )
        assert isinstance(json.loads(reply.choices[0].message.content)["colour"], str)
        podium_http = HttpBackend(HttpBackendConfig(model="smollm2-135m-instruct", base_url=base_url))
        generation = asyncio.run(podium_http.generate([Message(role="user", content="Say hello.")], max_tokens=8))
        assert generation.text and generation.output_tokens > 0
    finally:
        server.terminate()
        server.wait(timeout=30)

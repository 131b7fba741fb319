"""`podium serve`: orchestrators as OpenAI-compatible models, used through the official openai client (sync, async,
streaming) against servers the tests start on 127.0.0.1."""

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import openai
import pytest

from podium.backends.base import Completion, GenerationRequest
from podium.backends.scripted import ScriptedBackend
from podium.core.messages import Message
from podium.core.trajectory import read_trajectories
from podium.costs.prices import ModelPrice
from podium.errors import ConfigError
from podium.pool.config import PoolConfig, WorkerConfig
from podium.pool.pool import build_pool
from podium.runtime.config import RunConfig
from podium.runtime.system import OrchestratorSystem
from podium.serve.http import app_in_thread
from podium.serve.orchestrator_server import ServeConfig, create_orchestrator_app, load_system_spec

CALL = '<tool_call>{"name": "helper", "arguments": {"prompt": "What is 6*7?"}}</tool_call>'
ANSWER = "<answer>42</answer>"
PRICE = ModelPrice(input_per_mtok=100.0, output_per_mtok=200.0)


def script(messages: list[Message]) -> str:
    """Call the helper first; answer once its observation is in the conversation."""
    return ANSWER if any("<tool_response" in m.content for m in messages[2:]) else CALL


class SlowScripted(ScriptedBackend):
    """The scripted orchestrator, each generation taking ``delay`` seconds without blocking the loop."""

    def __init__(self, delay: float) -> None:
        super().__init__([script], model="orchestrator-model", repeat_last=True, price=PRICE)
        self.delay = delay

    async def _complete(self, request: GenerationRequest) -> Completion:
        await asyncio.sleep(self.delay)
        return await super()._complete(request)


def system(name: str = "tiny-orchestrator", delay: float = 0.0, **config: object) -> OrchestratorSystem:
    """A served orchestrator over a scripted pool: ``orchestrator`` (its backend replaced by the script above)
    and ``helper``, a worker offered as a tool that always answers 42."""
    workers = [
        WorkerConfig(name="orchestrator", backend="scripted", model="orchestrator-model", replies=["unused"]),
        WorkerConfig(name="helper", backend="scripted", model="helper-model", replies=["42"], price=PRICE),
    ]
    pool = build_pool(PoolConfig(workers=workers, tools=[]))
    pool.backends["orchestrator"] = SlowScripted(delay)
    settings = RunConfig(orchestrator="orchestrator", deny=["orchestrator"], max_turns=4, **config)  # type: ignore[arg-type]
    return OrchestratorSystem(name, pool, settings)


@contextmanager
def served(*systems: OrchestratorSystem, **config: object) -> Iterator[str]:
    app = create_orchestrator_app(list(systems) or [system()], ServeConfig(**config))  # type: ignore[arg-type]
    with app_in_thread(app) as url:
        yield url


def client(url: str, **options: object) -> openai.OpenAI:
    return openai.OpenAI(base_url=url, api_key=str(options.pop("api_key", "none")), max_retries=0, **options)  # type: ignore[arg-type]


def test_sync_client_runs_one_episode_per_request(tmp_path) -> None:
    trace = tmp_path / "served.jsonl"
    with served(system(max_usd=5.0), trace=str(trace)) as url:
        api = client(url)
        assert [model.id for model in api.models.list()] == ["tiny-orchestrator"]
        response = api.chat.completions.create(
            model="tiny-orchestrator",
            messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 6*7?"}],
            extra_body={"podium": {"max_usd": 9.0, "preference": "avoid paid models", "return_trajectory": True}},
        )
    assert response.choices[0].message.content == "42" and response.choices[0].finish_reason == "stop"
    podium = response.model_extra["podium"]
    [stored] = read_trajectories(trace)
    assert podium["trajectory_id"] == stored.id and podium["stop_reason"] == "answer"
    assert podium["turns"] == 2 and podium["calls"] == 1 and stored.results[0].status == "OK"
    assert response.usage.total_tokens == stored.usage.tokens > 0
    assert response.usage.model_extra["cost"] == pytest.approx(stored.usage.usd) and stored.usage.usd > 0
    assert stored.budget.max_usd == 5.0  # a request can tighten the configured cap, never raise it
    assert stored.messages[0].content.endswith("Be brief.")  # system messages join the system prompt
    assert stored.messages[1].content == "What is 6*7?\n\navoid paid models"
    assert podium["trajectory"]["id"] == stored.id and stored.metadata["request_id"] == response.id


def test_async_client_runs_concurrent_episodes() -> None:
    async def ask_three(url: str) -> list[str]:
        api = openai.AsyncOpenAI(base_url=url, api_key="none", max_retries=0)
        responses = await asyncio.gather(
            *(
                api.chat.completions.create(model="tiny-orchestrator", messages=[{"role": "user", "content": q}])
                for q in ("a?", "b?", "c?")
            )
        )
        assert all(r.choices[0].message.content == "42" for r in responses)
        await api.close()
        return [r.model_extra["podium"]["trajectory_id"] for r in responses]

    with served(system(delay=0.2), max_concurrent=3) as url:
        assert len(set(asyncio.run(ask_three(url)))) == 3


def test_streaming_sends_progress_then_the_answer_and_usage() -> None:
    with served(system(delay=0.6), heartbeat_s=0.2) as url:
        stream = client(url).chat.completions.create(
            model="tiny-orchestrator",
            messages=[{"role": "user", "content": "What is 6*7?"}],
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant" and chunks[0].model_extra["podium"]["event"] == "started"
    events = [c.model_extra["podium"]["event"] for c in chunks if "event" in (c.model_extra.get("podium") or {})]
    assert events.count("running") >= 2  # two generations of 0.6 s, a heartbeat every 0.2 s
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "42"
    [finish] = [c for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finish.choices[0].finish_reason == "stop" and finish.model_extra["podium"]["calls"] == 1
    assert chunks[-1].choices == [] and chunks[-1].usage.total_tokens > 0


def test_requests_beyond_the_limit_get_429_and_the_slot_frees() -> None:
    question = [{"role": "user", "content": "q"}]
    with served(system(delay=0.5), max_concurrent=1) as url:
        api = client(url)
        running = api.chat.completions.create(model="tiny-orchestrator", messages=question, stream=True)
        chunks = iter(running)
        assert next(chunks).model_extra["podium"]["event"] == "started"  # admitted: it holds the only slot
        with pytest.raises(openai.RateLimitError) as refused:
            api.chat.completions.create(model="tiny-orchestrator", messages=question)
        assert refused.value.body["type"] == "rate_limit_error" and refused.value.response.headers["retry-after"]
        assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "42"
        again = api.chat.completions.create(model="tiny-orchestrator", messages=question)
        assert again.choices[0].message.content == "42"


def test_api_key_is_required_when_configured(monkeypatch) -> None:
    monkeypatch.setenv("PODIUM_TEST_KEY", "s3cret")
    with served(system(), api_key_env="PODIUM_TEST_KEY") as url:
        with pytest.raises(openai.AuthenticationError):
            client(url, api_key="wrong").models.list()
        with pytest.raises(openai.AuthenticationError):
            client(url).chat.completions.create(model="tiny-orchestrator", messages=[{"role": "user", "content": "q"}])
        good = client(url, api_key="s3cret")
        reply = good.chat.completions.create(model="tiny-orchestrator", messages=[{"role": "user", "content": "q"}])
        assert reply.choices[0].message.content == "42"
    monkeypatch.delenv("PODIUM_TEST_KEY")
    with pytest.raises(ConfigError, match="PODIUM_TEST_KEY"):
        create_orchestrator_app([system()], ServeConfig(api_key_env="PODIUM_TEST_KEY"))


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"model": "tiny-orchestrator", "messages": []}, "messages"),
        ({"model": "tiny-orchestrator", "messages": [{"role": "system", "content": "only a system"}]}, "messages"),
        ({"model": "tiny-orchestrator", "messages": [{"role": "user", "content": "q"}], "n": 2}, "n"),
        ({"model": "tiny-orchestrator", "messages": [{"role": "user", "content": "q"}], "tools": [{}]}, "tools"),
        ({"model": "tiny-orchestrator", "messages": [{"role": "user", "content": "q"}], "podium": {"max_usd": -1}},
         "podium.max_usd"),
        ({"model": "tiny-orchestrator", "messages": [{"role": "user", "content": "q"}], "podium": {"budget": 1}},
         "podium.budget"),
        ({"model": "tiny-orchestrator", "messages": [{"role": "user", "content": "q"}], "podium": {"deny": ["nope"]}},
         "podium"),
        ({"messages": [{"role": "user", "content": "q"}]}, "model"),
    ],
)  # fmt: skip
def test_malformed_requests_get_openai_style_400s(body: dict, param: str) -> None:
    with served() as url:
        reply = httpx.post(f"{url}/chat/completions", json=body, timeout=30)
    assert reply.status_code == 400, reply.text
    error = reply.json()["error"]
    assert error["type"] == "invalid_request_error" and error["param"] == param and error["message"]


def test_bad_json_unknown_model_and_failed_orchestrator() -> None:
    broken = system("broken")
    broken.pool.backends["orchestrator"] = ScriptedBackend([], model="orchestrator-model")  # no reply: it fails
    with served(system(), broken) as url:
        reply = httpx.post(f"{url}/chat/completions", content=b"{not json", timeout=30)
        assert reply.status_code == 400 and reply.json()["error"]["type"] == "invalid_request_error"
        with pytest.raises(openai.NotFoundError, match="tiny-orchestrator"):
            client(url).chat.completions.create(model="gpt-5", messages=[{"role": "user", "content": "q"}])
        with pytest.raises(openai.InternalServerError) as failed:
            client(url).chat.completions.create(model="broken", messages=[{"role": "user", "content": "q"}])
        assert failed.value.status_code == 502 and failed.value.body["code"] == "orchestrator_failed"
        with pytest.raises(openai.APIError, match="no reply left"):
            list(client(url).chat.completions.create(model="broken", messages=[{"role": "user", "content": "q"}],
                                                     stream=True))  # fmt: skip


def test_a_request_limit_ends_the_episode_early() -> None:
    with served() as url:
        response = client(url).chat.completions.create(
            model="tiny-orchestrator",
            messages=[{"role": "user", "content": "What is 6*7?"}],
            extra_body={"podium": {"max_turns": 1}},
        )
    assert response.choices[0].finish_reason == "length" and response.choices[0].message.content == ""
    assert response.model_extra["podium"]["stop_reason"] == "max_turns"


def test_eval_orchestrator_files_serve_unchanged(tmp_path) -> None:
    spec = load_system_spec("examples/systems/embedded-orchestrator.yaml")
    assert spec.name == "embedded-orchestrator-serial" and spec.max_turns == 2
    (tmp_path / "tools.yaml").write_text(json.dumps({"kind": "tools_model"}))
    with pytest.raises(ConfigError, match="tools_model"):
        load_system_spec(tmp_path / "tools.yaml")
    with pytest.raises(ConfigError, match="distinct names"):
        create_orchestrator_app([system(), system()])


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_podium_serve_command_serves_a_system_file(tmp_path) -> None:
    workers = [
        {"name": "orchestrator", "backend": "scripted", "model": "orchestrator-model", "replies": [CALL, ANSWER]},
        {"name": "helper", "backend": "scripted", "model": "helper-model", "replies": ["42"]},
    ]
    spec = {"kind": "orchestrator", "name": "scripted", "orchestrator": "orchestrator", "deny": ["orchestrator"],
            "pool": {"workers": workers, "tools": []}}  # fmt: skip
    (tmp_path / "system.yaml").write_text(json.dumps(spec))
    port, trace = free_port(), tmp_path / "trace.jsonl"
    command = [str(Path(sys.executable).with_name("podium")), "serve", "--system", str(tmp_path / "system.yaml"),
               "--port", str(port), "--api-key-env", "SERVE_KEY", "--trace", str(trace)]  # fmt: skip
    server = subprocess.Popen(command, env={**os.environ, "SERVE_KEY": "k"}, stderr=subprocess.PIPE, text=True)
    try:
        api = client(f"http://127.0.0.1:{port}/v1", api_key="k")
        for _ in range(300):  # until it listens (bounded: 60 s)
            try:
                assert [model.id for model in api.models.list()] == ["scripted"]
                break
            except openai.APIConnectionError:
                assert server.poll() is None, server.stderr.read() if server.stderr else ""
                time.sleep(0.2)
        reply = api.chat.completions.create(model="scripted", messages=[{"role": "user", "content": "6*7?"}])
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert reply.choices[0].message.content == "42"
    assert [t.id for t in read_trajectories(trace)] == [reply.model_extra["podium"]["trajectory_id"]]

import asyncio
import json
import socket

import openai
import pytest

from podium.backends import BackendError, ScriptedBackend
from podium.backends.http import HttpBackend, HttpBackendConfig
from podium.core import Message, Status
from podium.costs.prices import ModelPrice
from podium.serve.model_server import serving_in_thread as serving
from support.servers import FaultServer

QUESTION = [Message(role="user", content="What is two plus two?")]


def generate(backend, messages=QUESTION, **options):
    return asyncio.run(backend.generate(messages, **options))


def test_openai_client_talks_to_the_model_server():
    backend = ScriptedBackend(["Four.", '{"answer": 4}'], model="tiny")
    with serving(backend) as base_url:
        client = openai.OpenAI(base_url=base_url, api_key="unused")
        assert [m.id for m in client.models.list().data] == ["tiny"]
        reply = client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "2+2?"}])
        assert reply.choices[0].message.content == "Four."
        assert reply.usage.completion_tokens == 1
        schema = {"type": "object", "properties": {"answer": {"type": "integer"}}}
        structured = client.chat.completions.create(
            model="tiny",
            messages=[{"role": "user", "content": "2+2 as JSON"}],
            response_format={"type": "json_schema", "json_schema": {"name": "a", "schema": schema}},
        )
        assert json.loads(structured.choices[0].message.content) == {"answer": 4}
        with pytest.raises(openai.NotFoundError):
            client.chat.completions.create(model="other", messages=[{"role": "user", "content": "x"}])
        with pytest.raises(openai.BadRequestError):
            client.chat.completions.create(model="tiny", messages=[])


def test_podium_http_backend_talks_to_the_model_server_and_prices_tokens():
    backend = ScriptedBackend(["four"], model="tiny")
    with serving(backend) as base_url:
        price = ModelPrice(input_per_mtok=1_000_000, output_per_mtok=2_000_000)  # $1 / $2 per token
        http = HttpBackend(HttpBackendConfig(model="tiny", base_url=base_url), price=price)
        generation = generate(http, stop=["\n"], temperature=0.7)
    assert generation.text == "four"
    assert (generation.input_tokens, generation.output_tokens) == (5, 1)  # the scripted backend counts words
    assert generation.usd == pytest.approx(5 * 1 + 1 * 2)
    assert backend.requests[0][0].content == "What is two plus two?"


def test_a_backend_failure_is_a_server_error_reported_as_exec_err():
    with serving(ScriptedBackend([], model="empty")) as base_url:
        http = HttpBackend(HttpBackendConfig(model="empty", base_url=base_url, max_retries=0))
        with pytest.raises(BackendError, match="HTTP 500") as error:
            generate(http)
    assert error.value.status is Status.EXEC_ERR


def faulty(faults, **config):
    return FaultServer(faults), dict({"model": "faulty", "max_retries": 3, "timeout_s": 5}, **config)


def test_429_is_retried_honouring_retry_after():
    server, config = faulty(["429", "429", "ok"])
    with server.running() as url:
        generation = generate(HttpBackend(HttpBackendConfig(base_url=url, **config)))
    assert generation.text == "fine" and server.requests == 3


@pytest.mark.parametrize(
    ("fault", "status", "message"),
    [("500", Status.EXEC_ERR, "HTTP 500"), ("truncated", Status.EXEC_ERR, "connection failed")],
)
def test_persistent_failures_stop_after_the_retry_bound(fault, status, message):
    server, config = faulty([fault], max_retries=2)
    with server.running() as url, pytest.raises(BackendError, match=message) as error:
        generate(HttpBackend(HttpBackendConfig(base_url=url, **config)))
    assert error.value.status is status
    assert server.requests == 3  # the first attempt and two retries, then no more


def test_malformed_json_is_exec_err():
    server, config = faulty(["malformed"], max_retries=1)
    with server.running() as url, pytest.raises(BackendError, match="malformed") as error:
        generate(HttpBackend(HttpBackendConfig(base_url=url, **config)))
    assert error.value.status is Status.EXEC_ERR
    assert server.requests <= 2


def test_slow_replies_time_out_within_the_bound():
    server, config = faulty(["slow"], max_retries=1, timeout_s=0.3)
    with server.running() as url, pytest.raises(BackendError) as error:
        generate(HttpBackend(HttpBackendConfig(base_url=url, **config)))
    assert error.value.status is Status.TIMEOUT
    assert server.requests == 2


def test_the_overall_deadline_caps_retries_and_backoff():
    server, config = faulty(["slow"], max_retries=50, timeout_s=0.2, deadline_s=0.5)
    with server.running() as url, pytest.raises(BackendError) as error:
        generate(HttpBackend(HttpBackendConfig(base_url=url, **config)))
    assert error.value.status is Status.TIMEOUT
    assert server.requests < 10


def test_connection_refused_is_exec_err():
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    http = HttpBackend(HttpBackendConfig(model="m", base_url=f"http://127.0.0.1:{port}/v1", max_retries=1))
    with pytest.raises(BackendError, match="connection failed") as error:
        generate(http)
    assert error.value.status is Status.EXEC_ERR


def test_concurrency_is_limited_per_backend():
    server, config = faulty(["ok"], max_concurrent=2)
    server.hold_s = 0.2
    with server.running() as url:
        http = HttpBackend(HttpBackendConfig(base_url=url, **config))

        async def many():
            return await asyncio.gather(*(http.generate(QUESTION) for _ in range(6)))

        assert [g.text for g in asyncio.run(many())] == ["fine"] * 6
    assert server.requests == 6 and server.most_in_flight == 2


def test_missing_api_key_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("PODIUM_TEST_MISSING_KEY", raising=False)
    with pytest.raises(BackendError, match="set PODIUM_TEST_MISSING_KEY"):
        config = HttpBackendConfig(model="m", base_url="http://127.0.0.1:9/v1", api_key_env="PODIUM_TEST_MISSING_KEY")
        HttpBackend(config)

"""The local_search and web_search tools, called through the registry.

web_search talks only to a fake Tavily server that each test starts on 127.0.0.1; every test sends a bounded
number of requests.
"""

import asyncio
import json
import random
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from podium.core.calls import Status, ToolCall
from podium.pool.builtin.search import LocalSearchConfig, WebSearchConfig, local_search_tool, web_search_tool
from podium.pool.registry import ToolRegistry
from podium.retrieval.hotpot import hotpot_questions


def call(registry: ToolRegistry, name: str, **arguments: Any):
    return asyncio.run(registry.call(ToolCall(name=name, arguments=arguments)))


@pytest.fixture(scope="module")
def search_registry(hotpot_index) -> ToolRegistry:
    return ToolRegistry([local_search_tool(index=hotpot_index)])


# --- local_search --------------------------------------------------------------------------------------------


def test_local_search_returns_top_k_passages_with_ids_titles_and_scores(search_registry):
    result = call(search_registry, "local_search", query="Scott Derrickson American director and screenwriter", k=3)
    assert result.status is Status.OK, result.reason
    [answer] = result.value["results"]
    assert answer["query"] == "Scott Derrickson American director and screenwriter"
    passages = answer["passages"]
    assert len(passages) == 3 and passages[0]["id"] == "Scott Derrickson"
    assert all(set(p) == {"id", "title", "text", "score", "chunk"} for p in passages)
    assert "[1] Scott Derrickson (id: Scott Derrickson, score 0." in result.observation
    assert result.usage.usd == 0 and result.usage.cost_units == 0  # local_search is free
    default_k = call(search_registry, "local_search", query="Ed Wood film")
    assert len(default_k.value["results"][0]["passages"]) == LocalSearchConfig().default_k


def test_query_list_is_answered_per_query_like_single_calls(search_registry):
    queries = ["Ed Wood film director", "Kiss and Tell 1945 film", "Doctor Strange 2016"]
    batched = call(search_registry, "local_search", query_list=queries, k=4)
    assert batched.status is Status.OK
    singles = [call(search_registry, "local_search", query=q, k=4).value["results"][0] for q in queries]
    assert batched.value["results"] == singles
    assert batched.observation.startswith("Results for 'Ed Wood film director':\n[1] ")
    assert batched.observation.count("Results for ") == 3


@pytest.mark.parametrize(
    "arguments",
    [
        {"query": "a", "query_list": ["b"]},  # both
        {"k": 3},  # neither
        {"query": "a", "k": 0},
        {"query": "a", "k": 21},
        {"query_list": []},
        {"query_list": ["q"] * 33},
        {"query": ""},
        {"query": "a", "top": 3},
    ],
)
def test_malformed_local_search_calls_are_not_executed(search_registry, arguments):
    result = asyncio.run(search_registry.call(ToolCall(name="local_search", arguments=arguments)))
    assert result.status is Status.PARSE_ERR
    assert result.reason.startswith("arguments of 'local_search' fail its schema")


def test_hundreds_of_concurrent_calls_match_sequential_results(hotpot_index):
    from podium.retrieval.index import PassageIndex

    questions = [q.question for q in hotpot_questions()]
    expected = dict(zip(questions, hotpot_index.search(questions, k=5), strict=True))
    # A second index over the same vectors with no query cache: every call runs the model.
    index = hotpot_index
    uncached = PassageIndex(index.index, index.chunks, index.config, index.embedder, query_cache_size=0)
    registry = ToolRegistry([local_search_tool(index=uncached)])
    shuffled = random.Random(7).sample(questions * 3, k=300)
    calls = [ToolCall(name="local_search", arguments={"query": q, "k": 5}, id=str(n)) for n, q in enumerate(shuffled)]
    calls += [ToolCall(name="local_search", arguments={"query_list": questions[i : i + 8]}) for i in range(0, 32, 8)]
    results = asyncio.run(call_concurrently(registry, calls))
    assert all(result.status is Status.OK for result in results), {r.reason for r in results if not r.ok}
    # The same passages in the same order; a score may differ in its last float bits, as a query embedded in
    # another batch (concurrent calls are batched together) goes through other BLAS kernels.
    for result in results:
        for answer in result.value["results"]:
            hits = [hit.to_dict() for hit in expected[answer["query"]]]
            assert [{**p, "score": None} for p in answer["passages"]] == [{**h, "score": None} for h in hits]
            assert [p["score"] for p in answer["passages"]] == pytest.approx([h["score"] for h in hits], abs=1e-5)


def test_local_search_without_an_index_says_how_to_build_one(tmp_path):
    registry = ToolRegistry([local_search_tool(LocalSearchConfig(index_dir=tmp_path / "none"))])
    result = asyncio.run(registry.call(ToolCall(name="local_search", arguments={"query": "anything"})))
    assert result.status is Status.EXEC_ERR
    assert "IndexLoadError" in result.reason and "podium index hotpot" in result.reason


# --- web_search against a fake Tavily ------------------------------------------------------------------------


@dataclass
class FakeTavily:
    """A local HTTP server answering POST /search with a configured status, body and delay."""

    url: str
    status: int = 200
    body: Any = field(default_factory=dict)
    delay_s: float = 0.0
    requests: list[dict[str, Any]] = field(default_factory=list)


@pytest.fixture
def fake_tavily() -> Iterator[FakeTavily]:
    state: FakeTavily

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", 0))
            state.requests.append(
                {"path": self.path, "headers": dict(self.headers), "json": json.loads(self.rfile.read(length))}
            )
            time.sleep(state.delay_s)
            payload = state.body if isinstance(state.body, bytes) else json.dumps(state.body).encode()
            try:
                self.send_response(state.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client timed out and left, as the timeout test intends

        def log_message(self, *args: Any) -> None:  # keep test output clean
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    state = FakeTavily(url=f"http://127.0.0.1:{server.server_address[1]}")
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def web_registry(url: str, **options: Any) -> ToolRegistry:
    config = WebSearchConfig(base_url=url, use_env_proxies=False, **options)
    return ToolRegistry([web_search_tool(config)])


TAVILY_ANSWER = {
    "query": "capital of France",
    "results": [
        {"title": "Paris", "url": "https://example.org/paris", "content": "Paris is the capital.", "score": 0.9},
        {"title": "France", "url": "https://example.org/france", "content": "A country.", "score": 0.5},
    ],
    "response_time": 0.4,
}


def test_web_search_posts_the_query_with_the_key_and_returns_results(fake_tavily, monkeypatch):
    monkeypatch.setenv("TAVILY_API_KEY", "tvly-test-key")
    fake_tavily.body = TAVILY_ANSWER
    result = call(web_registry(fake_tavily.url), "web_search", query="capital of France", k=2)
    assert result.status is Status.OK, result.reason
    assert result.value == {"query": "capital of France", "results": TAVILY_ANSWER["results"]}
    assert "[1] Paris <https://example.org/paris>\nParis is the capital." in result.observation
    assert result.usage.usd == pytest.approx(0.01)  # Tavily's basic search price, from the price sheet
    [request] = fake_tavily.requests
    assert request["path"] == "/search"
    assert request["headers"]["Authorization"] == "Bearer tvly-test-key"
    assert request["json"] == {"query": "capital of France", "max_results": 2, "search_depth": "basic"}


@pytest.mark.parametrize(
    ("status", "message"),
    [
        (401, "Tavily refused the API key in TAVILY_API_KEY (HTTP 401)"),
        (429, "rate limit"),
        (500, "Tavily answered HTTP 500"),
    ],
)
def test_web_search_http_errors_are_exec_err(fake_tavily, monkeypatch, status, message):
    monkeypatch.setenv("TAVILY_API_KEY", "tvly-test-key")
    fake_tavily.status, fake_tavily.body = status, {"detail": {"error": "nope"}}
    result = call(web_registry(fake_tavily.url), "web_search", query="q")
    assert result.status is Status.EXEC_ERR
    assert message in result.reason and "nope" in result.reason
    assert len(fake_tavily.requests) == 1


def test_web_search_bad_answers_timeouts_and_refused_connections(fake_tavily, monkeypatch):
    monkeypatch.setenv("TAVILY_API_KEY", "tvly-test-key")
    fake_tavily.body = b"<html>not json</html>"
    garbled = call(web_registry(fake_tavily.url), "web_search", query="q")
    assert garbled.status is Status.EXEC_ERR and garbled.reason.startswith("unexpected answer from Tavily")

    fake_tavily.body, fake_tavily.delay_s = TAVILY_ANSWER, 1.0
    slow = call(web_registry(fake_tavily.url, timeout_s=0.2), "web_search", query="q")
    assert slow.status is Status.TIMEOUT and "0.2 s" in slow.reason

    with socket.socket() as probe:  # a port on 127.0.0.1 that nothing listens on once closed
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    refused = call(web_registry(f"http://127.0.0.1:{closed_port}"), "web_search", query="q")
    assert refused.status is Status.EXEC_ERR and refused.reason.startswith(
        f"cannot reach http://127.0.0.1:{closed_port}"
    )


def test_web_search_without_a_key_is_unavailable_and_sends_nothing(fake_tavily, monkeypatch):
    monkeypatch.delenv("TAVILY_API_KEY", raising=False)
    config = WebSearchConfig(base_url=fake_tavily.url, use_env_proxies=False)
    assert config.unavailable_reason() == "web_search is unavailable: set TAVILY_API_KEY to a Tavily API key"
    result = call(ToolRegistry([web_search_tool(config)]), "web_search", query="q")
    assert result.status is Status.EXEC_ERR
    assert result.reason == "web_search is unavailable: set TAVILY_API_KEY to a Tavily API key"
    assert fake_tavily.requests == []
    monkeypatch.setenv("TAVILY_API_KEY", "tvly-test-key")
    assert config.unavailable_reason() is None


async def call_concurrently(registry, calls):
    """Every call at once, results in order (as the runtime dispatches a round)."""
    return list(await asyncio.gather(*(registry.call(call) for call in calls)))

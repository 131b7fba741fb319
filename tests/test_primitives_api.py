"""``call_api``: HTTP only to the endpoints the pool declares, with their method, body schema, timeout and price;
everything else refused before any connection. The servers are on 127.0.0.1, started here."""

import json

import httpx
import pytest

from podium.core.calls import Status
from podium.errors import ConfigError
from podium.pool.config import PoolConfig
from tests.primitive_fixtures import Recorder, perform, pool_with, slow, worker

QUOTE_SCHEMA = {
    "type": "object",
    "properties": {"symbol": {"type": "string", "pattern": "^[A-Z]{1,5}$"}},
    "required": ["symbol"],
    "additionalProperties": False,
}


def quotes(method, path, body):
    symbol = json.loads(body)["symbol"] if body else path.split("symbol=")[-1]
    return 200, {"symbol": symbol, "price": 101.5}, {}


def endpoint(url, **fields):
    return {
        "name": "quote",
        "url": f"{url}/quote",
        "method": "POST",
        "body_schema": QUOTE_SCHEMA,
        "price": {"per_call_usd": 0.25},
        "description": "latest share price",
        **fields,
    }


def request(method, url, body):
    return json.dumps({"method": method, "url": url, "body": body})


def test_call_api_sends_an_allowed_request_and_charges_the_endpoint():
    server = Recorder(quotes)
    with server.running() as url:
        pool = pool_with(
            [request("POST", f"{url}/quote", {"symbol": "ACME"})], ["call_api"], api_endpoints=[endpoint(url)]
        )
        result = perform(pool, "call_api", "What does ACME trade at?")
    assert result.status is Status.OK, result.reason
    assert result.value["response"] == {"symbol": "ACME", "price": 101.5} and result.value["status_code"] == 200
    assert server.seen == [("POST", "/quote", b'{"symbol":"ACME"}')]
    assert result.usage.usd == pytest.approx(0.25, rel=0.01)
    prompt = pool.backends["w"].requests[0][1].content
    assert f"POST {url}/quote" in prompt and "latest share price" in prompt and '"pattern"' in prompt


def test_get_endpoints_take_their_body_as_query_parameters():
    server = Recorder(quotes)
    with server.running() as url:
        get = endpoint(url, method="GET")
        pool = pool_with([request("GET", f"{url}/quote", {"symbol": "XYZ"})], ["call_api"], api_endpoints=[get])
        result = perform(pool, "call_api", "Quote XYZ")
    assert result.status is Status.OK and server.seen == [("GET", "/quote?symbol=XYZ", b"")]


@pytest.mark.parametrize(
    ("method", "path", "body", "reason"),
    [
        ("POST", "/admin", {"symbol": "ACME"}, "is not an allowed endpoint"),
        ("DELETE", "/quote", {"symbol": "ACME"}, "quote accepts POST, not DELETE"),
        ("POST", "/quote", {"symbol": "acme; drop"}, "fails the schema of quote at symbol"),
        ("POST", "/quote?symbol=ACME", {"symbol": "ACME"}, "is not an allowed endpoint"),
    ],
)
def test_requests_off_the_allowlist_are_refused_before_they_are_sent(method, path, body, reason):
    server = Recorder(quotes)
    with server.running() as url:
        pool = pool_with([request(method, url + path, body)], ["call_api"], api_endpoints=[endpoint(url)])
        result = perform(pool, "call_api", "Do it")
    assert result.status is Status.PARSE_ERR and result.reason.startswith("refused:") and reason in result.reason
    assert server.seen == [] and result.usage.usd < 0.25


def test_another_local_server_and_other_hosts_are_never_contacted(monkeypatch):
    allowed, other = Recorder(quotes), Recorder(quotes)
    attempts = []
    original = httpx.AsyncClient.send

    async def watched(self, req, **kwargs):
        attempts.append(str(req.url))
        return await original(self, req, **kwargs)

    monkeypatch.setattr(httpx.AsyncClient, "send", watched)
    with allowed.running() as url, other.running() as elsewhere:
        replies = [
            request("POST", f"{elsewhere}/quote", {"symbol": "ACME"}),
            request("POST", "http://203.0.113.9/quote", {}),
        ]
        pool = pool_with(replies, ["call_api"], api_endpoints=[endpoint(url)])
        local = perform(pool, "call_api", "Ask the other server")
        remote = perform(pool, "call_api", "Ask a remote host")
    assert local.status is remote.status is Status.PARSE_ERR
    assert f"{elsewhere}/quote is not an allowed endpoint" in local.reason and "203.0.113.9" in remote.reason
    assert other.seen == [] and allowed.seen == [] and attempts == []


def test_redirects_are_not_followed_and_errors_are_statuses():
    target = Recorder(quotes)
    with target.running() as elsewhere:
        hop = Recorder(lambda method, path, body: (302, {}, {"Location": f"{elsewhere}/quote"}))
        failing = Recorder(lambda method, path, body: (503, {"error": "down"}, {}))
        with hop.running() as url, failing.running() as broken:
            endpoints = [endpoint(url), endpoint(broken, name="broken")]
            replies = [
                request("POST", f"{url}/quote", {"symbol": "A"}),
                request("POST", f"{broken}/quote", {"symbol": "A"}),
            ]
            pool = pool_with(replies, ["call_api"], api_endpoints=endpoints)
            redirected = perform(pool, "call_api", "Follow me")
            down = perform(pool, "call_api", "Try the broken one")
    assert redirected.status is Status.EXEC_ERR and "redirect, which is not followed" in redirected.reason
    assert target.seen == []
    assert down.status is Status.EXEC_ERR and "HTTP 503" in down.reason and down.value["response"] == {"error": "down"}
    assert down.usage.usd < 0.25, "an unanswered request is not charged its per-call price"


def test_a_slow_endpoint_times_out():
    with Recorder(slow(5.0)).running() as url:
        pool = pool_with(
            [request("POST", f"{url}/quote", {"symbol": "A"})],
            ["call_api"],
            api_endpoints=[endpoint(url, timeout_s=0.5)],
        )
        result = perform(pool, "call_api", "Wait for it")
    assert result.status is Status.TIMEOUT and "did not answer within 0.5 s" in result.reason


def test_a_large_response_is_cut_at_the_limit():
    with Recorder(lambda method, path, body: (200, b"x" * 5000, {})).running() as url:
        pool = pool_with(
            [request("POST", f"{url}/quote", {"symbol": "A"})],
            ["call_api"],
            api_endpoints=[endpoint(url)],
            primitive_limits={"max_response_bytes": 1000},
        )
        result = perform(pool, "call_api", "Fetch")
    assert result.status is Status.OK and result.value["truncated"] is True and len(result.value["response"]) == 1000


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("ftp://127.0.0.1/x", "not an http"),
        ("http://user:secret@127.0.0.1/x", "credentials"),
        ("http://127.0.0.1/x?key=1", "no query string"),
    ],
)
def test_endpoint_declarations_are_checked(url, problem):
    with pytest.raises(ConfigError, match=rf"api_endpoints\.0\.url.*{problem}"):
        PoolConfig.from_dict(
            {"workers": [worker(["x"], ["call_api"]).model_dump()], "api_endpoints": [{"name": "e", "url": url}]}
        )

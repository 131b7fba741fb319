"""`podium serve` in operation: the bounded queue (429 / 503 with Retry-After), cancellation when a client goes away,
Prometheus metrics, API keys with daily USD limits, request logs, request body limits and non-finite numbers."""

import asyncio
import datetime
import json
import re
import threading
import time

import httpx
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from podium.core.trajectory import read_trajectories
from podium.serve.accounts import ApiKey
from podium.serve.admission import Admission
from podium.serve.http import ApiError
from tests.serve_fixtures import WEATHER_TOOL, ask, client, served, system, weather_then_answer


def metric(url: str, name: str, **labels: str) -> float:
    """The sum of the samples with these labels on the server's /metrics (0 when absent)."""
    text = httpx.get(url.removesuffix("/v1") + "/metrics", headers={"authorization": "Bearer alice-key"}).text
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items())
    )


def until(condition, seconds: float = 10.0) -> None:  # type: ignore[no-untyped-def]
    """Wait for ``condition`` (bounded)."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "the condition never held"
        time.sleep(0.02)


def test_requests_wait_in_a_bounded_queue_and_a_full_queue_gets_429_with_retry_after() -> None:
    with served(system(delay=0.4), max_concurrent=1, max_queued=1, heartbeat_s=0.1) as url:
        api = client(url)
        holding = iter(api.chat.completions.create(model="tiny-orchestrator", messages=ask(), stream=True))
        assert next(holding).model_extra["podium"]["event"] == "started"  # admitted: it holds the only slot
        queued: list[str | None] = []
        waiting = threading.Thread(
            target=lambda: queued.append(
                api.chat.completions.create(model="tiny-orchestrator", messages=ask()).choices[0].message.content
            )
        )
        waiting.start()
        until(lambda: metric(url, "podium_queue_depth") == 1)
        with pytest.raises(openai.RateLimitError) as refused:
            api.chat.completions.create(model="tiny-orchestrator", messages=ask())
        assert refused.value.body["code"] == "queue_full"
        headers = refused.value.response.headers  # nothing has finished yet: a second, not a guess of 2 s (or 17)
        assert (headers["retry-after"], headers["retry-after-ms"]) == ("1", "1000")
        assert "".join(c.choices[0].delta.content or "" for c in holding if c.choices) == "42"
        waiting.join(timeout=30)
        assert queued == ["42"]  # it waited for the slot instead of being refused
        assert metric(url, "podium_requests_total", outcome="queue_full") == 1


def test_a_request_that_waits_past_the_queue_limit_gets_503_with_retry_after() -> None:
    with served(system(delay=0.5), max_concurrent=1, queue_timeout_s=0.2, heartbeat_s=0.1) as url:
        api = client(url)
        holding = iter(api.chat.completions.create(model="tiny-orchestrator", messages=ask(), stream=True))
        next(holding)
        with pytest.raises(openai.InternalServerError) as timed_out:
            api.chat.completions.create(model="tiny-orchestrator", messages=ask())
        assert timed_out.value.status_code == 503 and timed_out.value.body["code"] == "queue_timeout"
        assert timed_out.value.response.headers["retry-after"]
        list(holding)


def test_a_client_that_goes_away_cancels_its_episode_and_frees_the_slot(tmp_path) -> None:
    trace = tmp_path / "t.jsonl"
    with served(system(delay=1.0), max_concurrent=1, trace=str(trace), heartbeat_s=0.1) as url:
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(f"{url}/chat/completions", json={"model": "tiny-orchestrator", "messages": ask()}, timeout=0.3)
        until(lambda: trace.exists() and len(trace.read_text().splitlines()) == 1)
        with httpx.stream(
            "POST", f"{url}/chat/completions", json={"model": "tiny-orchestrator", "messages": ask(), "stream": True}
        ) as response:
            next(response.iter_lines())  # started; then the client leaves
        until(lambda: len(trace.read_text().splitlines()) == 2)
        reply = client(url).chat.completions.create(model="tiny-orchestrator", messages=ask())
        assert reply.choices[0].message.content == "42"  # the slot was freed
        assert metric(url, "podium_requests_total", outcome="cancelled") == 2
    stopped = [trajectory.stop_reason for trajectory in read_trajectories(trace)]
    assert stopped == ["cancelled", "cancelled", "answer"]


def test_metrics_count_requests_latency_usd_and_calls_per_worker() -> None:
    with served(system()) as url:
        client(url).chat.completions.create(model="tiny-orchestrator", messages=ask())
        with pytest.raises(openai.NotFoundError):
            client(url).chat.completions.create(model="nope", messages=ask())
        text = httpx.get(url.removesuffix("/v1") + "/metrics").text
        assert metric(url, "podium_requests_total", model="tiny-orchestrator", outcome="stop") == 1
        assert metric(url, "podium_requests_total", model="unknown", outcome="model_not_found") == 1
        assert metric(url, "podium_request_seconds_count", model="tiny-orchestrator") == 1
        assert metric(url, "podium_calls_total", tool="helper", worker="helper-model", status="OK") == 1
        assert metric(url, "podium_episode_usd_total", model="tiny-orchestrator") > 0
        assert metric(url, "podium_episodes_total", stop_reason="answer") == 1
    assert "# TYPE podium_call_seconds histogram" in text and "podium_queue_depth 0.0" in text


def test_api_keys_have_daily_usd_limits_that_survive_a_restart(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("ALICE_KEY", "alice-key")
    monkeypatch.setenv("BOB_KEY", "bob-key")
    spend = tmp_path / "spend.jsonl"
    keys = [ApiKey(name="alice", key_env="ALICE_KEY", max_usd_per_day=1.0), ApiKey(name="bob", key_env="BOB_KEY")]
    with served(system(), keys=keys, spend_file=str(spend)) as url:
        reply = client(url, api_key="alice-key").chat.completions.create(model="tiny-orchestrator", messages=ask())
        with pytest.raises(openai.AuthenticationError):
            client(url, api_key="carol-key").chat.completions.create(model="tiny-orchestrator", messages=ask())
        assert metric(url, "podium_episode_usd_total", key="alice") == pytest.approx(reply.usage.model_extra["cost"])
    [row] = [json.loads(line) for line in spend.read_text().splitlines()]
    assert row["key"] == "alice" and row["usd"] == pytest.approx(reply.model_extra["podium"]["usd"])
    today = datetime.datetime.now(datetime.UTC).date().isoformat()
    with spend.open("a") as handle:
        handle.write(json.dumps({"day": today, "key": "alice", "usd": 1.0 - row["usd"] - 1e-6}) + "\n")
    with served(system(), keys=keys, spend_file=str(spend)) as url:  # a restart reads today's spend back
        with pytest.raises(openai.RateLimitError) as nearly_spent:
            client(url, api_key="alice-key").chat.completions.create(model="tiny-orchestrator", messages=ask())
        assert nearly_spent.value.body["code"] == "insufficient_quota"
        bob = client(url, api_key="bob-key").chat.completions.create(model="tiny-orchestrator", messages=ask())
        assert bob.choices[0].message.content == "42"  # another key is not limited by alice's spend
    with spend.open("a") as handle:
        handle.write(json.dumps({"day": today, "key": "alice", "usd": 1e-6}) + "\n")
    with (
        served(system(), keys=keys, spend_file=str(spend)) as url,
        pytest.raises(openai.RateLimitError, match="has spent its"),
    ):
        client(url, api_key="alice-key").chat.completions.create(model="tiny-orchestrator", messages=ask())


KEY_LIMIT_USD = 5.0
REQUESTS = 150
REFUSAL = re.compile(r"has \$([0-9.]+) left after what is spent and held, and the step could cost up to \$([0-9.]+)")


def test_a_key_limit_is_spent_step_by_step_by_concurrent_capped_requests(tmp_path, monkeypatch) -> None:
    # Issue 54: each request held its whole max_usd of the key's day, so 150 concurrent requests capped at $1 on a
    # $5 key got 145 429s with $0.30 spent. Now each step holds its bound only while it runs: the key spends up to
    # its limit and never past it, and a request is refused only when what is left cannot pay for its next step.
    monkeypatch.setenv("TEAM_KEY", "team-key")
    spend = tmp_path / "spend.jsonl"
    keys = [ApiKey(name="team", key_env="TEAM_KEY", max_usd_per_day=KEY_LIMIT_USD)]
    served_system = system(delay=0.02)
    question = "What is 6*7? " + "Say how you got it. " * 30  # ~$0.06 a request: 150 of them would spend $9
    body = {"model": "tiny-orchestrator", "messages": ask(question), "podium": {"max_usd": 1.0}}

    async def hammer(url: str) -> list[httpx.Response]:
        limits = httpx.Limits(max_connections=REQUESTS)
        async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as http:
            headers = {"authorization": "Bearer team-key"}
            return await asyncio.gather(*(http.post("/chat/completions", json=body, headers=headers)
                                          for _ in range(REQUESTS)))  # fmt: skip

    with served(served_system, keys=keys, spend_file=str(spend), max_concurrent=REQUESTS) as url:
        replies = asyncio.run(hammer(url))
        answered = [reply.json() for reply in replies if reply.status_code == 200]
        refused = [reply.json()["error"] for reply in replies if reply.status_code == 429]
    spent = sum(json.loads(line)["usd"] for line in spend.read_text().splitlines())
    assert KEY_LIMIT_USD - 1.0 < spent <= KEY_LIMIT_USD, f"${spent:.4f} spent, {len(refused)} of {REQUESTS} refused"
    assert len(answered) + len(refused) == REQUESTS and answered and refused
    assert all(error["code"] == "insufficient_quota" for error in refused), refused[0]
    # each refusal came when what the key had left could not pay for the refused step: at most one step is unspent
    shortfalls = [REFUSAL.search(error["message"]) for error in refused]
    assert all(shortfalls), refused
    steps = [(float(found[1]), float(found[2])) for found in shortfalls if found]
    assert all(left < step for left, step in steps) and KEY_LIMIT_USD - spent < max(step for _, step in steps)
    assert spent >= sum(reply["podium"]["usd"] for reply in answered) - 1e-9  # refused episodes may have spent too


def test_request_logs_are_json_lines_per_response_and_episode(tmp_path) -> None:
    log = tmp_path / "requests.jsonl"
    with served(system(), request_log=str(log)) as url:
        reply = client(url).chat.completions.create(model="tiny-orchestrator", messages=ask(), user="u-1")
        with pytest.raises(openai.BadRequestError):
            client(url).chat.completions.create(model="tiny-orchestrator", messages=ask(), temperature=5)
    records = [json.loads(line) for line in log.read_text().splitlines()]
    [episode] = [r for r in records if r["event"] == "episode"]
    assert episode["request_id"] == reply.id and episode["stop_reason"] == "answer" and episode["calls"] == 1
    assert episode["usd"] == pytest.approx(reply.usage.model_extra["cost"])
    outcomes = [(r["model"], r["outcome"]) for r in records if r["event"] == "request"]
    assert outcomes == [("tiny-orchestrator", "stop"), (None, "invalid_request_error")]


def test_request_bodies_are_capped_and_non_finite_numbers_refused() -> None:
    with served(system(), max_request_bytes=2000) as url:
        big = {"model": "tiny-orchestrator", "messages": ask("x" * 3000)}
        assert httpx.post(f"{url}/chat/completions", json=big).status_code == 413
        chunked = httpx.post(f"{url}/chat/completions", content=iter([json.dumps(big).encode()]))
        assert chunked.status_code == 413 and chunked.json()["error"]["code"] == "request_too_large"
        for raw, param in (
            ('"podium": {"max_usd": NaN}', "podium.max_usd"),
            ('"podium": {"max_seconds": -Infinity}', "podium.max_seconds"),
            ('"temperature": 1e309', "temperature"),
        ):
            body = f'{{"model": "tiny-orchestrator", "messages": [{{"role": "user", "content": "q"}}], {raw}}}'
            reply = httpx.post(f"{url}/chat/completions", content=body.encode())
            assert reply.status_code == 400 and reply.json()["error"]["param"] == param, reply.text
        streamed = httpx.post(
            f"{url}/chat/completions", json={"model": "tiny-orchestrator", "messages": ask(), "stream": True}
        )

    def refuse(constant: str) -> float:
        raise AssertionError(f"non-JSON number {constant} in the stream")

    lines = [line[6:] for line in streamed.text.splitlines() if line.startswith("data: ") and line != "data: [DONE]"]
    assert lines and all(json.loads(line, parse_constant=refuse) for line in lines)


def test_retry_after_is_the_measured_drain_time_of_the_work_ahead() -> None:
    """Retry-After (whole seconds) and retry-after-ms advise the time the responses running and queued take to
    finish at the rate responses have finished while slots were busy; before any is measured, one second."""
    now = [0.0]
    admission = Admission(max_running=2, max_queued=2, max_wait_s=60, clock=lambda: now[0])

    async def burst() -> ApiError:
        assert await admission.acquire() == 0.0 and await admission.acquire() == 0.0
        waiting = [asyncio.ensure_future(admission.acquire()) for _ in range(2)]
        await asyncio.sleep(0)
        with pytest.raises(ApiError) as unmeasured:
            await admission.acquire()
        assert unmeasured.value.headers == {"Retry-After": "1", "retry-after-ms": "1000"}
        for _ in range(10):  # ten responses finish, 0.2 s of busy time apart: 5 per second
            now[0] += 0.2
            admission.release()
            waiting.append(asyncio.ensure_future(admission.acquire()))
            await asyncio.sleep(0)
        now[0] += 100.0  # idle time (every slot free) does not dilute the rate
        for ticket in waiting:
            ticket.cancel()
        with pytest.raises(ApiError) as refused:
            await admission.acquire()
        return refused.value

    refused = asyncio.run(burst())
    assert refused.status == 429 and refused.code == "queue_full"
    assert refused.headers == {"Retry-After": "1", "retry-after-ms": "800"}  # 4 ahead at 5 per second


def test_every_refusal_is_counted_and_logged(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("ALICE_KEY", "alice-key")
    log = tmp_path / "requests.jsonl"
    keys = [ApiKey(name="alice", key_env="ALICE_KEY")]
    with served(system(), max_request_bytes=2000, request_log=str(log), keys=keys) as url:
        headers = {"authorization": "Bearer alice-key"}
        big = {"model": "tiny-orchestrator", "messages": ask("x" * 3000)}
        assert httpx.post(f"{url}/chat/completions", json=big, headers=headers).status_code == 413
        nan = b'{"model": "tiny-orchestrator", "messages": [{"role": "user", "content": "q"}], "temperature": NaN}'
        assert httpx.post(f"{url}/chat/completions", content=nan, headers=headers).status_code == 400
        assert httpx.post(f"{url}/chat/completions", json=[1], headers=headers).status_code == 400
        assert (
            httpx.post(f"{url}/chat/completions", json={"model": "tiny-orchestrator", "messages": ask()}).status_code
            == 401
        )
        assert httpx.post(f"{url}/completions", json={}, headers=headers).status_code == 404
        assert httpx.get(f"{url}/chat/completions", headers=headers).status_code == 405
        counted = {
            outcome: metric(url, "podium_requests_total", outcome=outcome)
            for outcome in ("request_too_large", "invalid_request_error", "invalid_api_key", "unknown_url",
                            "method_not_allowed")
        }  # fmt: skip
    assert counted == {
        "request_too_large": 1, "invalid_request_error": 2, "invalid_api_key": 1, "unknown_url": 1,
        "method_not_allowed": 1,
    }  # fmt: skip
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(r["outcome"], r["status"]) for r in records] == [
        ("request_too_large", 413), ("invalid_request_error", 400), ("invalid_request_error", 400),
        ("invalid_api_key", 401), ("unknown_url", 404), ("method_not_allowed", 405),
    ]  # fmt: skip
    assert records[0]["path"] == "/v1/chat/completions" and records[2]["key"] == "alice"


def test_metric_labels_only_take_names_the_server_knows() -> None:
    made_up = system(script=lambda messages: "<answer>done</answer>" if len(messages) > 2 else CALL_NOPE)
    with served(made_up) as url:
        api = client(url)
        for index in range(30):
            with pytest.raises(openai.NotFoundError):
                api.chat.completions.create(model=f"random-{index}", messages=ask())
        api.chat.completions.create(model="tiny-orchestrator", messages=ask())
        text = httpx.get(url.removesuffix("/v1") + "/metrics").text
        assert metric(url, "podium_requests_total", model="unknown", outcome="model_not_found") == 30
        assert metric(url, "podium_calls_total", tool="unknown", status="PARSE_ERR") == 1
    assert "random-" not in text and "made_up_tool" not in text


CALL_NOPE = '<tool_call>{"name": "made_up_tool", "arguments": {}}</tool_call>'


def test_waiting_episodes_are_capped_and_the_oldest_is_cancelled(tmp_path) -> None:
    log = tmp_path / "requests.jsonl"
    with served(system(script=weather_then_answer), max_waiting_episodes=2, request_log=str(log)) as url:
        api = client(url)
        firsts = [
            api.chat.completions.create(model="tiny-orchestrator", messages=ask(f"Weather {n}?"), tools=[WEATHER_TOOL])
            for n in range(3)
        ]
        until(lambda: metric(url, "podium_waiting_cancelled_total", reason="waiting_cap") == 1)
        assert metric(url, "podium_waiting_episodes") == 2
        message = firsts[0].choices[0].message
        late = [*ask("Weather 0?"), message.model_dump(), {"role": "tool", "tool_call_id": message.tool_calls[0].id,
                                                            "content": "fog"}]  # fmt: skip
        api.chat.completions.create(model="tiny-orchestrator", messages=late, tools=[WEATHER_TOOL])
    records = [json.loads(line) for line in log.read_text().splitlines()]
    cancelled = next(r for r in records if r["event"] == "episode")
    assert cancelled["request_id"] == firsts[0].id and cancelled["cancelled_because"] == "waiting_cap"
    last = [r for r in records if r["event"] == "request"][-1]
    assert last["resumed"] is False and last["outcome"] == "tool_calls"  # its late results started a new episode

"""`podium serve`: orchestrators as OpenAI-compatible models, used through the official openai client (sync, async,
streaming) against servers the tests start on 127.0.0.1: conversations, streamed steps, sampling parameters."""

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import openai
import pytest

from podium.backends.scripted import ScriptedBackend
from podium.core.trajectory import read_trajectories
from podium.errors import ConfigError
from podium.policies import build_policy
from podium.serve.orchestrator_server import create_orchestrator_app
from podium.serve.settings import DEFAULT_SYSTEM, ServeConfig
from podium.solve.config import SystemConfig
from tests.serve_fixtures import (
    ANSWER,
    CALL,
    SlowScripted,
    ask,
    client,
    orchestrator_of,
    served,
    system,
)

MODEL = "tiny-orchestrator"


def test_sync_client_runs_one_episode_per_request(tmp_path) -> None:
    trace = tmp_path / "served.jsonl"
    with served(system(max_episode_usd=5.0), trace=str(trace)) as url:
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
    reasoning = response.choices[0].message.model_extra["reasoning_content"]
    assert "[turn 1]" in reasoning and "[call helper (helper-model)] OK" in reasoning


def test_async_client_runs_concurrent_episodes() -> None:
    async def ask_three(url: str) -> list[str]:
        api = openai.AsyncOpenAI(base_url=url, api_key="none", max_retries=0)
        responses = await asyncio.gather(
            *(api.chat.completions.create(model="tiny-orchestrator", messages=ask(q)) for q in ("a?", "b?", "c?"))
        )
        assert all(r.choices[0].message.content == "42" for r in responses)
        await api.close()
        return [r.model_extra["podium"]["trajectory_id"] for r in responses]

    with served(system(delay=0.2), max_concurrent=3) as url:
        assert len(set(asyncio.run(ask_three(url)))) == 3


def test_streaming_shows_each_turn_and_call_then_the_answer_word_by_word() -> None:
    def long_answer(messages: list) -> str:
        return "<answer>It is 42, as the helper said.</answer>" if len(messages) > 2 else CALL

    with served(system(delay=0.3, script=long_answer), heartbeat_s=0.1) as url:
        stream = client(url).chat.completions.create(
            model="tiny-orchestrator", messages=ask(), stream=True, stream_options={"include_usage": True}
        )
        chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant" and chunks[0].model_extra["podium"]["event"] == "started"
    events = [(c.model_extra.get("podium") or {}).get("event") for c in chunks]
    steps = [event for event in events if event in ("generating", "turn", "call")]
    assert steps == ["generating", "turn", "call", "generating", "turn"]
    assert "running" in events  # heartbeats while a generation takes 0.3 s
    [call] = [c.model_extra["podium"] for c, event in zip(chunks, events, strict=True) if event == "call"]
    assert (call["name"], call["status"], call["worker"]) == ("helper", "OK", "helper-model") and call["usd"] > 0
    reasoning = "".join(
        (c.choices[0].delta.model_extra or {}).get("reasoning_content") or "" for c in chunks if c.choices
    )
    assert reasoning.index("[turn 1]") < reasoning.index("[call helper") < reasoning.index("[turn 2]")
    pieces = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    assert "".join(pieces) == "It is 42, as the helper said." and len(pieces) == 7
    [finish] = [c for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finish.choices[0].finish_reason == "stop" and finish.model_extra["podium"]["calls"] == 1
    assert finish.model_extra["podium"]["usd"] > 0
    # usage comes once, in the last chunk, without choices (OpenAI's contract with include_usage)
    assert [c for c in chunks if c.usage] == [chunks[-1]] and chunks[-1].choices == []
    assert chunks[-1].usage.model_extra["cost"] == pytest.approx(finish.model_extra["podium"]["usd"])
    assert chunks[-1].usage.total_tokens == finish.model_extra["podium"]["tokens"] > 0


def test_the_conversation_history_is_the_episodes_context(tmp_path) -> None:
    served_system = system()
    messages = [
        {"role": "system", "content": "Answer in French."},
        {"role": "user", "content": "My name is Ada."},
        {"role": "assistant", "content": "Hello Ada."},
        {"role": "developer", "content": "Prefer free tools."},
        {"role": "user", "content": "What is 6*7?"},
    ]
    with served(served_system, trace=str(tmp_path / "t.jsonl")) as url:
        reply = client(url).chat.completions.create(model="tiny-orchestrator", messages=messages)
    assert reply.choices[0].message.content == "42"
    [stored] = read_trajectories(tmp_path / "t.jsonl")
    roles = [(m.role, m.content) for m in stored.messages[1:4]]
    assert roles == [("user", "My name is Ada."), ("assistant", "Hello Ada."), ("user", "What is 6*7?")]
    assert stored.messages[0].content.endswith("Answer in French.\n\nPrefer free tools.")
    assert stored.metadata["history"] == {"messages": 2, "shown": 2}
    first_prompt = orchestrator_of(served_system).sent[0].messages
    assert [m.content for m in first_prompt[1:3]] == ["My name is Ada.", "Hello Ada."]


def test_a_long_history_keeps_its_newest_turns_within_the_budget(tmp_path) -> None:
    turns = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i} " + "x" * 400} for i in range(9)]
    with served(system(max_history_tokens=1000), trace=str(tmp_path / "t.jsonl")) as url:
        reply = client(url).chat.completions.create(model="tiny-orchestrator", messages=[*turns, *ask()])
    assert reply.model_extra["podium"]["history"] == {"messages": 9, "shown": 2}
    [stored] = read_trajectories(tmp_path / "t.jsonl")
    assert stored.messages[1].content.startswith("turn 7 ") and stored.messages[2].content.startswith("turn 8 ")


def test_sampling_parameters_reach_the_orchestrator_and_stop_cuts_the_answer() -> None:
    served_system = system()
    with served(served_system) as url:
        reply = client(url).chat.completions.create(
            model="tiny-orchestrator", messages=ask(), temperature=0.7, top_p=0.9, seed=11, max_tokens=64, stop=["2"]
        )
    assert reply.choices[0].message.content == "4" and reply.choices[0].finish_reason == "stop"
    sent = orchestrator_of(served_system).sent
    assert [(r.temperature, r.top_p, r.seed, r.max_tokens) for r in sent] == [(0.7, 0.9, 11, 64), (0.7, 0.9, 12, 64)]


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"frequency_penalty": 0.5}, "frequency_penalty"),
        ({"presence_penalty": 1}, "presence_penalty"),
        ({"logprobs": True}, "logprobs"),
        ({"response_format": {"type": "json_schema"}}, "response_format"),
        ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": 5}}}},
         "response_format.json_schema.schema"),
        ({"logit_bias": {"50256": -100}}, "logit_bias.50256"),
        ({"reasoning_effort": "high"}, "reasoning_effort"),
        ({"tool_choice": "required"}, "tool_choice"),
        ({"tool_choice": {"type": "function", "function": {"name": "get_weather"}}}, "tool_choice"),
        ({"tool_choice": {"type": "allowed_tools"}}, "tool_choice"),
        ({"n": 2}, "n"),
        ({"store": True}, "store"),
        ({"temperature": 3}, "temperature"),
        ({"stop": ["a", "b", "c", "d", "e"]}, "stop"),
        ({"max_tokens": 8, "max_completion_tokens": 9}, "max_completion_tokens"),
        ({"stream_options": {"continuous_usage_stats": True}}, "stream_options.continuous_usage_stats"),
    ],
)  # fmt: skip
def test_fields_the_orchestrator_cannot_honour_are_400s_naming_them(extra: dict, param: str) -> None:
    with served() as url:
        reply = httpx.post(f"{url}/chat/completions", json={"model": "tiny-orchestrator", "messages": ask(), **extra})
    assert reply.status_code == 400, reply.text
    assert reply.json()["error"]["param"] == param and reply.json()["error"]["type"] == "invalid_request_error"


def test_an_answer_budget_too_small_for_an_action_names_max_tokens() -> None:
    grammar_needing = system(constrained="always")
    grammar_needing.pool.backends["orchestrator"].supports_regex = True
    with served(grammar_needing) as url, pytest.raises(openai.BadRequestError) as refused:
        client(url).chat.completions.create(model="tiny-orchestrator", messages=ask(), max_tokens=3)
    assert refused.value.body["param"] == "max_tokens" and "max_tokens" in refused.value.message


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"model": MODEL, "messages": []}, "messages"),
        ({"model": MODEL, "messages": [{"role": "system", "content": "only a system"}]}, "messages.0.role"),
        ({"model": MODEL, "messages": [*ask(), {"role": "assistant", "content": "x"}]}, "messages.1.role"),
        ({"model": MODEL, "messages": [*ask(), {"role": "tool", "content": "x"}]}, "messages.1.tool_call_id"),
        ({"model": MODEL, "messages": ask(), "tools": [{}]}, "tools.0.type"),
        ({"model": MODEL, "messages": ask(), "podium": {"max_usd": -1}}, "podium.max_usd"),
        ({"model": MODEL, "messages": ask(), "podium": {"budget": 1}}, "podium.budget"),
        ({"model": MODEL, "messages": ask(), "podium": {"deny": ["nope"]}}, "podium"),
        ({"messages": ask()}, "model"),
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
            client(url).chat.completions.create(model="gpt-5", messages=ask())
        with pytest.raises(openai.InternalServerError) as failed:
            client(url).chat.completions.create(model="broken", messages=ask())
        assert failed.value.status_code == 502 and failed.value.body["code"] == "orchestrator_failed"
        with pytest.raises(openai.APIError, match="no reply left"):
            list(client(url).chat.completions.create(model="broken", messages=ask(), stream=True))


def test_an_answer_in_an_observation_is_never_lost_to_a_limit() -> None:
    with served() as url:
        response = client(url).chat.completions.create(
            model="tiny-orchestrator", messages=ask(), extra_body={"podium": {"max_turns": 1}}
        )
    # The one turn called the helper, which returned 42; the turn limit came before the orchestrator answered.
    assert response.choices[0].message.content == "42" and response.choices[0].finish_reason == "stop"
    podium = response.model_extra["podium"]
    assert podium["stop_reason"] == "max_turns" and podium["answer_source"] == {"call": "call_0", "tool": "helper"}
    silent = system(script=lambda messages: '<tool_call>{"name": "nope", "arguments": {}}</tool_call>')
    with served(silent) as url:
        response = client(url).chat.completions.create(
            model="tiny-orchestrator", messages=ask(), extra_body={"podium": {"max_turns": 1}}
        )
    assert response.choices[0].finish_reason == "length" and response.choices[0].message.content == ""


def test_an_api_key_is_required_when_configured(monkeypatch) -> None:
    monkeypatch.setenv("PODIUM_TEST_KEY", "s3cret")
    with served(system(), api_key_env="PODIUM_TEST_KEY") as url:
        with pytest.raises(openai.AuthenticationError):
            client(url, api_key="wrong").models.list()
        with pytest.raises(openai.AuthenticationError):
            client(url).chat.completions.create(model=MODEL, messages=ask())
        assert httpx.get(url.removesuffix("/v1") + "/metrics").status_code == 401
        reply = client(url, api_key="s3cret").chat.completions.create(model=MODEL, messages=ask())
        assert reply.choices[0].message.content == "42"


def test_eval_orchestrator_files_serve_unchanged(tmp_path) -> None:
    spec = SystemConfig.from_file("examples/systems/embedded-orchestrator.yaml")
    assert spec.name == "embedded-orchestrator-serial" and spec.max_turns == 2
    (tmp_path / "tools.yaml").write_text(json.dumps({"kind": "tools_model"}))
    with pytest.raises(ConfigError, match="kind: Input should be 'orchestrator'"):
        SystemConfig.from_file(tmp_path / "tools.yaml")
    with pytest.raises(ConfigError, match="distinct names"):
        create_orchestrator_app([system(), system()])
    with pytest.raises(ConfigError, match="PODIUM_UNSET_KEY"):
        create_orchestrator_app([system()], ServeConfig(api_key_env="PODIUM_UNSET_KEY"))


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
    port, trace, log = free_port(), tmp_path / "trace.jsonl", tmp_path / "requests.jsonl"
    settings = {"keys": [{"name": "team", "key_env": "SERVE_KEY", "max_usd_per_day": 10}], "request_log": str(log)}
    (tmp_path / "serve.json").write_text(json.dumps(settings))
    command = [str(Path(sys.executable).with_name("podium")), "serve", "--system", str(tmp_path / "system.yaml"),
               "--port", str(port), "--config", str(tmp_path / "serve.json"), "--trace", str(trace),
               "--request-timeout", "60"]  # fmt: skip
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
        reply = api.chat.completions.create(model="scripted", messages=ask("6*7?"))
        with pytest.raises(openai.AuthenticationError):
            client(f"http://127.0.0.1:{port}/v1", api_key="wrong").chat.completions.create(
                model="scripted", messages=ask()
            )
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert reply.choices[0].message.content == "42"
    assert [t.id for t in read_trajectories(trace)] == [reply.model_extra["podium"]["trajectory_id"]]
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert {(r["event"], r.get("outcome")) for r in records} >= {("request", "stop"), ("episode", None)}
    assert [r["key"] for r in records if r["event"] == "episode"] == ["team"]


PRODUCT = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "price": {"type": "number"}},
    "required": ["name", "price"],
    "additionalProperties": False,
}


@pytest.mark.parametrize("stream", [False, True])
def test_response_format_answers_are_that_json_or_an_error(stream: bool) -> None:
    def json_when_asked(messages: list) -> str:
        if "matching the JSON schema 'product'" in messages[1].content:
            return '<answer>```json\n{"name": "widget", "price": 4.5}\n```</answer>'
        return "<answer>a widget, 4.5 USD</answer>"

    schema = {"type": "json_schema", "json_schema": {"name": "product", "schema": PRODUCT, "strict": True}}
    with served(system(script=json_when_asked)) as url:
        api = client(url)

        def ask_for(response_format: dict) -> str:
            if not stream:
                reply = api.chat.completions.create(model=MODEL, messages=ask(), response_format=response_format)
                return reply.choices[0].message.content or ""
            chunks = api.chat.completions.create(
                model=MODEL, messages=ask(), response_format=response_format, stream=True
            )
            return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)

        assert json.loads(ask_for(schema)) == {"name": "widget", "price": 4.5}  # the fence is taken off
        with pytest.raises(openai.APIError) as refused:
            ask_for({"type": "json_object"})  # the answer is not JSON: an error, never that text as if it were
    if not stream:
        assert refused.value.status_code == 502 and refused.value.response.headers["x-should-retry"] == "false"
    assert refused.value.body["code"] == "response_format_not_followed" and "not JSON" in refused.value.message


def test_a_stream_without_include_usage_carries_no_usage_and_non_streamed_replies_carry_it_once() -> None:
    with served(system()) as url:
        api = client(url)
        chunks = list(api.chat.completions.create(model=MODEL, messages=ask(), stream=True))
        reply = api.chat.completions.create(model=MODEL, messages=ask())
    assert chunks and not [c for c in chunks if c.usage] and chunks[-1].choices
    assert reply.usage.total_tokens == reply.model_extra["podium"]["tokens"] > 0


def test_models_retrieve_unknown_routes_and_wrong_methods_answer_openai_errors() -> None:
    with served(system()) as url:
        api = client(url)
        assert api.models.retrieve(MODEL).id == MODEL
        with pytest.raises(openai.NotFoundError) as unknown_model:
            api.models.retrieve("gpt-5")
        with pytest.raises(openai.NotFoundError) as unknown_route:
            api.completions.create(model=MODEL, prompt="6*7?")
        with pytest.raises(openai.NotFoundError):
            api.embeddings.create(model=MODEL, input="6*7?")
        wrong_method = httpx.get(f"{url}/chat/completions")
    assert unknown_model.value.body["code"] == "model_not_found" and MODEL in unknown_model.value.message
    assert unknown_route.value.body["code"] == "unknown_url"
    assert (
        "POST /v1/completions" in unknown_route.value.message
        and "POST /v1/chat/completions" in unknown_route.value.message
    )
    assert wrong_method.status_code == 405 and wrong_method.json()["error"]["code"] == "method_not_allowed"
    assert wrong_method.json()["error"]["type"] == "invalid_request_error"


def test_a_response_past_the_request_time_limit_is_a_504_naming_it(tmp_path) -> None:
    assert ServeConfig().request_timeout_s == 120.0  # `podium serve` applies one by default
    trace = tmp_path / "t.jsonl"
    with served(system(delay=1.0), request_timeout_s=0.3, trace=str(trace), heartbeat_s=0.1) as url:
        with pytest.raises(openai.APIStatusError) as timed_out:
            client(url).chat.completions.create(model=MODEL, messages=ask())
        with pytest.raises(openai.APIError, match="request_timeout_s"):
            list(client(url).chat.completions.create(model=MODEL, messages=ask(), stream=True))
    error = timed_out.value
    assert error.status_code == 504 and error.body["code"] == "request_timeout"
    assert "0.3 s per request" in error.message and error.response.headers["x-should-retry"] == "false"
    assert [t.stop_reason for t in read_trajectories(trace)] == ["cancelled", "cancelled"]


def test_the_default_and_every_shipped_system_answer_within_their_limits() -> None:
    """When its turns run out before an answer, each system still answers: the summarizer writes one (or the
    orchestrator is offered nothing but the answer). `podium serve` without --system runs the default; the
    frameworks example runs it on the embedded model (tests/test_serve_frameworks.py)."""
    shipped = [
        SystemConfig.from_file(path)
        for path in sorted(Path("examples/systems").glob("*.yaml"))
        if "kind: orchestrator" in path.read_text()
    ]
    assert len(shipped) >= 4
    for config in [DEFAULT_SYSTEM, *shipped]:
        run = config.run_config()
        policy = build_policy(run.policy)
        summarizes = policy.summarize_on_stop if run.summarize_on_stop is None else run.summarize_on_stop
        assert summarizes or run.allow == [], config.name
        assert (run.max_turns or policy.max_turns) <= 12, config.name


def test_a_summarizer_writes_a_response_format_answer_under_its_schema() -> None:
    def manager(messages: list) -> str:
        return '<reasoning>done</reasoning><tool_call>{"name": "final_answer", "arguments": {}}</tool_call>'

    parallel = system(script=manager, policy="parallel", summarizer="helper")
    summarizer = SlowScripted(lambda messages: '{"name": "widget", "price": 4.5}', 0.0)
    parallel.pool.backends["helper"] = summarizer
    schema = {"type": "json_schema", "json_schema": {"name": "product", "schema": PRODUCT}}
    with served(parallel) as url:
        reply = client(url).chat.completions.create(model=MODEL, messages=ask(), response_format=schema)
    assert json.loads(reply.choices[0].message.content or "") == {"name": "widget", "price": 4.5}
    [request] = summarizer.sent
    assert request.json_schema is not None and request.json_schema["required"] == ["name", "price"]
    assert "JSON" in request.messages[0].content and "boxed" not in request.messages[0].content

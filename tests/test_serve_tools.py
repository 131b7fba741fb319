"""`podium serve` with client tools, the OpenAI contract: tools in the request join the pool for that request; a call
of one comes back as `tool_calls` with finish_reason `tool_calls`, and the episode goes on when the client sends the
`tool` messages back. Driven by the official openai client and by an agent framework (the OpenAI Agents SDK)."""

import json
import time

import httpx
import openai
import pytest

from podium.core.trajectory import read_trajectories
from tests.serve_fixtures import (
    WEATHER_TOOL,
    ask,
    client,
    orchestrator_of,
    responses,
    served,
    system,
    weather_then_answer,
)

QUESTION = "What is the weather in Paris?"
FUNCTION = WEATHER_TOOL["function"]


def reply_to(message: openai.types.chat.ChatCompletionMessage, content: str) -> list[dict]:
    """The conversation after a tool-calls reply: the reply as clients echo it, and one result per call."""
    results = [{"role": "tool", "tool_call_id": call.id, "content": content} for call in message.tool_calls or []]
    return [*ask(QUESTION), message.model_dump(), *results]


def test_a_client_tool_round_trip_is_one_episode(tmp_path) -> None:
    trace = tmp_path / "t.jsonl"
    with served(system(script=weather_then_answer), trace=str(trace)) as url:
        api = client(url)
        first = api.chat.completions.create(model="tiny-orchestrator", messages=ask(QUESTION), tools=[WEATHER_TOOL])
        assert first.choices[0].finish_reason == "tool_calls" and first.choices[0].message.content is None
        [call] = first.choices[0].message.tool_calls or []
        assert call.function.name == "get_weather" and json.loads(call.function.arguments) == {"city": "Paris"}
        second = api.chat.completions.create(
            model="tiny-orchestrator", messages=reply_to(first.choices[0].message, "sunny, 21 C"), tools=[WEATHER_TOOL]
        )
    assert second.choices[0].message.content == "In Paris: sunny, 21 C" and second.choices[0].finish_reason == "stop"
    [stored] = read_trajectories(trace)
    assert second.model_extra["podium"]["trajectory_id"] == stored.id and stored.stop_reason == "answer"
    [result] = stored.results
    assert (result.call.name, result.status, result.observation) == ("get_weather", "OK", "sunny, 21 C")
    legs = first.usage.model_extra["cost"] + second.usage.model_extra["cost"]
    assert (
        legs == pytest.approx(stored.usage.usd)
        and first.usage.total_tokens + second.usage.total_tokens == stored.usage.tokens
    )


def test_a_streamed_round_trip_hands_out_calls_as_tool_call_deltas() -> None:
    with served(system(script=weather_then_answer)) as url:
        api = client(url)
        chunks = list(
            api.chat.completions.create(
                model="tiny-orchestrator", messages=ask(QUESTION), tools=[WEATHER_TOOL], stream=True
            )
        )
        [delta] = [c.choices[0].delta for c in chunks if c.choices and c.choices[0].delta.tool_calls]
        [call] = delta.tool_calls or []
        assert call.index == 0 and call.function and call.function.name == "get_weather"
        assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == [
            "tool_calls"
        ]
        results = [{"role": "tool", "tool_call_id": call.id, "content": "rain"}]
        echoed = {"role": "assistant", "tool_calls": [call.model_dump(exclude={"index"})]}
        rest = list(
            api.chat.completions.create(
                model="tiny-orchestrator",
                messages=[*ask(QUESTION), echoed, *results],
                tools=[WEATHER_TOOL],
                stream=True,
            )
        )
    assert rest[0].model_extra["podium"]["event"] == "resumed"
    assert "".join(c.choices[0].delta.content or "" for c in rest if c.choices) == "In Paris: rain"
    reasoning = "".join(
        (c.choices[0].delta.model_extra or {}).get("reasoning_content") or "" for c in rest if c.choices
    )
    assert "[call get_weather] OK" in reasoning  # the client's result, as the episode recorded it


def parallel_round(messages: list) -> str:
    """One round: two client calls and a call of the pool's helper; then final_answer."""
    if any("<tool_response" in m.content for m in messages[1:] if m.role == "user"):
        return '<reasoning>enough</reasoning><tool_call>{"name": "final_answer", "arguments": {}}</tool_call>'
    calls = [("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Rome"}), ("helper", {"prompt": "6*7?"})]
    blocks = "".join(f"<tool_call>{json.dumps({'name': n, 'arguments': a})}</tool_call>" for n, a in calls)
    return f"<reasoning>ask in parallel</reasoning>{blocks}"


def test_a_rounds_client_calls_come_out_together_while_pool_calls_run(tmp_path) -> None:
    parallel = system(script=parallel_round, policy="parallel", summarizer="helper")
    with served(parallel, trace=str(tmp_path / "t.jsonl")) as url:
        api = client(url)
        first = api.chat.completions.create(model="tiny-orchestrator", messages=ask(QUESTION), tools=[WEATHER_TOOL])
        calls = first.choices[0].message.tool_calls or []
        assert sorted(json.loads(c.function.arguments)["city"] for c in calls) == ["Paris", "Rome"]
        partial = [*reply_to(first.choices[0].message, "sunny")[:-1]]
        with pytest.raises(openai.BadRequestError, match="no tool message answers"):
            api.chat.completions.create(model="tiny-orchestrator", messages=partial, tools=[WEATHER_TOOL])
        stray = {"role": "tool", "tool_call_id": "call_x", "content": "?"}
        extra = [*reply_to(first.choices[0].message, "sunny"), stray]
        with pytest.raises(openai.BadRequestError, match="call_x"):
            api.chat.completions.create(model="tiny-orchestrator", messages=extra, tools=[WEATHER_TOOL])
        with pytest.raises(openai.BadRequestError) as changed:
            api.chat.completions.create(
                model="tiny-orchestrator", messages=reply_to(first.choices[0].message, "sunny"), tools=[WEATHER_TOOL],
                temperature=1.0,
            )  # fmt: skip
        assert changed.value.body["param"] == "temperature"
        final = api.chat.completions.create(
            model="tiny-orchestrator", messages=reply_to(first.choices[0].message, "sunny"), tools=[WEATHER_TOOL]
        )
    assert final.choices[0].message.content == "42"
    [stored] = read_trajectories(tmp_path / "t.jsonl")
    first_round = stored.turns[0].results
    assert sorted((r.call.name, r.status) for r in first_round) == [("get_weather", "OK")] * 2 + [("helper", "OK")]


def test_expired_waits_cancel_and_late_results_start_over_from_the_messages(tmp_path) -> None:
    def answer_from_the_work(messages: list) -> str:
        if "[result of get_weather] fog" in messages[1].content:
            return "<answer>fog, from the work so far</answer>"
        return weather_then_answer(messages)

    trace = tmp_path / "t.jsonl"
    with served(system(script=answer_from_the_work), trace=str(trace), client_tool_timeout_s=0.3) as url:
        api = client(url)
        first = api.chat.completions.create(model="tiny-orchestrator", messages=ask(QUESTION), tools=[WEATHER_TOOL])
        for _ in range(100):  # until the wait expired and the episode was cancelled (bounded: 10 s)
            if trace.exists() and trace.read_text():
                break
            time.sleep(0.1)
        late = api.chat.completions.create(
            model="tiny-orchestrator", messages=reply_to(first.choices[0].message, "fog"), tools=[WEATHER_TOOL]
        )
    assert late.choices[0].message.content == "fog, from the work so far"
    expired, fresh = read_trajectories(trace)
    assert expired.stop_reason == "cancelled" and fresh.stop_reason == "answer"
    assert "Calls already made for this task" in fresh.messages[1].content


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"tools": [WEATHER_TOOL, WEATHER_TOOL]}, "tools.1.function.name"),
        ({"tools": [{**WEATHER_TOOL, "function": {**FUNCTION, "parameters": {"type": "array"}}}]},
         "tools.0.function.parameters"),
        ({"tools": [WEATHER_TOOL], "tool_choice": {"type": "function", "function": {"name": "get_time"}}},
         "tool_choice"),
    ],
)  # fmt: skip
def test_client_tools_that_cannot_join_the_pool_are_400s(extra: dict, param: str) -> None:
    with served() as url:
        reply = httpx.post(f"{url}/chat/completions", json={"model": "tiny-orchestrator", "messages": ask(), **extra})
    assert reply.status_code == 400 and reply.json()["error"]["param"] == param, reply.text


def named(name: str, description: str = "The client's own.") -> dict:
    return {"type": "function", "function": {"name": name, "description": description, "parameters": {}}}


def test_a_client_tool_named_like_a_pool_or_policy_name_is_renamed_for_the_orchestrator() -> None:
    """The pool's `helper` and the parallel policy's `final_answer` keep their names; the client's tools of those
    names join as `client_helper` and `client_final_answer`, and the client gets their calls under its names."""

    def call_the_clients(messages: list) -> str:
        calls = [{"name": "client_helper", "arguments": {}}, {"name": "client_final_answer", "arguments": {}}]
        return "<reasoning>r</reasoning>" + "".join(f"<tool_call>{json.dumps(c)}</tool_call>" for c in calls)

    parallel = system(script=call_the_clients, policy="parallel", summarizer="helper")
    with served(parallel) as url:
        reply = client(url).chat.completions.create(
            model="tiny-orchestrator", messages=ask(), tools=[named("helper"), named("final_answer")]
        )
    assert [c.function.name for c in reply.choices[0].message.tool_calls or []] == ["helper", "final_answer"]
    prompt = orchestrator_of(parallel).sent[0].messages[0].content
    assert all(f'"name": "{name}"' in prompt for name in ("helper", "client_helper", "client_final_answer"))


def required_then_answer(messages: list) -> str:
    """An orchestrator that answers unless told that this turn must call the client's tool, and answers with the
    client's result."""
    seen = [observation for tool, _, observation in responses(messages) if tool == "get_weather"]
    if "(This turn: call" in messages[-1].content and "get_weather" in messages[-1].content:
        return '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
    return f"<answer>{seen[-1] if seen else 'no idea'}</answer>"


@pytest.mark.parametrize("choice", ["required", {"type": "function", "function": {"name": "get_weather"}}])
def test_tool_choice_required_or_named_makes_the_next_action_that_call(tmp_path, choice) -> None:
    trace = tmp_path / "t.jsonl"
    with served(system(script=required_then_answer), trace=str(trace)) as url:
        api = client(url)
        tools = [WEATHER_TOOL, named("get_time")]
        first = api.chat.completions.create(
            model="tiny-orchestrator", messages=ask(QUESTION), tools=tools, tool_choice=choice
        )
        [call] = first.choices[0].message.tool_calls or []
        assert call.function.name == "get_weather" and first.choices[0].finish_reason == "tool_calls"
        second = api.chat.completions.create(  # each request sets its own tool_choice: auto lets it answer
            model="tiny-orchestrator", messages=reply_to(first.choices[0].message, "sunny"), tools=tools,
            tool_choice="auto",
        )  # fmt: skip
    assert second.choices[0].message.content == "sunny"
    [stored] = read_trajectories(trace)
    note = "(This turn: call get_weather; do not answer.)" if choice != "required" else "(This turn: call one of"
    assert note in stored.messages[1].content and "(This turn" not in stored.messages[-2].content


def test_an_episode_that_does_not_follow_tool_choice_is_an_error_not_an_answer() -> None:
    def always_answers(messages: list) -> str:
        return "<answer>42</answer>"

    with served(system(script=always_answers)) as url, pytest.raises(openai.InternalServerError) as unfollowed:
        client(url).chat.completions.create(
            model="tiny-orchestrator", messages=ask(), tools=[WEATHER_TOOL], tool_choice="required"
        )
    error = unfollowed.value
    assert error.status_code == 502 and error.body["code"] == "tool_choice_not_followed"
    assert error.response.headers["x-should-retry"] == "false" and "get_weather" in error.message


def test_tool_choice_none_on_a_resumed_episode_keeps_its_next_action_off_the_client_tools(tmp_path) -> None:
    def weather_twice(messages: list) -> str:
        if "(This turn: do not call get_weather.)" in messages[-1].content:
            return "<answer>done</answer>"
        return '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'

    with served(system(script=weather_twice), trace=str(tmp_path / "t.jsonl")) as url:
        api = client(url)
        first = api.chat.completions.create(model="tiny-orchestrator", messages=ask(QUESTION), tools=[WEATHER_TOOL])
        second = api.chat.completions.create(
            model="tiny-orchestrator", messages=reply_to(first.choices[0].message, "sunny"), tools=[WEATHER_TOOL],
            tool_choice="none",
        )  # fmt: skip
    assert second.choices[0].message.content == "done"


def test_policies_without_tool_calls_refuse_client_tools_and_tool_choice_none_hides_them() -> None:
    served_system = system()
    with served(system("planner", policy="dag"), served_system) as url:
        with pytest.raises(openai.BadRequestError, match="dag policy"):
            client(url).chat.completions.create(model="planner", messages=ask(), tools=[WEATHER_TOOL])
        with pytest.raises(openai.BadRequestError, match="dag policy of planner cannot honour tool_choice") as refused:
            client(url).chat.completions.create(
                model="planner", messages=ask(), tools=[WEATHER_TOOL], tool_choice="required"
            )
        assert refused.value.body["param"] == "tool_choice"
        reply = client(url).chat.completions.create(
            model="tiny-orchestrator", messages=ask(), tools=[WEATHER_TOOL], tool_choice="none"
        )
    assert reply.choices[0].message.content == "42"
    assert "get_weather" not in orchestrator_of(served_system).sent[0].messages[0].content


def test_a_policy_without_tool_calls_answers_a_plain_request() -> None:
    planner = system("planner", policy="dag", script=lambda messages: "<final_answer>42</final_answer>")
    with served(planner) as url:
        reply = client(url).chat.completions.create(model="planner", messages=ask())
    assert reply.choices[0].message.content == "42" and reply.choices[0].finish_reason == "stop"


def test_a_client_call_failing_its_schema_is_a_parse_error_not_handed_out(tmp_path) -> None:
    def bad_then_answer(messages: list) -> str:
        if len(messages) > 2:
            return "<answer>gave up</answer>"
        return '<tool_call>{"name": "get_weather", "arguments": {"town": "Paris"}}</tool_call>'

    with served(system(script=bad_then_answer), trace=str(tmp_path / "t.jsonl")) as url:
        reply = client(url).chat.completions.create(model="tiny-orchestrator", messages=ask(), tools=[WEATHER_TOOL])
    assert reply.choices[0].finish_reason == "stop" and reply.choices[0].message.content == "gave up"
    [stored] = read_trajectories(tmp_path / "t.jsonl")
    assert stored.results[0].status == "PARSE_ERR" and "fail its schema" in (stored.results[0].reason or "")


def test_an_agent_framework_uses_the_orchestrator_as_its_model_with_a_client_tool() -> None:
    import agents  # the OpenAI Agents SDK (the dev extra)

    agents.set_tracing_disabled(True)
    asked: list[str] = []

    @agents.function_tool
    def get_weather(city: str) -> str:
        """The weather in a city, today.

        Args:
            city: The city.
        """
        asked.append(city)
        return "sunny, 21 C"

    with served(system(script=weather_then_answer)) as url:
        model = agents.OpenAIChatCompletionsModel(
            model="tiny-orchestrator", openai_client=openai.AsyncOpenAI(base_url=url, api_key="none", max_retries=0)
        )
        assistant = agents.Agent(name="assistant", instructions="Use your tools.", model=model, tools=[get_weather])
        result = agents.Runner.run_sync(assistant, QUESTION)
    assert asked == ["Paris"] and result.final_output == "In Paris: sunny, 21 C"

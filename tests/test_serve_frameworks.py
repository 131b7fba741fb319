"""`podium serve` as the model of agent frameworks, driven by the frameworks themselves against scripted
orchestrators: smolagents' ToolCallingAgent (OpenAIServerModel: `tool_choice: required` on every step, its own
`final_answer` tool) runs to a final answer; LangChain's `bind_tools` with `tool_choice` "any" and a tool's name,
and `with_structured_output` by json_schema, function calling and JSON mode; LiteLLM's streaming `completion`
and LangChain's `stream` with the usage counted once. The same clients against the embedded model:
`examples/serve_frameworks.py`, run here in its quick mode."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import BaseModel, Field

from podium.core.messages import Message
from podium.core.trajectory import read_trajectories
from tests.serve_fixtures import ask, served, system

ROOT = Path(__file__).resolve().parent.parent
MODEL = "tiny-orchestrator"


def call(tool: str, /, **arguments: object) -> str:
    return f"<tool_call>{json.dumps({'name': tool, 'arguments': arguments})}</tool_call>"


def weather_agent(messages: list[Message]) -> str:
    """What a model driving smolagents writes: the weather tool first, then final_answer with what it said."""
    seen = re.findall(r"Observation:\s*(.+)", messages[-1].content)
    return call("final_answer", answer=f"In Paris: {seen[-1].strip()}") if seen else call("get_weather", city="Paris")


def test_smolagents_tool_calling_agent_runs_to_its_final_answer(tmp_path) -> None:
    from smolagents import OpenAIServerModel, ToolCallingAgent, tool

    asked: list[str] = []

    @tool
    def get_weather(city: str) -> str:
        """The weather in a city, today.

        Args:
            city: The city.
        """
        asked.append(city)
        return "sunny, 21 C"

    trace, log = tmp_path / "t.jsonl", tmp_path / "requests.jsonl"
    with served(system(script=weather_agent), trace=str(trace), request_log=str(log)) as url:
        model = OpenAIServerModel(model_id=MODEL, api_base=url, api_key="none")
        agent = ToolCallingAgent(tools=[get_weather], model=model, max_steps=4, verbosity_level=0)
        answer = agent.run("What is the weather in Paris?")
    assert asked == ["Paris"] and answer == "In Paris: sunny, 21 C"
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert [r["outcome"] for r in records if r["event"] == "request"] == ["tool_calls", "tool_calls"]
    # smolagents writes the call it ran into an assistant message and the result into a user message: the next
    # step is a new episode, and the episode that waited for that result is cancelled as superseded
    episode = next(r for r in records if r["event"] == "episode")
    assert (episode["stop_reason"], episode["cancelled_because"]) == ("cancelled", "superseded")
    first = next(iter(read_trajectories(trace)))
    assert first.messages[1].content.endswith("(This turn: call one of final_answer, get_weather; do not answer.)")


class Product(BaseModel):
    """A product and its price."""

    name: str = Field(description="The product's name.")
    price: float


def langchain_replies(messages: list[Message]) -> str:
    """A prompted orchestrator that does what each request asks: the tool or the schema it names, JSON when the
    task asks for JSON, else an answer."""
    last = messages[-1].content
    if "(This turn: call" in last and "get_weather" in last:
        return call("get_weather", city="Paris")
    if "(This turn: call Product" in last:
        return call("Product", name="widget", price=4.5)
    if "JSON" in last:
        return '<answer>```json\n{"name": "widget", "price": 4.5}\n```</answer>'
    return "<answer>42</answer>"


def test_langchain_binds_tools_with_a_tool_choice_and_gets_structured_output() -> None:
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI

    @tool
    def get_weather(city: str) -> str:
        """The weather in a city, today."""
        return "sunny"

    @tool
    def get_time(city: str) -> str:
        """The time in a city, now."""
        return "noon"

    with served(system(script=langchain_replies)) as url:
        chat = ChatOpenAI(model=MODEL, base_url=url, api_key="none", max_retries=0)
        assert chat.invoke("What is 6*7?").content == "42"
        for choice in ("any", "get_weather"):  # "any" is sent as "required"; a name as a named function
            reply = chat.bind_tools([get_weather, get_time], tool_choice=choice).invoke("Weather in Paris?")
            assert [(c["name"], c["args"]) for c in reply.tool_calls] == [("get_weather", {"city": "Paris"})]
        for method in ("json_schema", "function_calling", "json_mode"):
            structured = chat.with_structured_output(Product, method=method)
            assert structured.invoke("A widget costs 4.5 USD. Reply in JSON.") == Product(name="widget", price=4.5)


def test_litellm_and_langchain_count_the_streamed_usage_once(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # the cost map it would fetch is not needed
    import litellm
    from langchain_openai import ChatOpenAI

    trace = tmp_path / "t.jsonl"
    with served(system(), trace=str(trace)) as url:
        chunks = list(
            litellm.completion(
                model=f"openai/{MODEL}", api_base=url, api_key="none", messages=ask(), stream=True,
                stream_options={"include_usage": True},
            )
        )  # fmt: skip
        plain = list(
            litellm.completion(model=f"openai/{MODEL}", api_base=url, api_key="none", messages=ask(), stream=True)
        )
        chat = ChatOpenAI(model=MODEL, base_url=url, api_key="none", max_retries=0, stream_usage=True)
        streamed = list(chat.stream("What is 6*7?"))
    tokens = [trajectory.usage.tokens for trajectory in read_trajectories(trace)]
    carrying = [c for c in chunks if getattr(c, "usage", None)]
    assert len(carrying) == 1 and carrying[0] is chunks[-1] and not chunks[-1].choices
    built = litellm.stream_chunk_builder(chunks, messages=ask())
    assert built.choices[0].message.content == "42" and built.usage.total_tokens == tokens[0]
    assert not [c for c in plain if getattr(c, "usage", None)]  # without include_usage, no chunk carries it
    merged = sum(streamed[1:], streamed[0])  # LangChain adds up the usage of every chunk
    assert merged.content == "42" and merged.usage_metadata["total_tokens"] == tokens[2] > 0


@pytest.mark.slow
def test_the_frameworks_example_answers_with_the_embedded_model(tmp_path) -> None:
    command = [sys.executable, str(ROOT / "examples/serve_frameworks.py"), "--quick"]
    environment = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    completed = subprocess.run(command, capture_output=True, text=True, timeout=900, cwd=tmp_path, env=environment)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    results = {row["client"]: row for row in map(json.loads, completed.stdout.splitlines()) if row.get("client")}
    assert set(results) == {"langchain.invoke", "langchain.structured", "smolagents", "litellm.stream"}
    assert all(row["ok"] for row in results.values()), results

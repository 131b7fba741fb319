"""Served orchestrators for the `podium serve` tests: scripted orchestrators over a scripted pool, served on
127.0.0.1 from a background thread, and the official openai client pointed at them."""

import asyncio
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import openai

from podium.backends.base import Completion, GenerationRequest
from podium.backends.scripted import ScriptedBackend
from podium.core.messages import Message
from podium.costs.prices import ModelPrice
from podium.pool.config import PoolConfig, WorkerConfig
from podium.pool.pool import build_pool
from podium.runtime.config import RunConfig
from podium.serve.http import app_in_thread
from podium.serve.orchestrator_server import ServeConfig, create_orchestrator_app
from podium.solve.system import System

CALL = '<tool_call>{"name": "helper", "arguments": {"prompt": "What is 6*7?"}}</tool_call>'
ANSWER = "<answer>42</answer>"
PRICE = ModelPrice(input_per_mtok=100.0, output_per_mtok=200.0)
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city, today.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
            "additionalProperties": False,
        },
    },
}
_RESPONSE = re.compile(r'<tool_response name="([^"]+)"[^>]*status="([A-Z_]+)">\n(.*?)\n</tool_response>', re.S)

Script = Callable[[list[Message]], str]


def responses(messages: list[Message]) -> list[tuple[str, str, str]]:
    """(tool, status, observation) of every tool response the orchestrator has read."""
    return [match.groups() for m in messages[1:] if m.role == "user" for match in _RESPONSE.finditer(m.content)]


def helper_then_answer(messages: list[Message]) -> str:
    """Call the helper first; answer once its observation is in the conversation."""
    return ANSWER if responses(messages) else CALL


def weather_then_answer(messages: list[Message]) -> str:
    """Call the client's get_weather for Paris; then answer with what it returned."""
    seen = [observation for tool, _, observation in responses(messages) if tool == "get_weather"]
    if seen:
        return f"<answer>In Paris: {seen[-1]}</answer>"
    return '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'


class SlowScripted(ScriptedBackend):
    """A scripted orchestrator, each generation taking ``delay`` seconds without blocking the loop; it keeps every
    request it was sent."""

    def __init__(self, script: Script, delay: float) -> None:
        super().__init__([script], model="orchestrator-model", repeat_last=True, price=PRICE)
        self.delay = delay
        self.sent: list[GenerationRequest] = []

    async def _complete(self, request: GenerationRequest) -> Completion:
        self.sent.append(request)
        await asyncio.sleep(self.delay)
        return await super()._complete(request)


def system(
    name: str = "tiny-orchestrator", delay: float = 0.0, script: Script = helper_then_answer, **config: object
) -> System:
    """A served orchestrator over a scripted pool: ``orchestrator`` (its backend replaced by ``script``) and
    ``helper``, a worker offered as a tool that always answers 42."""
    workers = [
        WorkerConfig(name="orchestrator", backend="scripted", model="orchestrator-model", replies=["unused"]),
        WorkerConfig(name="helper", backend="scripted", model="helper-model", replies=["42"], price=PRICE),
    ]
    pool = build_pool(PoolConfig(workers=workers, tools=[]))
    pool.backends["orchestrator"] = SlowScripted(script, delay)
    settings = RunConfig(orchestrator="orchestrator", deny=["orchestrator"], max_turns=4, **config)  # type: ignore[arg-type]
    return System(name, pool, settings)


def orchestrator_of(served_system: System) -> SlowScripted:
    backend = served_system.pool.backends["orchestrator"]
    assert isinstance(backend, SlowScripted)
    return backend


@contextmanager
def served(*systems: System, shadows: dict[str, System] | None = None, **config: object) -> Iterator[str]:
    app = create_orchestrator_app(list(systems) or [system()], ServeConfig(**config), shadows)  # type: ignore[arg-type]
    with app_in_thread(app) as url:
        yield url


def client(url: str, **options: object) -> openai.OpenAI:
    return openai.OpenAI(base_url=url, api_key=str(options.pop("api_key", "none")), max_retries=0, **options)  # type: ignore[arg-type]


def ask(question: str = "What is 6*7?") -> list[dict[str, str]]:
    return [{"role": "user", "content": question}]

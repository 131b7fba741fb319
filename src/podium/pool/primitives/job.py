"""One routed (worker, primitive) call in progress (:class:`Job`), on the pool's kit
(:class:`~podium.pool.kit.PoolKit`): the worker's generations with the primitive's templates, sandbox runs priced
like the pool's code tools, and the accounting of all of it."""

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from podium.backends.base import ChatBackend
from podium.core.calls import Status
from podium.pool.kit import PoolKit, Spent
from podium.pool.primitives.templates import inputs_block, template
from podium.pool.tool import ToolOutput
from podium.pool.workers import ask
from podium.sandbox import SandboxRun

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


@dataclass
class Job:
    """One routed (worker, primitive) call in progress."""

    kit: PoolKit
    primitive: str
    label: str
    """The worker's shown label."""
    instruction: str
    """The route's instruction."""
    inputs: str = ""
    """Results of the subtasks this one depends on."""
    spent: Spent = field(default_factory=Spent)
    templates: list[str] = field(default_factory=list)
    """Tags of the templates used, for the result."""

    @property
    def backend(self) -> ChatBackend:
        return self.kit.backends[self.label]

    async def generate(
        self, name: str, *, json_schema: dict[str, Any] | None = None, max_tokens: int | None = None, **fields: object
    ) -> ToolOutput:
        """One generation of the routed worker with template ``name`` (instruction and inputs filled in)."""
        chosen = template(name)
        self.templates.append(chosen.tag)
        messages = chosen.messages(instruction=self.instruction, inputs=inputs_block(self.inputs), **fields)
        budget = self.kit.workers[self.label].max_tokens
        options: dict[str, Any] = {"json_schema": json_schema} if json_schema is not None else {}
        output = await ask(self.backend, messages, max_tokens=min(max_tokens or budget, budget), **options)
        self.spent.add(output)
        return output

    async def sandboxed(self, code: str, files: Mapping[str, str | bytes] | None = None) -> SandboxRun:
        """Run ``code`` in the pool's sandbox, charged for the time it took at the primitive's sandbox price."""
        run = await self.kit.sandbox.run_python(code, files=files)
        self.spent.usd += self.kit.sandbox_price(self.primitive).cost(run.seconds)
        return run

    def done(self, value: dict[str, Any], observation: str) -> ToolOutput:
        """A successful result: ``value`` with the primitive and its templates, and the text for the orchestrator."""
        return self.spent.output(self._stamped(value), self.backend.model, observation=observation)

    def failed(
        self, status: Status, reason: str, value: dict[str, Any] | None = None, observation: str | None = None
    ) -> ToolOutput:
        """A failed or refused call with its reason (and what was produced before it failed, if anything)."""
        stamped = self._stamped(value) if value is not None else None
        return self.spent.output(stamped, self.backend.model, status, reason, observation=observation or reason)

    def _stamped(self, value: dict[str, Any]) -> dict[str, Any]:
        return {"primitive": self.primitive, "templates": list(self.templates), **value}


def json_reply(text: str) -> Any:
    """The JSON value in a worker's reply: the whole reply, else a fenced block, else the first ``{…}`` span;
    None when there is none. (Constrained decoding returns bare JSON; other backends may wrap it.)"""
    candidates = [text, *_FENCE.findall(text)]
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        candidates.append(text[start : end + 1])
    for candidate in candidates:
        try:
            return json.loads(candidate)
        except json.JSONDecodeError:
            continue
    return None


def clip(text: str, limit: int) -> tuple[str, bool]:
    """``text`` cut to ``limit`` characters, and whether it was cut."""
    return (text, False) if len(text) <= limit else (text[:limit], True)

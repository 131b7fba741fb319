"""Chat completion requests addressed to an orchestrator, as the official OpenAI clients send them.

Every field is either honoured or refused with a 400 naming it; none is silently ignored:

* ``temperature``, ``top_p`` and ``seed`` drive the orchestrator's sampling (turn t samples with ``seed + t``).
* ``max_tokens`` (or ``max_completion_tokens``) is the answer's budget: no generation that can write the answer
  (an orchestrator turn, the summarizer) takes more tokens. A budget too small for one action of the policy is
  a 400 naming the field.
* ``stop`` cuts the answer before the first stop string (tool calls are never cut).
* ``tools`` join the pool for this request as client tools (one named like a tool of the pool or the policy's
  ``final_answer`` is renamed for the orchestrator and handed back under its own name); ``tool_choice``: ``auto``
  (default) lets the orchestrator call them or not, ``none`` does not let it, ``required`` makes its next action a
  call of them (no answer, no call of the pool's own tools), ``{"type": "function", "function": {"name": …}}`` a
  call of that one; each request of an episode sets it for its own response. ``parallel_tool_calls: false``
  allows one call per round.
* ``response_format`` ``json_object`` or ``json_schema``: the answer is that JSON (:mod:`podium.serve.answer_format`).
* ``frequency_penalty``, ``presence_penalty``, ``logprobs``, ``top_logprobs``, ``logit_bias`` and ``store`` are
  accepted only at their neutral values; ``n`` only as 1. ``user`` and ``metadata`` are recorded.
* Podium's own fields go in an extra ``podium`` object (:class:`PodiumOptions`): limits, a preference, and the
  task's kind and gold answer, with which the episode is graded as it ends.
"""

from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt, field_validator, model_validator

from podium.core.budget import Budget
from podium.core.calls import ToolSpec
from podium.core.preference import Preference
from podium.runtime.config import RunConfig
from podium.serve.answer_format import ResponseFormat
from podium.serve.http import TextPart, invalid_request
from podium.solve.served import GRADABLE, GradableKind


class PodiumOptions(BaseModel):
    """Per-request settings (the ``podium`` field of a request). Limits can only tighten the served
    orchestrator's own: each one applied is the smaller of the request's and the system config's."""

    model_config = ConfigDict(extra="forbid")
    max_usd: PositiveFloat | None = None
    """USD cap of this episode."""
    max_turns: PositiveInt | None = None
    """Most orchestrator turns."""
    max_seconds: PositiveFloat | None = None
    """Wall-clock deadline of the episode (time spent waiting for client tools counts)."""
    max_total_tokens: PositiveInt | None = None
    """Most tokens of the episode, orchestrator and workers."""
    preference: str | Preference | None = None
    """The user's preference: an instruction appended to the task, or ``{instruction, weights}``."""
    deny: list[str] = Field(default_factory=list)
    """Tools, roles and workers this episode may not use (added to the config's deny list)."""
    seed: int | None = None
    """Seed of the blind worker labels."""
    return_trajectory: bool = False
    """Include the whole trajectory in the response (in the final chunk when streaming)."""
    verifier: GradableKind | None = None
    """The task's kind (``math``, ``qa``, ``multiple_choice``): the question gets that kind's answer-format
    instruction and the answer is extracted from the reply, as ``podium eval`` does with a task of that kind."""
    gold: str | list[str] | None = None
    """The task's reference answer (a list: QA aliases; needs ``verifier``): the answer is graded against it as
    the episode ends, and the grade is recorded with the episode and returned in the response's ``podium``."""

    @model_validator(mode="after")
    def _gold_has_a_kind(self) -> Self:
        if self.gold is not None and self.verifier is None:
            raise ValueError(f"gold needs verifier, the task's kind that grades it: one of {list(GRADABLE)}")
        return self


NO_PARAMETERS: dict[str, Any] = {"type": "object", "properties": {}}


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    include_usage: bool = False


class FunctionDefinition(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_.\-]{0,63}$")
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: dict(NO_PARAMETERS))
    """The arguments' JSON schema; omitted or ``{}``: none."""
    strict: bool | None = None

    @field_validator("parameters")
    @classmethod
    def _none_when_empty(cls, parameters: dict[str, Any]) -> dict[str, Any]:
        return parameters or dict(NO_PARAMETERS)


class ToolDefinition(BaseModel):
    """A client tool, as OpenAI's ``tools`` list gives it."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["function"]
    function: FunctionDefinition

    def spec(self) -> ToolSpec:
        function = self.function
        description = function.description.strip() or f"The client's tool {function.name}."
        return ToolSpec(name=function.name, description=description, parameters=function.parameters)


class FunctionName(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str


class NamedToolChoice(BaseModel):
    """A ``tool_choice`` that names the client tool to call."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["function"]
    function: FunctionName


class CalledFunction(BaseModel):
    model_config = ConfigDict(extra="ignore")
    name: str
    arguments: str


class MessageToolCall(BaseModel):
    """A tool call of an assistant message, as clients send earlier replies back."""

    model_config = ConfigDict(extra="ignore")
    id: str
    type: Literal["function"] = "function"
    function: CalledFunction


class ConversationMessage(BaseModel):
    """One message of the conversation; content is a string or a list of text parts. Fields clients echo back
    from earlier replies (``refusal``, ``annotations``…) are ignored."""

    model_config = ConfigDict(extra="ignore")
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[TextPart] | None = None
    name: str | None = None
    tool_calls: list[MessageToolCall] | None = None
    tool_call_id: str | None = None

    @property
    def text(self) -> str:
        """The content as one string (text parts joined)."""
        if isinstance(self.content, list):
            return "".join(part.text for part in self.content)
        return self.content or ""


class EpisodeRequest(BaseModel):
    """An OpenAI chat completion request addressed to an orchestrator."""

    model_config = ConfigDict(extra="forbid")
    model: str
    messages: list[ConversationMessage] = Field(min_length=1)
    stream: bool = False
    stream_options: StreamOptions | None = None
    n: Literal[1] = 1
    tools: list[ToolDefinition] | None = None
    tool_choice: Literal["auto", "none", "required"] | NamedToolChoice | None = None
    parallel_tool_calls: bool | None = None
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    seed: int | None = None
    max_tokens: PositiveInt | None = None
    max_completion_tokens: PositiveInt | None = None
    stop: str | list[str] | None = None
    frequency_penalty: Literal[0] | None = None
    presence_penalty: Literal[0] | None = None
    logprobs: Literal[False] | None = None
    top_logprobs: Literal[0] | None = None
    logit_bias: dict[str, Literal[0]] | None = None
    response_format: ResponseFormat | None = None
    store: Literal[False] | None = None
    user: str | None = None
    metadata: dict[str, str] | None = None
    podium: PodiumOptions = Field(default_factory=PodiumOptions)

    @field_validator("tool_choice", mode="before")
    @classmethod
    def _known_choice(cls, value: Any) -> Any:
        """A readable refusal of a ``tool_choice`` of another kind (``allowed_tools``, ``custom``…)."""
        if value in (None, "auto", "none", "required") or (isinstance(value, dict) and value.get("type") == "function"):
            return value
        raise ValueError('takes "auto", "none", "required" or {"type": "function", "function": {"name": …}}')

    def client_tools(self) -> list[ToolSpec]:
        """The client tools offered to a new episode (none with ``tool_choice: none``), names unique; a
        ``tool_choice`` that asks for a call names one of them."""
        specs = [tool.spec() for tool in self.tools or []]
        names = [spec.name for spec in specs]
        for index, name in enumerate(names):
            if name in names[:index]:
                raise invalid_request(f"two client tools are named '{name}'", f"tools.{index}.function.name")
        called = self.called_tool()
        if self.tool_choice == "required" and not names:
            raise invalid_request("tool_choice 'required' needs tools to call", "tool_choice")
        if called is not None and called not in names:
            raise invalid_request(f"tool_choice names '{called}', which is not among the tools {names}", "tool_choice")
        return [] if self.tool_choice == "none" else specs

    def called_tool(self) -> str | None:
        """The client tool a named ``tool_choice`` asks for."""
        return self.tool_choice.function.name if isinstance(self.tool_choice, NamedToolChoice) else None

    def requires_call(self) -> bool:
        """Whether ``tool_choice`` asks for a call of a client tool (``required`` or a named one)."""
        return self.tool_choice == "required" or self.called_tool() is not None

    def answer_budget(self) -> int | None:
        """The answer's token budget (``max_completion_tokens`` or ``max_tokens``)."""
        both = (self.max_tokens, self.max_completion_tokens)
        if None not in both and both[0] != both[1]:
            raise invalid_request("max_tokens and max_completion_tokens differ; give one", "max_completion_tokens")
        return self.max_completion_tokens or self.max_tokens

    def stop_strings(self) -> list[str]:
        stops = [self.stop] if isinstance(self.stop, str) else list(self.stop or [])
        if len(stops) > 4 or any(not stop for stop in stops):
            raise invalid_request("stop takes up to 4 non-empty strings", "stop")
        return stops

    def episode_settings(self) -> dict[str, Any]:
        """The fields that shape the episode (a request resuming it must send the same; ``tool_choice`` is each
        response's own)."""
        return self.model_dump(
            exclude={"messages", "stream", "stream_options", "stop", "user", "metadata", "tool_choice"}
        )

    def answer_schema(self) -> dict[str, Any] | None:
        """The JSON schema of the answer that ``response_format`` asks for (``None``: free text)."""
        return None if self.response_format is None else self.response_format.answer_schema()

    def param_of(self, error: Exception) -> str:
        """The field a config error of this request's episode points at: the answer budget when the error is
        about turn tokens and the request set one, else the ``podium`` options."""
        if "max_tokens" in str(error) and self.answer_budget() is not None:
            return "max_completion_tokens" if self.max_completion_tokens else "max_tokens"
        return "podium"

    def preference(self) -> Preference | None:
        chosen = self.podium.preference
        return Preference(instruction=chosen) if isinstance(chosen, str) else chosen


MAX_SEED = 2**63 - 1
"""Largest seed passed on to the orchestrator's backend."""


def request_config(base: RunConfig, budget: Budget, request: EpisodeRequest, max_usd: float | None) -> RunConfig:
    """The run config of one request: ``base`` with the request's limits where they are tighter than the
    effective ``budget`` of ``base`` (``max_usd``: a further cap, e.g. what an API key has left today), its deny
    list added and its sampling parameters applied."""
    options = request.podium
    update: dict[str, Any] = {"deny": [*base.deny, *options.deny]}
    limits = (
        ("max_episode_usd", budget.max_usd, (options.max_usd, max_usd)),
        ("max_turns", budget.max_turns, (options.max_turns,)),
        ("max_seconds", budget.max_seconds, (options.max_seconds,)),
        ("max_total_tokens", budget.max_tokens, (options.max_total_tokens,)),
    )
    for field, limit, asked in limits:
        tighter = [value for value in asked if value is not None]
        if tighter:
            update[field] = min([*tighter, *([] if limit is None else [limit])])
    if request.temperature is not None:
        update["temperature"] = request.temperature
    if request.top_p is not None:
        update["top_p"] = request.top_p
    if request.seed is not None:
        if abs(request.seed) > MAX_SEED:
            raise invalid_request(f"seed must lie within ±{MAX_SEED}", "seed")
        update["sampling_seed"] = request.seed
    answer_budget = request.answer_budget()
    if answer_budget is not None:
        update["max_tokens"] = min(answer_budget, base.max_tokens)
        update["summarizer_max_tokens"] = min(answer_budget, base.summarizer_max_tokens or answer_budget)
    if request.parallel_tool_calls is False:
        update["max_calls_per_round"] = 1
    config = base.model_copy(update=update)
    problem = config.sampling_problem()
    if problem is not None:  # the system decides by a threshold: a sampling temperature would be ignored
        raise invalid_request(f"this orchestrator's {problem}", "temperature")
    return config

"""What a policy is. A policy renders the episode into the orchestrator's prompt, parses the orchestrator's
output into actions and carries its actions out through a :class:`Dispatcher` that the runtime provides; the
runtime does everything else (statuses, accounting, budgets, recording, stopping).

Parsing never raises anything but :class:`ActionParseError`, whose message is shown to the orchestrator.
"""

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol

from podium.backends.grammar import Grammar, Limits, fit
from podium.core.calls import Refusal, Status, ToolCall, ToolResult, ToolSpec
from podium.core.trajectory import Turn
from podium.errors import PodiumError


class ActionParseError(PodiumError, ValueError):
    """The orchestrator's output cannot be turned into actions; the message says what was wrong."""


@dataclass(frozen=True)
class InvalidCall:
    """A call block that could not be read (bad JSON, no name): it becomes a PARSE_ERR result."""

    text: str
    """The block as written."""
    reason: str
    """What was wrong with it."""


class Action:
    """What one orchestrator output asks for. Answers and rounds of calls are defined here; a policy with more
    actions defines them beside itself (the parallel policy's summary, the DAG policy's plan)."""


@dataclass(frozen=True)
class Answer(Action):
    """The episode's final answer."""

    text: str


@dataclass(frozen=True)
class Calls(Action):
    """Tool calls to run this turn (concurrently when there are several)."""

    calls: list[ToolCall]
    invalid: list[InvalidCall] = field(default_factory=list)


@dataclass(frozen=True)
class PoolView:
    """What the orchestrator is allowed to know about the pool in this episode."""

    tools: list[ToolSpec]
    """The tools it may call (after allow/deny lists)."""
    table: str
    """The pool table (names or blind labels, descriptions, prices, primitives) for the system prompt."""
    workers: list[str] = field(default_factory=list)
    """Worker labels as shown."""
    admissible: frozenset[tuple[str, str]] = frozenset()
    """Admissible (worker label, primitive) pairs."""
    may_answer: bool = True
    """Whether the next action may answer (not while a :class:`ToolChoice` requires a call)."""
    answer_schema: dict[str, Any] | None = None
    """The JSON schema an answer must match (a served request's ``response_format``); ``None``: free text. A
    policy whose orchestrator writes the answer decodes it under this schema where it decodes under a grammar."""


@dataclass(frozen=True)
class ToolChoice:
    """What the orchestrator's next action may be, as OpenAI's ``tool_choice`` restricts a model's reply:
    ``required``, a round of calls of ``tools`` only (no answer); ``none``, no call of ``tools``. Checked on every
    output (:meth:`problem`) and, where the orchestrator decodes under a grammar, built into it
    (:meth:`restrict`)."""

    mode: Literal["required", "none"]
    tools: frozenset[str]
    """The tools concerned (a served client's, by the names the orchestrator sees)."""

    def restrict(self, view: PoolView) -> PoolView:
        """``view`` with only the tools the next action may call (and no answer when a call is required)."""
        if self.mode == "required":
            return replace(view, tools=[t for t in view.tools if t.name in self.tools], may_answer=False)
        return replace(view, tools=[t for t in view.tools if t.name not in self.tools])

    def problem(self, action: Action) -> str | None:
        """Why ``action`` breaks this choice (``None``: it does not)."""
        names = sorted(self.tools)
        called = [call.name for call in action.calls] if isinstance(action, Calls) else []
        if self.mode == "required" and (not isinstance(action, Calls) or set(called) - self.tools):
            return f"this turn must call {_one_of(names)} and nothing else (the client requires a call)"
        if self.mode == "none" and set(called) & self.tools:
            return f"this turn may not call {_one_of(names)} (the client allows no call of them now)"
        return None

    def instruction(self) -> str:
        """What the orchestrator is told before the turn."""
        names = _one_of(sorted(self.tools))
        if self.mode == "required":
            return f"(This turn: call {names}; do not answer.)"
        return f"(This turn: do not call {names}.)"


def _one_of(names: list[str]) -> str:
    return names[0] if len(names) == 1 else "one of " + ", ".join(names)


@dataclass(frozen=True)
class Outcome:
    """What carrying out an action produced: the calls' results, and the final answer if the action gave one."""

    results: list[ToolResult] = field(default_factory=list)
    answer: str | None = None


Toolset = Literal["tools", "summarizer", "primitives"]
"""What a call runs on: the tools offered to the orchestrator in this episode, the pool's summarizer role
(``final_answer``), or the pool's primitive tools (a routed (worker, primitive) pair of a DAG node)."""


class Dispatcher(Protocol):
    """What the runtime lends a policy to carry out its actions: calls that are budgeted, timed and recorded."""

    async def run(self, calls: Sequence[ToolCall], toolset: Toolset = "tools") -> list[ToolResult]:
        """Run ``calls`` on ``toolset`` concurrently, as one round: each only if its cost bound fits the budget
        left, within the episode's deadline; results in the order of ``calls``."""
        ...


def refused(call: ToolCall, status: Status, refusal: Refusal | None, reason: str) -> ToolResult:
    """A result for a call that was never run."""
    return ToolResult(call=call, status=status, reason=reason, refused=refusal, observation=reason)


class Policy(ABC):
    """An action space: prompt rendering, output parsing, a grammar for constrained decoding, and the way its
    actions are carried out. Answers and rounds of tool calls are handled here; subclasses add their own."""

    name: str
    """Its name in configs (its config registers it: :data:`podium.policies.POLICIES`)."""
    max_turns: int
    """Default turn limit when the budget sets none."""
    max_calls_per_round: int
    """Most calls one turn may dispatch (more are refused with PARSE_ERR)."""
    summarize_on_stop: bool = False
    """Whether, by default, the summarizer writes an answer when turns or parse errors run out first."""
    calls_tools: bool = False
    """Whether the orchestrator calls the episode's tools by name (so tools added for one episode, such as a
    served client's, can be offered to it)."""
    converses: bool = False
    """Whether its episodes can hold a conversation with a user (a tool-use task): each answer goes to the user,
    whose reply continues the episode, and it calls the domain's tools by name."""
    reserved_names: tuple[str, ...] = ()
    """Names its actions call that are not tools of the episode (the parallel policy's ``final_answer``): a tool
    added for one episode may not take them."""

    @abstractmethod
    def system_prompt(self, view: PoolView) -> str:
        """The orchestrator's instructions with the pool table."""

    @abstractmethod
    def parse(self, text: str, view: PoolView, previous: Sequence[Action]) -> Action:
        """The actions in ``text``, given the actions of earlier turns; raises only :class:`ActionParseError`."""

    @abstractmethod
    def observation(
        self, results: Sequence[ToolResult], remaining: str, view: PoolView, previous: Sequence[Action]
    ) -> str:
        """The message the orchestrator reads after its calls ran (``remaining`` describes the budget left;
        ``previous`` holds every action so far, the one whose ``results`` these are included)."""

    @abstractmethod
    def rejection(self, reason: str, remaining: str) -> str:
        """The message the orchestrator reads after output that could not be parsed."""

    @abstractmethod
    def build_grammar(self, view: PoolView, limits: Limits, previous: Sequence[Action] = ()) -> Grammar | None:
        """The grammar of the next output with ``limits`` on its free text, given the actions of earlier turns:
        every output it matches parses. ``None``: the policy has no grammar for this pool."""

    def choices(self, view: PoolView, previous: Sequence[Action] = ()) -> list[str] | None:
        """Every output allowed next when the action space is a finite set of words (the grammar is then that
        set): a backend can pick among them exactly and tell their probabilities. ``None``: free text."""
        return None

    def decide(self, generated: str, probabilities: Mapping[str, float] | None, previous: Sequence[Action] = ()) -> str:
        """The output the turn takes, given what the orchestrator generated, for a choice among words each word's
        probability, and the actions of earlier turns: what it generated, unless the policy decides by a rule of
        its own."""
        return generated

    def turn_histories(self, view: PoolView) -> list[list[Action]]:
        """Earlier actions after which the next turn's grammar takes each of its shapes, so that a check can see
        whether a token budget holds an action in every turn: here the first turn's only."""
        return [[]]

    def grammar(self, view: PoolView, previous: Sequence[Action] = (), max_tokens: int | None = None) -> Grammar | None:
        """The grammar of the next output, its free text shrunk until any match fits ``max_tokens`` (so an
        action always closes within the budget); raises :class:`~podium.backends.grammar.BudgetTooSmall` when
        even its fixed parts do not fit."""
        full = self.build_grammar(view, Limits(), previous)
        if full is None or max_tokens is None:
            return full

        def build(limits: Limits) -> Grammar:
            grammar = self.build_grammar(view, limits, previous)
            assert grammar is not None  # the same view and history give a grammar at any limits
            return grammar

        return fit(build, max_tokens)

    async def execute(self, action: Action, dispatch: Dispatcher, history: Sequence[Turn], limit: int) -> Outcome:
        """Carry ``action`` out; ``history`` holds the earlier turns and ``limit`` the calls one round may make."""
        if isinstance(action, Answer):
            return Outcome(answer=action.text)
        if isinstance(action, Calls):
            return Outcome(await run_round(action, dispatch, limit))
        raise TypeError(f"the {self.name} policy cannot carry out {type(action).__name__}")


async def run_round(action: Calls, dispatch: Dispatcher, limit: int) -> list[ToolResult]:
    """A round of concurrent calls: those past ``limit`` are refused, unreadable blocks become PARSE_ERR."""
    results = await dispatch.run(action.calls[:limit])
    for call in action.calls[limit:]:
        results.append(refused(call, Status.PARSE_ERR, Refusal.CALLS_PER_ROUND, f"at most {limit} call(s) per turn"))
    for index, invalid in enumerate(action.invalid):
        call = ToolCall(name="(unreadable)", arguments=invalid.text, id=f"invalid_{index}")
        results.append(refused(call, Status.PARSE_ERR, None, invalid.reason))
    return results

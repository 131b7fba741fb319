"""Served episodes: an episode running for a client, what it reports while it runs, and the client tools it may
call.

Client tools join the episode's pool as tools whose calls the client answers. The client calls of one round are
handed out together, as one response's ``tool_calls``; the episode then waits, parked under those calls' ids,
until a request brings their results as ``tool`` messages (:meth:`ServedEpisode.resume`), or until the wait limit
passes, when it is cancelled. State stays on the server under the call ids; a request whose tool results answer
no waiting episode starts a new one with the whole conversation as its context (:mod:`podium.serve.conversation`).

A client tool named like a tool of the pool, or like a name the policy's actions call (the parallel policy's
``final_answer``), joins under another name (``client_final_answer``): the orchestrator calls it by that name,
and the client gets the call under its own. Each request sets what the episode's next action may be (its
``tool_choice``), until its response ends.

Everything an episode reports (its steps, a round of client calls, its end) goes into one queue that the request
being served at the moment reads.
"""

import asyncio
import uuid
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from podium.core.calls import ToolSpec
from podium.core.progress import EpisodeEvent
from podium.core.trajectory import Trajectory
from podium.costs.ledger import RunCap
from podium.errors import ToolDefinitionError
from podium.policies import ToolChoice
from podium.pool.context import current_episode
from podium.pool.tool import Tool, ToolOutput
from podium.serve.http import invalid_request
from podium.serve.records import EpisodeFacts
from podium.serve.requests import EpisodeRequest

CALL_ID_PATTERN = r"call_[0-9a-f]{24}"
"""The ids of the calls handed to clients."""


@dataclass(frozen=True)
class ClientCall:
    """A call of a client tool, as handed to the client."""

    id: str
    """The id the client answers (``tool_call_id``)."""
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class ClientCalls:
    """A round's client calls, handed out together."""

    calls: list[ClientCall]


@dataclass(frozen=True)
class Ended:
    """The episode ended; its task holds the trajectory or the failure."""

    task: "asyncio.Task[Trajectory]"


Report = EpisodeEvent | ClientCalls | Ended


@dataclass
class ServedEpisode:
    """One episode run for a client: its task, its reports, its client tools and the calls it waits on."""

    request_id: str
    model: str
    account: str | None
    allowance: RunCap | None
    """The cap of its API key's day, which each step of the episode draws on (``None``: no limit)."""
    client_tools: list[ToolSpec]
    wait_s: float
    """How long a round of client calls may wait for its results."""
    taken: set[str] = field(default_factory=set)
    """Names the client tools may not take (the pool's tools, names the policy's actions call): such a tool is
    renamed."""
    settings: dict[str, Any] = field(default_factory=dict)
    """The fields of the starting request that shape the episode (:meth:`EpisodeRequest.episode_settings`)."""
    choice: ToolChoice | None = None
    """What the next action may be, as the request being answered asks (its ``tool_choice``)."""
    facts: EpisodeFacts | None = None
    """What the episode's record says besides its trajectory (the system and its version, the task, its gold…)."""
    cancelled_because: str | None = None
    """Why the server cancelled the episode (``client_tool_timeout``, ``request_timeout``, ``waiting_cap``)."""
    reports: "asyncio.Queue[Report]" = field(default_factory=asyncio.Queue)
    trajectory: Trajectory | None = None
    """The trajectory once the episode stopped (cancelled included)."""
    waiting: dict[str, "asyncio.Future[str]"] = field(default_factory=dict)
    task: "asyncio.Task[Trajectory] | None" = None
    tools: dict[str, Tool] = field(default_factory=dict)
    """The client tools as pool tools of this episode, by the names the orchestrator sees."""
    client_names: dict[str, str] = field(default_factory=dict)
    """The name the orchestrator sees → the client's name, for every client tool."""
    _round: tuple[Any, ...] | None = None
    _batch: list[ClientCall] = field(default_factory=list)
    _expected: int = 0

    def __post_init__(self) -> None:
        for index, spec in enumerate(self.client_tools):
            others = {other.name for other in self.client_tools if other is not spec}
            name = unclaimed(spec.name, self.taken | set(self.tools) | others)
            try:
                # The wait limit cancels the episode first; the tool's own limit is only a backstop.
                tool = Tool.from_schema(
                    name, spec.description, spec.parameters, self._caller(), timeout_s=2 * self.wait_s
                )
            except ToolDefinitionError as error:
                raise invalid_request(str(error), f"tools.{index}.function.parameters") from error
            self.tools[name] = tool
            self.client_names[name] = spec.name

    def choose(self, request: EpisodeRequest) -> None:
        """Set what the next action may be for the response to ``request`` (its ``tool_choice``)."""
        request.client_tools()  # a named choice names one of its tools
        called = request.called_tool()
        if request.requires_call() and not self.tools:
            raise invalid_request(
                "this episode started with tool_choice 'none': it has no tools to call", "tool_choice"
            )
        if called is not None:
            shown = next(name for name, client in self.client_names.items() if client == called)
            self.choice = ToolChoice("required", frozenset({shown}))
        elif request.tool_choice == "required":
            self.choice = ToolChoice("required", frozenset(self.tools))
        elif request.tool_choice == "none" and self.tools:
            self.choice = ToolChoice("none", frozenset(self.tools))
        else:
            self.choice = None

    def next_choice(self) -> ToolChoice | None:
        """What the episode's next action may be (asked before each of its turns)."""
        return self.choice

    def start(self, episode: Coroutine[Any, Any, Trajectory], ended: Callable[["ServedEpisode"], None]) -> None:
        """Run ``episode``; ``ended`` is called once it ends, however it ends."""
        self.task = asyncio.create_task(episode)

        def done(task: "asyncio.Task[Trajectory]") -> None:
            self.reports.put_nowait(Ended(task))
            ended(self)

        self.task.add_done_callback(done)

    def on_event(self, event: EpisodeEvent) -> None:
        """The episode's watcher: reports go to the queue (from any thread; token counts are not reported)."""
        if event.kind == "tokens":
            return
        if event.kind == "stopped":
            self.trajectory = event.trajectory
        self.reports.put_nowait(event)

    def check(self, results: dict[str, str]) -> None:
        """A 400 unless ``results`` answer exactly the calls this episode waits on."""
        missing = sorted(set(self.waiting) - set(results))
        unknown = sorted(set(results) - set(self.waiting))
        if missing or unknown:
            raise invalid_request(
                f"the tool messages must answer exactly the calls of the last reply: no tool message answers "
                f"{missing}; no call of the last reply has the ids {unknown}",
                "messages",
            )

    def resume(self, results: dict[str, str]) -> None:
        """Hand the client's results to the calls waiting on them (:meth:`check` first)."""
        self.check(results)
        for call_id, content in results.items():
            future = self.waiting[call_id]
            if not future.done():
                future.set_result(content)

    def cancel(self, because: str | None = None) -> None:
        """Cancel the episode (``because``: why the server did, when it did)."""
        if self.task is not None and not self.task.done():
            self.cancelled_because = self.cancelled_because or because
            self.task.cancel()

    def _caller(self) -> Callable[..., Coroutine[Any, Any, ToolOutput]]:
        """A client tool's function (a closure: the tool's own parameters may have any names)."""

        async def call(**arguments: Any) -> ToolOutput:
            return await self._client_call(arguments)

        return call

    async def _client_call(self, arguments: dict[str, Any]) -> ToolOutput:
        """A client tool's call: handed out with the rest of its round, answered by the client."""
        context = current_episode.get()
        if context is None or context.call is None:
            raise RuntimeError("a client tool was called outside an episode's call")
        if self._round is not context.round:
            self._round, self._batch = context.round, []
            self._expected = sum(1 for call in context.round if self._valid(call.name, call.arguments))
        call = ClientCall(f"call_{uuid.uuid4().hex[:24]}", self.client_names[context.call.name], arguments)
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self.waiting[call.id] = future
        self._batch.append(call)
        if len(self._batch) == self._expected:
            self.reports.put_nowait(ClientCalls(list(self._batch)))
        try:
            content = await future
        finally:
            self.waiting.pop(call.id, None)
        return ToolOutput(content, observation=content)

    def _valid(self, name: str, arguments: Any) -> bool:
        """Whether the registry will run this call (a client tool, arguments passing its schema)."""
        tool = self.tools.get(name)
        return tool is not None and isinstance(arguments, dict) and tool.validator.is_valid(arguments)


def unclaimed(name: str, taken: set[str]) -> str:
    """``name``, or ``client_<name>`` (then ``client_<name>_2``…) when ``name`` is taken."""
    if name not in taken:
        return name
    candidate, number = f"client_{name}", 2
    while candidate in taken:
        candidate, number = f"client_{name}_{number}", number + 1
    return candidate

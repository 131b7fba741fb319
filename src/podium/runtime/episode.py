"""One episode: the loop of orchestrator turns, the policy's actions, accounting and stopping.

The deadline (``max_seconds``) holds whatever the orchestrator or the tools do: generations, calls and the
conversation partner run under the time left; output that arrives after it is recorded but not acted on, and
an answer produced after it is not accepted (the episode stops with DEADLINE and keeps the late answer in
``metadata["answer_after_deadline"]``); and the whole loop is cancelled :data:`DEADLINE_GRACE_S` after it, as a
backstop for anything that does not yield in time.

Answers are grounded (:mod:`podium.runtime.grounding`): a long number an answer miscopied from an observation is
replaced by the observed one (``metadata["answer_corrections"]``), and an episode that stops at a limit without
an answer takes the final value its newest successful call printed (``metadata["answer_source"]``).

An episode cancelled by its caller stops with CANCELLED: what ran until then is kept, with the cost bounds of
the work it cut short in ``metadata["abandoned_usd"]`` (a server may bill a request its client gave up on)."""

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict
from typing import Any

from podium.backends.base import BackendError, ChatBackend, Generation
from podium.core.answers import extract_answer
from podium.core.budget import Budget, StopReason
from podium.core.calls import CallUsage, ToolCall, ToolResult
from podium.core.messages import Message
from podium.core.preference import Preference
from podium.core.progress import EpisodeEvent, EventKind, OnEvent, token_progress
from podium.core.trajectory import Trajectory, Turn
from podium.costs.ledger import Ledger, Refused, RunCap
from podium.errors import ConfigError
from podium.policies import Action, ActionParseError, Answer, Policy, PoolView, ToolChoice, Toolset
from podium.pool.context import EpisodeContext, current_episode
from podium.pool.registry import ToolRegistry
from podium.pool.resources import Attachment
from podium.pool.summarizer import FINAL_ANSWER
from podium.runtime.config import RunConfig
from podium.runtime.dispatch import EpisodeDispatcher
from podium.runtime.grounding import ground, recover

DEADLINE_GRACE_S = 0.5
"""How long after the deadline the episode loop is cancelled if it has not stopped by itself."""
LIMIT_STOPS = (
    StopReason.MAX_TURNS,
    StopReason.MAX_PARSE_ERRORS,
    StopReason.MAX_TOKENS,
    StopReason.MAX_USD,
    StopReason.DEADLINE,
)
"""Stops at a limit: an answer the observations hold is recovered (:func:`~podium.runtime.grounding.recover`)."""

Respond = Callable[[str], Awaitable[str | None]]
"""A conversation partner (a simulated user): given the orchestrator's answer, the next user message, or
``None`` when the conversation is over."""
NextChoice = Callable[[], ToolChoice | None]
"""Asked before every turn: what the next action may be (a served client's ``tool_choice``, which each of its
requests may change); ``None``: any action of the policy."""


class Episode:
    """The mutable state of one run; :meth:`play` drives it to a trajectory."""

    def __init__(
        self,
        *,
        question: str,
        preference: Preference | None,
        orchestrator: ChatBackend,
        policy: Policy,
        view: PoolView,
        toolsets: Mapping[Toolset, ToolRegistry],
        attachments: tuple[Attachment, ...],
        config: RunConfig,
        budget: Budget,
        constrained: bool,
        respond: Respond | None,
        metadata: dict[str, Any],
        on_event: OnEvent | None = None,
        allowance: RunCap | None = None,
        tool_choice: NextChoice | None = None,
    ) -> None:
        self.question = question
        self.orchestrator = orchestrator
        self.policy = policy
        self.view = view
        self.attachments = attachments
        self.config = config
        self.constrained = constrained
        self.respond = respond
        self.on_event = on_event
        if tool_choice is not None and not policy.calls_tools:
            raise ConfigError(f"the {policy.name} policy does not call tools by name: it cannot honour tool_choice")
        self.tool_choice = tool_choice
        self.ledger = Ledger(budget, allowance)
        self.dispatch = EpisodeDispatcher(self.ledger, self.context, self._finished, toolsets)
        self.actions: list[Action] = []
        self.parse_errors = 0
        self.unrecorded: list[ToolResult] = []
        """Results of the running turn's calls that finished before the turn recorded them."""
        self.trajectory = Trajectory(
            question=question,
            preference=preference,
            budget=budget,
            metadata={**metadata, "constrained": constrained},
        )

    async def play(self, system: str, history: Sequence[Message] = ()) -> Trajectory:
        """Run the episode; ``history`` (earlier turns of a conversation) comes between the system prompt and the
        task."""
        task = self.question
        preference = self.trajectory.preference
        if preference is not None and preference.instruction:
            task = f"{task}\n\n{preference.instruction}"
        self.trajectory.messages = [
            Message(role="system", content=system),
            *history,
            Message(role="user", content=task),
        ]
        limit = self.ledger.budget.max_seconds
        try:
            return await asyncio.wait_for(self._loop(), None if limit is None else limit + DEADLINE_GRACE_S)
        except TimeoutError:
            return self._finish(StopReason.DEADLINE)
        except asyncio.CancelledError:
            if self.trajectory.turns:
                self.trajectory.turns[-1].results.extend(self.unrecorded)
            self.trajectory.metadata["abandoned_usd"] = self.ledger.abandoned.usd
            self._finish(StopReason.CANCELLED)
            raise

    async def _loop(self) -> Trajectory:
        while True:
            stop = self.ledger.budget.exhausted(self.ledger.spend())
            if stop is None and self.parse_errors > self.config.max_parse_errors:
                stop = StopReason.MAX_PARSE_ERRORS
            if stop is None:
                stop = await self._turn()
            if stop is not None:
                if stop in (StopReason.MAX_TURNS, StopReason.MAX_PARSE_ERRORS):
                    await self._summarize_on_stop()
                if stop in LIMIT_STOPS:
                    self._recover_answer()
                return self._finish(stop)

    async def _summarize_on_stop(self) -> None:
        wanted = self.config.summarize_on_stop
        if wanted is None:
            wanted = self.policy.summarize_on_stop
        if not wanted or self.trajectory.answer is not None or not self.trajectory.turns:
            return
        evidence = self._observations()
        (result,) = await self.dispatch.run([ToolCall(name=FINAL_ANSWER.name, id="on_stop")], "summarizer")
        self.trajectory.turns[-1].results.append(result)
        self.unrecorded.clear()
        if result.ok:
            self.trajectory.answer = self._grounded(extract_answer(str(result.value)), evidence)

    def _recover_answer(self) -> None:
        """An episode out of budget keeps the answer its observations hold."""
        if self.trajectory.answer is not None or not self.config.answer_from_observations:
            return
        found = recover(self._observations())
        if found is not None:
            value, result = found
            self.trajectory.answer = value
            self.trajectory.metadata["answer_source"] = {"call": result.call.id, "tool": result.call.name}

    def _observations(self) -> list[ToolResult]:
        """The results of the episode's calls, without the summarizer's (answers, not observations)."""
        summarizer = self.dispatch.toolsets["summarizer"]
        return [result for result in self.trajectory.results if result.call.name not in summarizer]

    def _grounded(self, answer: str | None, evidence: Sequence[ToolResult]) -> str | None:
        """``answer`` with long numbers it miscopied from the ``evidence`` (the observations of the calls made
        before the action that answered) replaced by the observed ones."""
        if answer is None:
            return None
        grounded, corrections = ground(answer, self.question, evidence)
        if corrections:
            recorded = self.trajectory.metadata.setdefault("answer_corrections", [])
            recorded.extend(asdict(correction) for correction in corrections)
        return grounded

    async def _turn(self) -> StopReason | None:
        started = time.perf_counter()
        tool_choice = self.tool_choice() if self.tool_choice is not None else None
        view = self._restricted(tool_choice)
        choices = self.policy.choices(view, self.actions)
        generated = await self._generate(choices, view)
        if isinstance(generated, StopReason):
            return generated
        output = self.policy.decide(generated.text, generated.choice_probs, self.actions)
        turn = Turn(
            index=len(self.trajectory.turns),
            output=output,
            output_chars=generated.text_chars,
            usage=generated.usage,
            choices=choices,
            choice_probs=generated.choice_probs,
        )
        self.trajectory.turns.append(turn)
        self.ledger.turns += 1
        self._say("assistant", output)
        self._emit("turn", turn=turn.index, detail=output, usage=generated.usage)
        try:
            action = self.policy.parse(output, view, self.actions)
            if generated.finish_reason == "length" and isinstance(action, Answer):
                limit = self.config.max_tokens
                raise ActionParseError(f"the output was cut off at max_tokens={limit} before it finished; be brief")
            problem = None if tool_choice is None else tool_choice.problem(action)
            if problem is not None:
                raise ActionParseError(problem)
        except ActionParseError as error:
            self.parse_errors += 1
            turn.parse_error = str(error)
            self._say("user", self.policy.rejection(str(error), self.ledger.remaining_text()))
            turn.wall_s = time.perf_counter() - started
            return None
        if self._expired():
            turn.wall_s = time.perf_counter() - started
            return StopReason.DEADLINE
        self.actions.append(action)
        stop = await self._act(action, turn)
        turn.wall_s = time.perf_counter() - started
        return stop

    async def _act(self, action: Action, turn: Turn) -> StopReason | None:
        limit = self.ledger.budget.max_calls_per_round or self.policy.max_calls_per_round
        if not isinstance(action, Answer):
            self._emit("calling", turn=turn.index, detail=type(action).__name__.lower())
        evidence = self._observations()
        outcome = await self.policy.execute(action, self.dispatch, self.trajectory.turns[:-1], limit)
        turn.results.extend(outcome.results)
        self.unrecorded.clear()
        if outcome.answer is not None:
            answer = self._grounded(outcome.answer, evidence) or outcome.answer
            if self._expired():
                self.trajectory.metadata["answer_after_deadline"] = answer
                return StopReason.DEADLINE
            self.trajectory.answer = answer
            if self.respond is None:
                return StopReason.ANSWER
            try:
                reply = await asyncio.wait_for(self.respond(answer), self.ledger.remaining_seconds())
            except TimeoutError:
                return StopReason.DEADLINE
            if reply is None:
                return StopReason.ENV_DONE
            self._say("user", reply)
            return None
        self._say("user", self.policy.observation(turn.results, self.ledger.remaining_text(), self.view, self.actions))
        return None

    def _sampling(self) -> dict[str, Any]:
        """The orchestrator's sampling options for the next turn."""
        options: dict[str, Any] = {"temperature": self.config.temperature, "top_p": self.config.top_p}
        if self.config.sampling_seed is not None:
            options["seed"] = self.config.sampling_seed + len(self.trajectory.turns)
        return options

    def _restricted(self, tool_choice: ToolChoice | None) -> PoolView:
        """The view of the next turn under ``tool_choice``; its instruction ends the message the turn answers."""
        if tool_choice is None:
            return self.view
        view = tool_choice.restrict(self.view)
        if not view.tools and not view.may_answer:
            raise ConfigError(
                f"tool_choice requires a call of {sorted(tool_choice.tools)}, which the allow/deny lists hide"
            )
        last = self.trajectory.messages[-1]
        note = tool_choice.instruction()
        if not last.content.endswith(note):
            self.trajectory.messages[-1] = last.model_copy(update={"content": f"{last.content}\n\n{note}"})
        return view

    async def _generate(self, choices: list[str] | None, view: PoolView) -> Generation | StopReason:
        """The orchestrator's next output, generated under the budget and the deadline (one of ``choices`` when
        the policy's next action is one of a few words and the backend can pick among them; under the grammar of
        ``view`` when the orchestrator decodes under one)."""
        max_tokens = self.config.max_tokens
        options = self._sampling()
        picks = self.orchestrator.supports_choices and (self.constrained or not self.orchestrator.writes_text)
        if choices is not None and picks:
            options["choices"] = choices
        elif self.constrained:  # the grammar fits the budget, so an action always closes within it
            grammar = self.policy.grammar(view, self.actions, max_tokens)
            if grammar is not None:
                options["regex"] = grammar.regex
                max_tokens = grammar.max_tokens or max_tokens
        options["max_tokens"] = max_tokens

        async def generate() -> Generation:
            messages = list(self.trajectory.messages)
            self._emit("generating")
            token_progress.set(self._tokens_reporter())
            return await asyncio.wait_for(
                self.orchestrator.generate(messages, **options), timeout=self.ledger.remaining_seconds()
            )

        bound = self.orchestrator.generation_bound(self.trajectory.messages, max_tokens)
        try:
            generated = await self.ledger.metered(bound, generate, _generation_usage, _settled_generation)
        except TimeoutError:
            return StopReason.DEADLINE
        except BackendError as error:
            self.trajectory.metadata["error"] = f"orchestrator backend failed: {error}"
            return StopReason.ERROR
        return generated.limit if isinstance(generated, Refused) else generated

    def _expired(self) -> bool:
        """Whether the deadline has passed."""
        return self.ledger.remaining_seconds() == 0.0

    def _emit(self, kind: EventKind, *, turn: int | None = None, **fields: Any) -> None:
        """Tell the watcher (if any) what the episode does; ``turn`` defaults to the turn being generated."""
        if self.on_event is not None:
            self.on_event(EpisodeEvent(kind, len(self.trajectory.turns) if turn is None else turn, **fields))

    def _finished(self, result: ToolResult) -> None:
        """A call of the running turn finished: kept until the turn records it, and told to the watcher."""
        self.unrecorded.append(result)
        self._emit("result", turn=max(len(self.trajectory.turns) - 1, 0), result=result)

    def _tokens_reporter(self) -> Callable[[int], None] | None:
        """What a generating backend calls with its running token count (``None`` when nobody watches)."""
        if self.on_event is None:
            return None
        return lambda tokens: self._emit("tokens", tokens=tokens)

    @contextmanager
    def context(self, call: ToolCall | None = None, round_calls: tuple[ToolCall, ...] = ()) -> Iterator[None]:
        """Sets :data:`current_episode` for a call (tasks copy it), restored afterwards."""
        history = "\n\n".join(f"[{m.role}]\n{m.content}" for m in self.trajectory.messages[1:])
        context = EpisodeContext(
            question=self.question, history=history, attachments=self.attachments, call=call, round=round_calls
        )
        token = current_episode.set(context)
        try:
            yield
        finally:
            current_episode.reset(token)

    def _say(self, role: str, content: str) -> None:
        self.trajectory.messages.append(Message(role=role, content=content))  # type: ignore[arg-type]

    def _finish(self, stop: StopReason) -> Trajectory:
        self.trajectory.stop_reason = stop
        self.trajectory.wall_s = self.ledger.elapsed()
        self.trajectory.metadata["parse_errors"] = self.parse_errors
        if self.ledger.shared_refusal is not None:
            self.trajectory.metadata["allowance_refused"] = self.ledger.shared_refusal
        self._emit("stopped", turn=max(len(self.trajectory.turns) - 1, 0), trajectory=self.trajectory)
        return self.trajectory


def _generation_usage(generation: Generation) -> CallUsage:
    return generation.usage


def _settled_generation(generation: Generation, charged: CallUsage) -> Generation:
    update = {"input_tokens": charged.input_tokens, "output_tokens": charged.output_tokens, "usd": charged.usd}
    return generation.model_copy(update={**update, "clipped": generation.clipped or "charged at its cost bound"})

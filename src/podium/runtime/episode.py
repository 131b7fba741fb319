"""One episode: the loop of orchestrator turns, dispatch, accounting and stopping."""

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from podium.backends.base import BackendError, ChatBackend
from podium.core.answers import extract_answer
from podium.core.budget import Budget, StopReason
from podium.core.calls import CallUsage, Status, ToolCall, ToolResult
from podium.core.messages import Message
from podium.core.preference import Preference
from podium.core.trajectory import Trajectory, Turn
from podium.policies import Action, ActionParseError, Answer, Calls, Plan, Policy, PoolView, Summarize
from podium.pool.context import EpisodeContext, current_episode
from podium.pool.registry import ToolRegistry
from podium.pool.workers import generation_bound
from podium.runtime.config import RunConfig
from podium.runtime.dag import run_plan
from podium.runtime.ledger import Ledger

Respond = Callable[[str], Awaitable[str | None]]
"""A conversation partner (a simulated user): given the orchestrator's answer, the next user message, or
``None`` when the conversation is over."""


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
        registry: ToolRegistry,
        summarizer: ToolRegistry,
        config: RunConfig,
        budget: Budget,
        constrained: bool,
        respond: Respond | None,
        metadata: dict[str, Any],
    ) -> None:
        self.question = question
        self.orchestrator = orchestrator
        self.policy = policy
        self.view = view
        self.registry = registry
        self.summarizer = summarizer
        self.config = config
        self.constrained = constrained
        self.respond = respond
        self.ledger = Ledger(budget)
        self.actions: list[Action] = []
        self.observations: dict[int, str] = {}
        self.parse_errors = 0
        self.trajectory = Trajectory(
            question=question,
            preference=preference,
            budget=budget,
            metadata={**metadata, "constrained": constrained},
        )

    async def play(self, system: str) -> Trajectory:
        task = self.question
        preference = self.trajectory.preference
        if preference is not None and preference.instruction:
            task = f"{task}\n\n{preference.instruction}"
        self.trajectory.messages = [Message(role="system", content=system), Message(role="user", content=task)]
        while True:
            stop = self.ledger.budget.exhausted(self.ledger.spend())
            if stop is None and self.parse_errors > self.config.max_parse_errors:
                stop = StopReason.MAX_PARSE_ERRORS
            if stop is None:
                stop = await self._turn()
            if stop is not None:
                if stop in (StopReason.MAX_TURNS, StopReason.MAX_PARSE_ERRORS):
                    await self._summarize_on_stop()
                return self._finish(stop)

    async def _summarize_on_stop(self) -> None:
        wanted = self.config.summarize_on_stop
        if wanted is None:
            wanted = self.policy.name == "parallel"
        if not wanted or self.trajectory.answer is not None or not self.trajectory.turns:
            return
        (result,) = await self._dispatch_all(self.summarizer, [ToolCall(name="final_answer", id="on_stop")])
        self.trajectory.turns[-1].results.append(result)
        if result.ok:
            self.trajectory.answer = extract_answer(str(result.value))

    async def _turn(self) -> StopReason | None:
        started = time.perf_counter()
        generated = await self._generate()
        if isinstance(generated, StopReason):
            return generated
        text, usage, cut_off = generated
        turn = Turn(index=len(self.trajectory.turns), output=text, usage=usage)
        self.trajectory.turns.append(turn)
        self.ledger.turns += 1
        self._say("assistant", text)
        try:
            action = self.policy.parse(text, self.view, self.actions)
            if cut_off and isinstance(action, Answer):
                limit = self.config.max_tokens
                raise ActionParseError(f"the output was cut off at max_tokens={limit} before it finished; be brief")
        except ActionParseError as error:
            self.parse_errors += 1
            turn.parse_error = str(error)
            self._say("user", self.policy.rejection(str(error), self.ledger.remaining_text()))
            turn.wall_s = time.perf_counter() - started
            return None
        self.actions.append(action)
        stop = await self._act(action, turn)
        turn.wall_s = time.perf_counter() - started
        return stop

    async def _act(self, action: Action, turn: Turn) -> StopReason | None:
        if isinstance(action, Answer):
            self.trajectory.answer = action.text
            if self.respond is None:
                return StopReason.ANSWER
            reply = await self.respond(action.text)
            if reply is None:
                return StopReason.ENV_DONE
            self._say("user", reply)
            return None
        if isinstance(action, Summarize):
            results = await self._dispatch_all(self.summarizer, [action.call])
            turn.results.extend(results)
            if results[0].ok:
                self.trajectory.answer = extract_answer(str(results[0].value))
                return StopReason.ANSWER
        elif isinstance(action, Calls):
            turn.results.extend(await self._dispatch_round(action))
        elif isinstance(action, Plan):
            with self._context():
                results = await run_plan(action, self.registry, self._dispatch_one, self.observations)
            for subtask, result in zip(action.subtasks, results, strict=True):
                self.observations[subtask.id] = result.observation or result.reason or ""
            turn.results.extend(results)
        self._say("user", self.policy.observation(turn.results, self.ledger.remaining_text()))
        return None

    async def _generate(self) -> tuple[str, CallUsage, bool] | StopReason:
        """The orchestrator's next output, its usage and whether it was cut off at max_tokens."""
        prompt = "".join(message.content for message in self.trajectory.messages)
        bound = generation_bound(self.orchestrator.price, prompt, self.config.max_tokens)
        refused = self.ledger.refusal(bound)
        if refused is not None:
            return refused
        options: dict[str, Any] = {"max_tokens": self.config.max_tokens, "temperature": self.config.temperature}
        if self.constrained:
            options["regex"] = self.policy.grammar(self.view, self.actions)
        started = time.perf_counter()
        try:
            generation = await asyncio.wait_for(
                self.orchestrator.generate(list(self.trajectory.messages), **options),
                timeout=self.ledger.remaining_seconds(),
            )
        except TimeoutError:
            return StopReason.DEADLINE
        except BackendError as error:
            self.trajectory.metadata["error"] = f"orchestrator backend failed: {error}"
            return StopReason.ERROR
        usage = CallUsage(
            input_tokens=generation.input_tokens,
            output_tokens=generation.output_tokens,
            usd=generation.usd,
            latency_s=generation.latency_s or time.perf_counter() - started,
        )
        self.ledger.charge(usage)
        return generation.text, usage, generation.finish_reason == "length"

    async def _dispatch_round(self, action: Calls) -> list[ToolResult]:
        limit = self.ledger.budget.max_calls_per_round or len(action.calls)
        results = await self._dispatch_all(self.registry, action.calls[:limit])
        for call in action.calls[limit:]:
            results.append(_refused(call, Status.PARSE_ERR, f"not run: at most {limit} call(s) per turn"))
        for index, invalid in enumerate(action.invalid):
            call = ToolCall(name="(unreadable)", arguments=invalid.text, id=f"invalid_{index}")
            results.append(_refused(call, Status.PARSE_ERR, invalid.reason))
        return results

    async def _dispatch_all(self, registry: ToolRegistry, calls: Sequence[ToolCall]) -> list[ToolResult]:
        with self._context():
            return list(await asyncio.gather(*(self._dispatch_one(call, registry) for call in calls)))

    async def _dispatch_one(self, call: ToolCall, registry: ToolRegistry | None = None) -> ToolResult:
        """Run one call if its cost bound fits the budget left, within the episode deadline."""
        registry = registry or self.registry
        bound = registry.cost_bound(call)
        refused = self.ledger.refusal(bound)
        if refused is not None:
            reason = f"not run: the call could exceed the budget ({self.ledger.describe(bound)})"
            return _refused(call, Status.EXEC_ERR, reason)
        self.ledger.reserve(bound)
        try:
            result = await asyncio.wait_for(registry.call(call), timeout=self.ledger.remaining_seconds())
        except TimeoutError:
            result = _refused(call, Status.TIMEOUT, "stopped: the episode's deadline passed")
        self.ledger.settle(bound, result.usage)
        return result

    @contextmanager
    def _context(self) -> Iterator[None]:
        """Sets :data:`current_episode` for the calls of a round (tasks copy it), restored afterwards."""
        history = "\n\n".join(f"[{m.role}]\n{m.content}" for m in self.trajectory.messages[1:])
        token = current_episode.set(EpisodeContext(question=self.question, history=history))
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
        return self.trajectory


def _refused(call: ToolCall, status: Status, reason: str) -> ToolResult:
    return ToolResult(call=call, status=status, reason=reason, observation=reason)

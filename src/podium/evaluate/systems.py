"""Systems under evaluation, and the baselines that need only a model backend (SPEC §8).

An :class:`ItemSolver` turns a benchmark item into a :class:`~podium.core.trajectory.Trajectory` (answer, turns,
usage, wall time). The baselines here call a :class:`~podium.backends.base.ChatBackend` directly: one model
without tools, majority vote over k samples, self-refine, and a static router. Systems that need the
orchestrator runtime (a model with basic tools, a prompted orchestrator over the pool, trained checkpoints)
plug in through :func:`podium.evaluate.system_config.register_system`.
"""

import asyncio
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from podium.backends.base import BackendError, ChatBackend, Generation
from podium.core.answers import ANSWER_INSTRUCTIONS, VerifierKind, extract_answer, vote_key
from podium.core.budget import StopReason
from podium.core.calls import CallUsage
from podium.core.messages import Message
from podium.core.trajectory import Trajectory, Turn
from podium.datasets.items import BenchmarkItem

MODEL_ONLY_KINDS: frozenset[VerifierKind] = frozenset({"math", "qa", "multiple_choice", "code"})
"""What a model without tools can attempt: tool-use environments need the runtime's tool loop."""


@runtime_checkable
class ItemSolver(Protocol):
    """Something that solves benchmark items: a baseline here, or an orchestrator
    (:class:`podium.solve.system.System`)."""

    name: str
    """Shown in results and reports; two systems compared in one report should have different names."""

    def supports(self, verifier: VerifierKind) -> bool:
        """Whether items judged by ``verifier`` can be attempted (checked before a run starts)."""
        ...

    async def solve(self, item: BenchmarkItem) -> Trajectory:
        """One attempt at ``item``. Raises :class:`~podium.errors.PodiumError` on infrastructure failure.
        A system that draws something afresh for each attempt (a blind pool's labels) also says
        ``episode_seed(item_id, sample)`` and takes ``solve(item, seed=...)``: see :func:`attempt_seed`."""
        ...


def attempt_bound(system: ItemSolver, item: BenchmarkItem) -> float | None:
    """The most one attempt of ``system`` at ``item`` can cost, in USD: what a system's optional
    ``cost_bound(item)`` says, ``None`` when it cannot say (a USD cap then cannot be guaranteed)."""
    bound = getattr(system, "cost_bound", None)
    return None if bound is None else bound(item)


def attempt_seed(system: ItemSolver, item_id: str, sample: int) -> int | None:
    """The seed of what ``system`` draws afresh for sample ``sample`` of item ``item_id``: what its optional
    ``episode_seed(item_id, sample)`` says, ``None`` when it draws nothing per attempt (every attempt then runs the
    same system, as baselines do)."""
    seed = getattr(system, "episode_seed", None)
    return None if seed is None else seed(item_id, sample)


def generation_usage(generation: Generation, measured_s: float) -> CallUsage:
    """A generation's accounting; backends that do not time themselves (scripted) get the measured time."""
    return CallUsage(
        input_tokens=generation.input_tokens,
        output_tokens=generation.output_tokens,
        usd=generation.usd,
        latency_s=generation.latency_s or measured_s,
    )


@dataclass
class ModelCaller:
    """One backend with fixed sampling settings; each call becomes a :class:`Turn`."""

    backend: ChatBackend
    temperature: float = 0.0
    max_tokens: int = 1024

    def bound(self, messages: list[Message]) -> float:
        """The most one generation on ``messages`` can cost (USD)."""
        return self.backend.generation_bound(messages, self.max_tokens).usd

    async def turn(self, messages: list[Message], index: int, *, temperature: float | None = None) -> Turn:
        started = time.perf_counter()
        generation = await self.backend.generate(
            messages,
            max_tokens=self.max_tokens,
            temperature=self.temperature if temperature is None else temperature,
        )
        elapsed = time.perf_counter() - started
        return Turn(index=index, output=generation.text, usage=generation_usage(generation, elapsed), wall_s=elapsed)


def question_messages(item: BenchmarkItem) -> list[Message]:
    """The answer-format instruction for the item's verifier, then the question."""
    return [
        Message(role="system", content=ANSWER_INSTRUCTIONS[item.verifier]),
        Message(role="user", content=item.question),
    ]


def _trajectory(
    item: BenchmarkItem, turns: list[Turn], answer: str | None, started: float, **metadata: Any
) -> Trajectory:
    return Trajectory(
        question=item.question,
        turns=turns,
        answer=answer,
        stop_reason=StopReason.ANSWER if answer is not None else None,
        wall_s=time.perf_counter() - started,
        metadata={"item_id": item.id, **metadata},
    )


@dataclass
class SingleModelSystem:
    """One model, no tools: one generation, the answer extracted from it."""

    name: str
    caller: ModelCaller

    def supports(self, verifier: VerifierKind) -> bool:
        return verifier in MODEL_ONLY_KINDS

    def cost_bound(self, item: BenchmarkItem) -> float:
        return self.caller.bound(question_messages(item))

    async def solve(self, item: BenchmarkItem) -> Trajectory:
        started = time.perf_counter()
        turn = await self.caller.turn(question_messages(item), 0)
        answer = extract_answer(turn.output, item.verifier)
        return _trajectory(item, [turn], answer, started, model=self.caller.backend.model)


@dataclass
class MajorityVoteSystem:
    """k samples at temperature > 0, in parallel; the most common answer (after normalisation) wins.

    Ties go to the answer that appeared first. Failed samples are dropped from the vote; the item fails only
    when every sample failed.
    """

    name: str
    caller: ModelCaller
    votes: int = 8

    def __post_init__(self) -> None:
        if self.votes < 1 or self.caller.temperature <= 0.0:
            raise ValueError("majority vote needs at least one vote and a temperature above 0")

    def supports(self, verifier: VerifierKind) -> bool:
        return verifier in MODEL_ONLY_KINDS

    def cost_bound(self, item: BenchmarkItem) -> float:
        return self.caller.bound(question_messages(item)) * self.votes

    async def solve(self, item: BenchmarkItem) -> Trajectory:
        started = time.perf_counter()
        messages = question_messages(item)
        outcomes = await asyncio.gather(
            *(self.caller.turn(messages, index) for index in range(self.votes)), return_exceptions=True
        )
        turns = [outcome for outcome in outcomes if isinstance(outcome, Turn)]
        failures = [outcome for outcome in outcomes if not isinstance(outcome, Turn)]
        unexpected = [failure for failure in failures if not isinstance(failure, BackendError)]
        if unexpected:
            raise unexpected[0]
        if not turns:
            raise BackendError(f"all {self.votes} samples failed; first: {failures[0]}")
        answers = [extract_answer(turn.output, item.verifier) for turn in turns]
        keyed = [(vote_key(answer, item.verifier), answer) for answer in answers if answer is not None]
        tally = Counter(key for key, _ in keyed)
        winner = tally.most_common(1)[0][0] if tally else None
        answer = next((text for key, text in keyed if key == winner), None)
        return _trajectory(
            item,
            turns,
            answer,
            started,
            model=self.caller.backend.model,
            votes=dict(tally),
            failed_samples=len(failures),
        )


CRITIC_INSTRUCTIONS = (
    "You check solutions. Go through the proposed solution step by step and look for mistakes in reasoning, "
    "calculation and answer format. End with 'VERDICT: CORRECT' if it is fully correct, otherwise list the "
    "mistakes and end with 'VERDICT: INCORRECT'."
)
REVISE_REQUEST = (
    "A reviewer checked your answer:\n\n{critique}\n\nWrite an improved solution that fixes these problems, "
    "in the same answer format."
)


def critique_accepts(critique: str) -> bool:
    """Whether the critic's last verdict is CORRECT."""
    upper = critique.upper()
    return upper.rfind("VERDICT: CORRECT") > upper.rfind("VERDICT: INCORRECT")


@dataclass
class SelfRefineSystem:
    """Draft → critique → revise, until the critic accepts or ``rounds`` revisions were made."""

    name: str
    caller: ModelCaller
    rounds: int = 2

    def supports(self, verifier: VerifierKind) -> bool:
        return verifier in MODEL_ONLY_KINDS

    def cost_bound(self, item: BenchmarkItem) -> float | None:
        """0 for a free model; otherwise unknown (each prompt holds earlier replies of unknown length)."""
        price = self.caller.backend.price
        return 0.0 if price.input_per_mtok == price.output_per_mtok == 0 else None

    async def solve(self, item: BenchmarkItem) -> Trajectory:
        started = time.perf_counter()
        messages = question_messages(item)
        turns = [await self.caller.turn(messages, 0)]
        steps = ["draft"]
        draft = turns[-1].output
        answer = extract_answer(draft, item.verifier)
        for _ in range(self.rounds):
            review = f"Problem:\n{item.question}\n\nProposed solution:\n{draft}"
            critic = [Message(role="system", content=CRITIC_INSTRUCTIONS), Message(role="user", content=review)]
            turns.append(await self.caller.turn(critic, len(turns), temperature=0.0))
            steps.append("critique")
            critique = turns[-1].output
            if critique_accepts(critique):
                break
            revise = [
                *messages,
                Message(role="assistant", content=draft),
                Message(role="user", content=REVISE_REQUEST.format(critique=critique)),
            ]
            turns.append(await self.caller.turn(revise, len(turns)))
            steps.append("revise")
            draft = turns[-1].output
            answer = extract_answer(draft, item.verifier) or answer
        return _trajectory(item, turns, answer, started, model=self.caller.backend.model, steps=steps)


@dataclass(frozen=True)
class RouteRule:
    """Send an item to ``backend`` when every condition given holds (an empty rule matches everything)."""

    backend: str
    keywords: tuple[str, ...] = ()
    """Any of these words in the question (case-insensitive)."""
    min_chars: int | None = None
    """The question has at least this many characters."""
    verifiers: tuple[VerifierKind, ...] = ()
    """The item is judged by one of these verifiers."""

    def matches(self, item: BenchmarkItem) -> bool:
        lowered = item.question.lower()
        if self.keywords and not any(word.lower() in lowered for word in self.keywords):
            return False
        if self.min_chars is not None and len(item.question) < self.min_chars:
            return False
        return not self.verifiers or item.verifier in self.verifiers


@dataclass
class StaticRouterSystem:
    """A fixed rule picks one model per question (e.g. long or keyword-heavy questions to the strong model)."""

    name: str
    callers: dict[str, ModelCaller]
    rules: list[RouteRule]
    default: str

    def __post_init__(self) -> None:
        unknown = {rule.backend for rule in self.rules} | {self.default}
        unknown -= set(self.callers)
        if unknown:
            raise ValueError(f"routes name unknown backends {sorted(unknown)}; known: {sorted(self.callers)}")

    def supports(self, verifier: VerifierKind) -> bool:
        return verifier in MODEL_ONLY_KINDS

    def route(self, item: BenchmarkItem) -> str:
        """The backend name the first matching rule names, else the default."""
        return next((rule.backend for rule in self.rules if rule.matches(item)), self.default)

    def cost_bound(self, item: BenchmarkItem) -> float:
        return self.callers[self.route(item)].bound(question_messages(item))

    async def solve(self, item: BenchmarkItem) -> Trajectory:
        started = time.perf_counter()
        chosen = self.route(item)
        caller = self.callers[chosen]
        turn = await caller.turn(question_messages(item), 0)
        answer = extract_answer(turn.output, item.verifier)
        return _trajectory(item, [turn], answer, started, model=caller.backend.model, route=chosen)

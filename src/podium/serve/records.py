"""What the server records of each served episode (:class:`~podium.solve.served.ServedEpisodeRecord`), and the
one way it solves a request: the question as written, or, when the request names its task kind
(``podium.verifier``), as a task of that kind (its answer-format instruction, its answer extracted), graded against
the request's gold as the episode ends. The live system and a shadow beside it solve through the same function.
"""

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from podium.core.messages import Message
from podium.core.preference import Preference
from podium.core.trajectory import Trajectory
from podium.datasets.items import BenchmarkItem
from podium.graders.grader import Grader
from podium.graders.verdict import Verdict
from podium.runtime.config import RunConfig
from podium.serve.conversation import Conversation
from podium.serve.requests import EpisodeRequest
from podium.solve.served import GradableKind, Role, ServedCall, ServedEpisodeRecord, prompt_key
from podium.solve.system import Chat, System


@dataclass
class EpisodeFacts:
    """What a served episode's record says besides its trajectory, known when it starts; its grade once it ends."""

    model: str
    """The served model id."""
    system: System
    """The system that plays it (live, or the shadow beside it)."""
    key: str | None
    created: datetime
    prompt: str
    task: str
    conversation: bool
    verifier: GradableKind | None
    gold: str | list[str] | None
    preference: Preference | None
    budget: dict[str, float | None]
    grade: Verdict | None = None
    """Set when the episode's answer was graded against the gold."""
    response_ids: list[str] = field(default_factory=list)
    """The responses of the episode so far."""

    def for_system(self, system: System, config: RunConfig) -> "EpisodeFacts":
        """The same request's facts for ``system`` under ``config`` (a shadow beside the live one)."""
        return EpisodeFacts(
            self.model, system, self.key, self.created, self.prompt, self.task, self.conversation, self.verifier,
            self.gold, self.preference, budget_of(config), response_ids=list(self.response_ids),
        )  # fmt: skip

    def item(self, request_id: str) -> BenchmarkItem | str:
        """What the system solves: the task as written, or as a task of the request's kind."""
        if self.verifier is None:
            return self.task
        gold = self.gold if self.gold is not None else ""
        return BenchmarkItem(id=request_id, question=self.task, gold=gold, verifier=self.verifier)

    def record(self, episode_id: str, role: Role, trajectory: Trajectory) -> ServedEpisodeRecord:
        """The episode's record."""
        prices = {backend.model: backend.price for backend in self.system.pool.backends.values()}
        calls = [
            ServedCall(
                tool=result.call.name,
                worker=result.worker,
                status=result.status.value,
                usd=result.usage.usd,
                input_tokens=result.usage.input_tokens,
                output_tokens=result.usage.output_tokens,
                price=prices.get(result.worker) if result.worker else None,
            )
            for result in trajectory.results
        ]
        return ServedEpisodeRecord(
            id=episode_id, response_ids=self.response_ids, role=role, model=self.model, system=self.system.name,
            version=self.system.version, key=self.key, created=self.created, prompt=self.prompt, task=self.task,
            conversation=self.conversation, verifier=self.verifier, gold=self.gold, preference=self.preference,
            budget=self.budget, calls=calls, answer=trajectory.answer, stop_reason=str(trajectory.stop_reason),
            usd=trajectory.usage.usd, grade=self.grade, trajectory=trajectory,
        )  # fmt: skip


def budget_of(config: RunConfig) -> dict[str, float | None]:
    """The limits an episode runs under."""
    return {
        "max_usd": config.max_episode_usd,
        "max_turns": config.max_turns,
        "max_seconds": config.max_seconds,
        "max_total_tokens": config.max_total_tokens,
    }


def episode_facts(
    body: EpisodeRequest, conversation: Conversation, model: str, system: System, config: RunConfig, key: str | None
) -> EpisodeFacts:
    """The facts of the episode ``body`` starts on ``system`` under ``config``."""
    messages = [Message(role=m.role if m.role != "developer" else "system", content=m.text) for m in body.messages]
    return EpisodeFacts(
        model=model, system=system, key=key, created=datetime.now(UTC), prompt=prompt_key(messages),
        task=conversation.task_with_work(), conversation=bool(conversation.history or conversation.work or body.tools),
        verifier=body.podium.verifier, gold=body.podium.gold, preference=body.preference(), budget=budget_of(config),
    )  # fmt: skip


async def solved(
    facts: EpisodeFacts, grader: Grader, request_id: str, config: RunConfig, chat: Chat, *,
    seed: int | None, metadata: dict[str, Any], instruction: str | None = None,
) -> Trajectory:  # fmt: skip
    """The episode: ``facts.system`` solves the request's task, and the answer is graded against its gold (the
    verdict goes to ``facts.grade``)."""
    task = facts.item(request_id)
    if isinstance(task, str) and instruction is not None:
        task = f"{task}\n\n{instruction}"
    trajectory = await facts.system.solve(
        task, seed=seed, preference=facts.preference, settings=config, chat=chat, metadata=metadata
    )
    if isinstance(task, BenchmarkItem) and facts.gold is not None:
        facts.grade = await grader.grade_answer(task, trajectory.answer)
    return trajectory

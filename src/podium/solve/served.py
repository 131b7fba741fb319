"""Served traffic as records: what ``podium serve --served DIR`` writes for every ended episode and every feedback,
and what training data and gated redeploys read back.

A traffic directory holds two append-only JSON Lines logs (one synced line per record, :mod:`podium.solve.jsonl`):

* ``episodes.jsonl``: one :class:`ServedEpisodeRecord` per ended episode, live or shadow: the system's name and
  version, the API key's name, when, the task and the request's preference, budget, gold and task kind, every call
  with its worker and price, the answer, the grade given at serve time (when the request brought a gold), and the
  whole trajectory;
* ``feedback.jsonl``: one :class:`FeedbackRecord` per episode that got feedback (a label, a score or a reference
  answer, graded against the live answer and the shadow's).

Each episode's outcome (:func:`outcome`) is its feedback's where it has one (the application knows best), else its
grade at serve time, else none: an ungraded episode.
"""

import hashlib
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Literal

from pydantic import Field, NonNegativeFloat, NonNegativeInt

from podium.core.answers import VerifierKind
from podium.core.messages import Message
from podium.core.preference import Preference
from podium.core.record import Record
from podium.core.trajectory import Trajectory
from podium.costs.prices import ModelPrice
from podium.graders.verdict import Verdict
from podium.recording import normalise
from podium.solve.jsonl import scan_jsonl

EPISODES_FILE = "episodes.jsonl"
FEEDBACK_FILE = "feedback.jsonl"
SCORE_CORRECT = 0.5
"""A feedback score at or above this counts the answer as correct (a label ``good`` scores 1, ``bad`` 0)."""
GRADABLE = ("math", "qa", "multiple_choice")
"""Task kinds whose answers Podium grades against a textual gold (a request's ``podium.gold``, a feedback's
reference answer)."""
GradableKind = Literal["math", "qa", "multiple_choice"]
SHADOW_SUFFIX = ":shadow"
"""What a shadow episode's id adds to the live episode's."""
Role = Literal["live", "shadow"]
Label = Literal["good", "bad"]


class ServedCall(Record):
    """One call of a served episode: the tool, the worker that answered, its price and what it cost."""

    tool: str
    """The tool as the orchestrator called it."""
    worker: str | None = None
    """The model that answered it (``None`` for a tool)."""
    status: str
    """OK, PARSE_ERR, EXEC_ERR or TIMEOUT."""
    usd: NonNegativeFloat = 0.0
    """What it cost."""
    input_tokens: NonNegativeInt = 0
    output_tokens: NonNegativeInt = 0
    price: ModelPrice | None = None
    """The worker's price when the call ran (``None`` for a tool)."""


class ServedEpisodeRecord(Record):
    """One ended served episode, with everything needed to learn from it and to say what produced it."""

    id: str
    """The episode: its first response's id (``chatcmpl-…``), with ``:shadow`` for the candidate run beside it."""
    response_ids: list[str]
    """Every response of the episode (one per round of client calls, then the answer); feedback may name any."""
    role: Role = "live"
    """``live``: the client got its answer; ``shadow``: a candidate ran beside the live system, its answer kept."""
    model: str
    """The served model id the request named."""
    system: str
    """The name of the system that played it."""
    version: str
    """The system's version (:mod:`podium.solve.version`)."""
    key: str | None = None
    """The name of the request's API key (``None`` where the server needs none)."""
    created: datetime
    """When the request arrived (UTC)."""
    prompt: str
    """A hash of the conversation that started the episode (its messages, normalised): repeats of one prompt share
    it."""
    task: str
    """The task as the orchestrator was given it (the last user message, with work the conversation carried)."""
    conversation: bool = False
    """Whether the episode carried earlier turns or client tools (a task file holds one question, not such a chat)."""
    verifier: VerifierKind | None = None
    """The task kind the request named (``podium.verifier``): how its answer is extracted and graded."""
    gold: str | list[str] | None = None
    """The gold answer the request brought (``podium.gold``)."""
    preference: Preference | None = None
    """The request's preference."""
    budget: dict[str, float | None] = Field(default_factory=dict)
    """The limits the episode ran under: ``max_usd``, ``max_turns``, ``max_seconds``, ``max_total_tokens``."""
    calls: list[ServedCall] = Field(default_factory=list)
    """Every call, in order."""
    answer: str | None = None
    """The answer (before ``stop`` strings cut what the client saw)."""
    stop_reason: str
    """Why the episode stopped."""
    usd: NonNegativeFloat = 0.0
    """What the episode cost (orchestrator and calls)."""
    grade: Verdict | None = None
    """The answer graded against the request's gold, at serve time."""
    trajectory: Trajectory
    """The whole episode."""


class FeedbackRecord(Record):
    """What an application said about one served episode's answer."""

    episode_id: str
    """The live episode it is about (one feedback per episode)."""
    response_id: str
    """The response id the feedback named."""
    key: str | None = None
    """The API key that gave it (the episode's own)."""
    created: datetime
    """When it arrived (UTC)."""
    label: Label | None = None
    """``good`` or ``bad``."""
    score: float | None = Field(None, ge=0.0, le=1.0)
    """A score in [0, 1] (at least :data:`SCORE_CORRECT`: correct)."""
    reference: str | None = None
    """A reference answer, graded against the answers."""
    verifier: VerifierKind | None = None
    """The task kind the reference was graded as."""
    verdicts: dict[str, Verdict] = Field(default_factory=dict)
    """Episode id → its answer graded against ``reference`` (the live episode and its shadow)."""
    comment: str | None = None
    """Free text from the application, kept as given."""

    def same_outcome(self, other: "FeedbackRecord") -> bool:
        """Whether ``other`` says the same (a retry of this feedback rather than a different one)."""
        return (self.label, self.score, self.reference) == (other.label, other.score, other.reference)


class Outcome(Record):
    """Whether a served answer was right, and who said so."""

    correct: bool
    score: float
    source: Literal["gold", "label", "score", "reference"]
    """The request's gold graded at serve time, or the feedback's label, score or reference answer."""


def feedback_outcome(feedback: FeedbackRecord, episode_id: str, role: Role) -> Outcome | None:
    """The outcome a feedback gives one episode: a label or score speaks for the live answer only; a reference
    answer grades each answer it was graded against."""
    if feedback.reference is not None:
        verdict = feedback.verdicts.get(episode_id)
        return None if verdict is None else Outcome(correct=verdict.correct, score=verdict.score, source="reference")
    if role != "live":
        return None
    if feedback.label is not None:
        good = feedback.label == "good"
        return Outcome(correct=good, score=float(good), source="label")
    if feedback.score is not None:
        return Outcome(correct=feedback.score >= SCORE_CORRECT, score=feedback.score, source="score")
    return None


def outcome(episode: ServedEpisodeRecord, feedback: FeedbackRecord | None) -> Outcome | None:
    """The episode's outcome: its feedback's (:func:`feedback_outcome`), else its grade at serve time; ``None``:
    ungraded."""
    decided = None if feedback is None else feedback_outcome(feedback, episode.id, episode.role)
    if decided is None and episode.grade is not None:
        decided = Outcome(correct=episode.grade.correct, score=episode.grade.score, source="gold")
    return decided


def prompt_key(messages: list[Message]) -> str:
    """The hash that identifies a conversation's prompt: its messages' roles and normalised text."""
    digest = hashlib.sha256()
    for message in messages:
        digest.update(f"{message.role}\x00{normalise(message.content)}\x01".encode())
    return digest.hexdigest()[:16]


@dataclass
class ServedTraffic:
    """A traffic directory as read (never changed by reading): its episodes in order, the feedback by episode, and
    the lines that could not be read (a torn last line while the server writes, at most)."""

    episodes: list[ServedEpisodeRecord] = field(default_factory=list)
    feedback: dict[str, FeedbackRecord] = field(default_factory=dict)
    unreadable: int = 0

    def feedback_of(self, episode: ServedEpisodeRecord) -> FeedbackRecord | None:
        """The feedback on the episode's request (a shadow's is its live episode's)."""
        return self.feedback.get(episode.id.removesuffix(SHADOW_SUFFIX))

    def outcome(self, episode: ServedEpisodeRecord) -> Outcome | None:
        """The episode's outcome (:func:`outcome`)."""
        return outcome(episode, self.feedback_of(episode))


def read_traffic(directory: str | Path) -> ServedTraffic:
    """The episodes and feedback of a traffic directory (read-only; unreadable lines counted, not repaired)."""
    directory = Path(directory)
    episodes, bad_episodes = scan_jsonl(directory / EPISODES_FILE, ServedEpisodeRecord, lambda record: record.id)
    feedback, bad_feedback = scan_jsonl(directory / FEEDBACK_FILE, FeedbackRecord, lambda record: record.episode_id)
    return ServedTraffic(
        episodes=list(episodes.values()),  # type: ignore[arg-type]
        feedback=dict(feedback),  # type: ignore[arg-type]
        unreadable=len(bad_episodes) + len(bad_feedback),
    )

"""``POST /v1/feedback``: an application says how a served answer went, and the traffic directory keeps it.

The body names a response (any response id of the episode: a round of client calls or the answer) and one
outcome: a ``label`` (``good``/``bad``), a ``score`` in [0, 1], or a ``reference`` answer, which Podium grades
against the live answer and the shadow's with the grader of the task's kind (the request's ``podium.verifier``, or
the feedback's ``verifier`` where the request named none). The same API keys authorise it as the requests: a key
gives feedback only on its own responses (another key's response is answered as unknown, 404, so ids cannot be
probed).

Each episode takes one feedback, synced to disk before it is acknowledged:

* the same feedback again (a retry, before or after a restart) is answered 200 with ``status: duplicate`` and
  counted once;
* a different one is refused, 409 ``feedback_exists``, naming what was recorded;
* an unknown response id is 404 ``response_not_found``; one whose episode is still running is 409
  ``episode_running`` (its record is written as it ends).
"""

from datetime import UTC, datetime
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from podium.datasets.items import BenchmarkItem
from podium.graders.grader import Grader
from podium.serve.http import ApiError, invalid_request
from podium.serve.traffic import EpisodeEntry, TrafficLog
from podium.solve.served import GRADABLE, FeedbackRecord, GradableKind, Label, feedback_outcome

MAX_COMMENT_CHARS = 4000
"""Longest comment kept with a feedback."""


class FeedbackRequest(BaseModel):
    """The body of ``POST /v1/feedback``."""

    model_config = ConfigDict(extra="forbid")
    response_id: str = Field(min_length=1, max_length=200)
    """A response of the episode (``id`` of a chat completion or of its chunks)."""
    label: Label | None = None
    """``good`` or ``bad``."""
    score: float | None = Field(None, ge=0.0, le=1.0)
    """A score in [0, 1]."""
    reference: str | None = Field(None, min_length=1)
    """A reference answer, graded against the answers."""
    verifier: GradableKind | None = None
    """The task kind to grade the reference as, where the request named none."""
    comment: str | None = Field(None, max_length=MAX_COMMENT_CHARS)
    """Free text, kept as given."""

    @model_validator(mode="after")
    def _one_outcome(self) -> Self:
        given = [name for name in ("label", "score", "reference") if getattr(self, name) is not None]
        if len(given) != 1:
            raise ValueError(f"give one outcome: label, score or reference (given: {given or 'none'})")
        if self.verifier is not None and self.reference is None:
            raise ValueError("verifier grades a reference answer; this feedback gives none")
        return self


def not_found(response_id: str) -> ApiError:
    return ApiError(
        404, f"no response '{response_id}' of this API key is known here", "invalid_request_error",
        param="response_id", code="response_not_found",
    )  # fmt: skip


class FeedbackDesk:
    """Takes feedback for the episodes of a traffic directory."""

    def __init__(self, traffic: TrafficLog, grader: Grader) -> None:
        self.traffic = traffic
        self.grader = grader

    async def give(self, body: FeedbackRequest, key: str | None, running: bool) -> tuple[FeedbackRecord, bool]:
        """The feedback recorded for ``body``'s episode and whether it was recorded now (``False``: the same
        feedback was recorded before). ``running``: whether the response's episode is still running here."""
        entry = self.traffic.episode(body.response_id)
        if entry is None or entry.key != key:
            if running:
                raise ApiError(
                    409, f"the episode of response '{body.response_id}' is still running; give feedback once it "
                    "has answered", "invalid_request_error", param="response_id", code="episode_running",
                )  # fmt: skip
            raise not_found(body.response_id)
        record = FeedbackRecord(
            episode_id=entry.id, response_id=body.response_id, key=key, created=datetime.now(UTC), label=body.label,
            score=body.score, reference=body.reference, comment=body.comment,
        )  # fmt: skip
        earlier = self._earlier(record)
        if earlier is not None:
            return earlier, False
        if body.reference is not None:
            record = await self._graded(record, entry, body.verifier)
            earlier = self._earlier(record)  # another request may have recorded one while this one graded
            if earlier is not None:
                return earlier, False
        return self.traffic.feedback.append(record), True

    def _earlier(self, record: FeedbackRecord) -> FeedbackRecord | None:
        """The feedback already recorded for the episode, when it says the same; a 409 when it differs."""
        earlier = self.traffic.feedback.done.get(record.episode_id)
        if earlier is None:
            return None
        if not earlier.same_outcome(record):
            said = {"label": earlier.label, "score": earlier.score, "reference": earlier.reference}
            shown = ", ".join(f"{name} {value!r}" for name, value in said.items() if value is not None)
            raise ApiError(
                409, f"the episode of response '{record.response_id}' has feedback already ({shown}); each episode "
                "takes one", "invalid_request_error", param="response_id", code="feedback_exists",
            )  # fmt: skip
        return earlier

    async def _graded(self, record: FeedbackRecord, entry: EpisodeEntry, kind: GradableKind | None) -> FeedbackRecord:
        """``record`` with its reference graded against the live answer and each shadow's."""
        chosen = entry.verifier or kind
        if chosen not in GRADABLE:
            raise invalid_request(
                f"the request of response '{entry.id}' named no task kind (podium.verifier): give the feedback's "
                f"verifier, one of {list(GRADABLE)}, to grade the reference with",
                "verifier",
            )
        item = BenchmarkItem(id=entry.id, question=entry.task, gold=str(record.reference), verifier=chosen)
        verdicts = {
            answered.id: await self.grader.grade_answer(item, answered.answer)
            for answered in self.traffic.answers(entry)
        }
        return record.model_copy(update={"verifier": chosen, "verdicts": verdicts})


def feedback_body(record: FeedbackRecord, entry: EpisodeEntry | None, recorded: bool) -> dict[str, Any]:
    """The response to a feedback: what was recorded (or recorded before) and the outcome it gives the answer."""
    body: dict[str, Any] = {
        "object": "feedback",
        "episode_id": record.episode_id,
        "response_id": record.response_id,
        "status": "recorded" if recorded else "duplicate",
        "created": record.created.isoformat(),
    }
    if entry is not None:
        decided = feedback_outcome(record, entry.id, "live")
        body["outcome"] = None if decided is None else decided.model_dump(mode="json")
    if record.verdicts:
        body["verdicts"] = {episode: verdict.model_dump(mode="json") for episode, verdict in record.verdicts.items()}
    return body

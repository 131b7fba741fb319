"""The verifier of outcome-only recordings: the answer is a replayed model's recorded one, which the recording
keeps as right or wrong but not as text (:func:`podium.backends.replay.recorded_reference`). The gold lists the
models recorded right on the question; an answer is right when it refers to one of them."""

from collections.abc import Sequence

from podium.backends.replay import referenced_model
from podium.graders.verdict import Verdict


class RecordedVerifier:
    """Right when the answer is the recorded answer of a model the gold lists as right."""

    name = "recorded outcome (replay)"

    async def verify(self, answer: str, gold: str | Sequence[str], question: str | None = None) -> Verdict:
        right = [gold] if isinstance(gold, str) else list(gold)
        model = referenced_model(answer)
        if model is None:
            return Verdict.binary(False, reason="the answer is not a replayed model's recorded answer")
        correct = model in right
        return Verdict.binary(correct, extracted=model, reason=None if correct else f"{model} was recorded wrong")

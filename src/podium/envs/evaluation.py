"""Was a tool-use task solved? The three criteria of SPEC §6.3, by replay.

(1) execution correctness: the database after replaying the golden actions equals (same hash of
``json.dumps(db, sort_keys=True)``) the database after replaying the trajectory's calls; (2) process fidelity:
every ``communicate_info`` item appears in one of the agent's messages (case-insensitive, commas stripped, as
tau2 does); (3) operation completeness: every database entry the golden actions touched (read or written) is
touched by the trajectory too. Replays start from fresh databases, so a trajectory loaded from disk can be
judged the same way as a live one.
"""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from podium.core.calls import ToolCall
from podium.core.trajectory import Trajectory
from podium.envs.domain import Action, ActionOutcome, Domain, Task
from podium.envs.toolkit import Entry


@dataclass(frozen=True)
class Replay:
    """The result of running a list of actions on a fresh database."""

    outcomes: list[ActionOutcome]
    db_hash: str
    initial_hash: str

    @property
    def ok(self) -> bool:
        """Whether every action succeeded."""
        return all(outcome.ok for outcome in self.outcomes)

    @property
    def changed(self) -> bool:
        """Whether the database differs from where it started."""
        return self.db_hash != self.initial_hash

    @property
    def touched(self) -> frozenset[Entry]:
        return frozenset().union(*(outcome.touched for outcome in self.outcomes))

    @property
    def errors(self) -> list[str]:
        return [f"{outcome.name}: {outcome.error}" for outcome in self.outcomes if not outcome.ok]


def replay(domain: Domain, task: Task | None, actions: Iterable[Action | ToolCall]) -> Replay:
    """Run ``actions`` in order on a fresh environment; failures are recorded and the replay goes on."""
    environment = domain.environment(task)
    outcomes = [environment.call(item.name, dict(item.arguments or {})) for item in actions]
    return Replay(outcomes, environment.db.state_hash(), domain.initial_hash)


def _folded(text: str) -> str:
    return text.lower().replace(",", "")


def missing_information(info: Sequence[str], messages: Sequence[str]) -> list[str]:
    """The items of ``info`` that no message mentions (case-insensitive, commas stripped)."""
    folded = [_folded(message) for message in messages]
    return [item for item in info if not any(_folded(item) in message for message in folded)]


@dataclass(frozen=True)
class TaskCriteria:
    """The three criteria for one trajectory on one task."""

    golden: Replay
    trajectory: Replay
    missing_info: list[str] = field(default_factory=list)
    """communicate_info items never said to the user."""
    missing_entries: list[Entry] = field(default_factory=list)
    """Entries the golden actions touched and the trajectory did not."""

    @property
    def execution_correct(self) -> bool:
        return self.golden.db_hash == self.trajectory.db_hash

    @property
    def process_fidelity(self) -> bool:
        return not self.missing_info

    @property
    def operation_complete(self) -> bool:
        return not self.missing_entries

    @property
    def solved(self) -> bool:
        return self.execution_correct and self.process_fidelity and self.operation_complete


def judge_actions(
    domain: Domain,
    task: Task,
    actions: Iterable[Action | ToolCall],
    messages: Sequence[str],
    golden: Replay | None = None,
) -> TaskCriteria:
    """The three criteria for a trajectory given as its calls and the agent's messages to the user."""
    golden = golden if golden is not None else replay(domain, task, task.golden_actions)
    attempt = replay(domain, task, actions)
    return TaskCriteria(
        golden=golden,
        trajectory=attempt,
        missing_info=missing_information(task.communicate_info, messages),
        missing_entries=sorted(golden.touched - attempt.touched),
    )


def trajectory_episode(trajectory: Trajectory) -> tuple[list[ToolCall], list[str]]:
    """The calls a trajectory executed and the agent's messages (its turns' text and final
    answer; observations are excluded, or tool output would count as telling the user)."""
    calls = [result.call for result in trajectory.results if result.executed]
    messages = [turn.output for turn in trajectory.turns]
    if trajectory.answer:
        messages.append(trajectory.answer)
    return calls, messages


def judge_trajectory(domain: Domain, task: Task, trajectory: Trajectory, golden: Replay | None = None) -> TaskCriteria:
    """The three criteria for a recorded trajectory: the domain calls it executed are replayed (calls to the
    pool's own tools, such as python or a worker, never touch the database and are left out)."""
    calls, messages = trajectory_episode(trajectory)
    actions = domain.toolkit.actions()
    return judge_actions(domain, task, [call for call in calls if call.name in actions], messages, golden=golden)

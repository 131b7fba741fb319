"""Environment check: the outcome b of a tool-use trajectory is 1 when the three tau2 criteria hold (SPEC §6.3)."""

from podium.core.trajectory import Trajectory
from podium.envs.domain import Domain, Task
from podium.envs.evaluation import Replay, TaskCriteria, judge_trajectory, replay
from podium.graders.verdict import Verdict


class EnvironmentVerifier:
    """Outcome b of a tool-use trajectory: 1 when all three criteria hold. Golden replays are cached."""

    def __init__(self, domain: Domain) -> None:
        self.domain = domain
        self._golden: dict[str, Replay] = {}

    def criteria(self, trajectory: Trajectory, task: Task) -> TaskCriteria:
        """The three criteria in detail."""
        if task.id not in self._golden:
            self._golden[task.id] = replay(self.domain, task, task.golden_actions)
        return judge_trajectory(self.domain, task, trajectory, golden=self._golden[task.id])

    async def verify(self, answer: Trajectory, gold: Task) -> Verdict:
        """b for ``answer`` (a trajectory) on ``gold`` (the task)."""
        result = self.criteria(answer, gold)
        if not result.golden.ok:
            return Verdict.undecided(f"task {gold.id}: golden actions fail: {'; '.join(result.golden.errors)}")
        failures = []
        if not result.execution_correct:
            failures.append("database differs from the golden replay")
        if result.missing_info:
            failures.append(f"never communicated {result.missing_info}")
        if result.missing_entries:
            failures.append(f"did not operate on {[f'{t}/{k}' for t, k in result.missing_entries]}")
        return Verdict.binary(result.solved, reason="; ".join(failures) or None)

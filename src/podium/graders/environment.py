"""Environment check: the outcome b of a tool-use trajectory is the official tau2 reward (SPEC §6.3).

The verdict is correct when tau2's reward is 1 (:mod:`podium.envs.evaluation`); its score is the reward. The full
grade (the DB / COMMUNICATE / ACTION parts and Podium's stricter ``strict_solved``, under their own names) is
written into the trajectory's ``metadata["tau2"]``, so an evaluation record keeps both.
"""

from typing import Any

from podium.core.trajectory import Trajectory
from podium.envs.domain import Domain
from podium.envs.evaluation import Tau2Grade, grade_trajectory
from podium.envs.transcript import TranscriptError
from podium.graders.verdict import Verdict

GRADE_KEY = "tau2"
"""Trajectory metadata: the grade's summary."""


class EnvironmentVerifier:
    """Outcome b of a tool-use trajectory on a domain's task: the official tau2 reward."""

    def __init__(self, domain: Domain) -> None:
        self.domain = domain

    def grade(self, trajectory: Trajectory, task: Any) -> Tau2Grade:
        """The tau2 reward, its parts and the strict verdict. Raises TranscriptError for a trajectory that is not
        a readable tau2 conversation."""
        return grade_trajectory(self.domain, task, trajectory)

    async def verify(self, answer: Trajectory, gold: Any) -> Verdict:
        """b for ``answer`` (a trajectory) on ``gold`` (the task); the grade goes to ``metadata["tau2"]``."""
        try:
            grade = self.grade(answer, gold)
        except TranscriptError as error:
            return Verdict.undecided(str(error))
        answer.metadata[GRADE_KEY] = grade.summary()
        return Verdict(correct=grade.reward == 1.0, score=grade.reward, reason=reason(grade))


def reason(grade: Tau2Grade) -> str | None:
    """Why the tau2 reward is below 1, and the strict verdict, in one line."""
    failures = [grade.note] if grade.note else []
    if grade.db == 0.0:
        failures.append("DB: the database differs from the gold replay")
    if grade.strict.missing_info:
        failures.append(f"COMMUNICATE: never told the user {grade.strict.missing_info}")
    if grade.missed_actions:
        failures.append(f"ACTION: no call matches {grade.missed_actions}")
    if grade.strict.missing_entries and grade.reward == 1.0:
        entries = [f"{table}/{key}" for table, key in grade.strict.missing_entries]
        failures.append(f"strict: did not operate on {entries}")
    return "; ".join(failures) or None

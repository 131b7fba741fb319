"""Scoring a results file in the format ``tau2 run`` saves (tau2's ``Results``: run info, tasks, simulations with
their messages), with Podium's tau2 grading (:mod:`podium.envs.evaluation`): no LLM is called.

Each simulation is graded against the task as the file records it, on the database of the domain the file names,
loaded from Podium's tau2 data directory (the same data tau2 ships). The file's own rewards are ignored.
"""

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from podium.envs.domain import Domain, load_domain, tau2_module
from podium.envs.evaluation import Tau2Grade, grade_messages
from podium.errors import PodiumError


class ResultsError(PodiumError, ValueError):
    """A results file cannot be read or scored as a whole (missing, not tau2 results, unknown domain)."""


def read_results(path: str | Path) -> Any:
    """tau2's ``Results`` from ``path``, or a :class:`ResultsError` that says what is wrong with the file."""
    path = Path(path)
    model = tau2_module("tau2.data_model.simulation").Results
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ResultsError(f"cannot read {path}: {error.strerror or error}") from error
    try:
        return model.model_validate_json(text)
    except ValidationError as error:
        problems = "; ".join(f"{'/'.join(map(str, e['loc']))}: {e['msg']}" for e in error.errors()[:3])
        raise ResultsError(f"{path} is not a tau2 results file ({error.error_count()} problems: {problems})") from error


@dataclass(frozen=True)
class SimulationScore:
    """One simulation of a results file: its grade, or why it could not be graded."""

    id: str
    task_id: str
    trial: int | None
    grade: Tau2Grade | None
    error: str | None = None

    def row(self) -> dict[str, Any]:
        """A JSON-ready line: ``id``, ``task_id``, ``trial``, ``reward``, the parts and the strict verdict."""
        head = {"id": self.id, "task_id": self.task_id, "trial": self.trial}
        if self.grade is None:
            return {**head, "reward": None, "error": self.error}
        summary = self.grade.summary()
        return {**head, "reward": summary.pop("tau2_reward"), **summary, "error": None}


def results_domain(results: Any, directory: str | Path | None = None) -> Domain:
    """The Podium domain of a results file (its environment info names it)."""
    name = results.info.environment_info.domain_name
    try:
        return load_domain(name, directory)
    except (KeyError, FileNotFoundError) as error:
        raise ResultsError(f"the results' domain {name!r} cannot be loaded: {error}") from error


def score_simulation(domain: Domain, tasks: dict[str, Any], simulation: Any) -> SimulationScore:
    """Grade one simulation; a simulation whose task is missing or whose records disagree with tau2's
    environment comes back with ``error`` set."""
    head = {"id": simulation.id, "task_id": simulation.task_id, "trial": simulation.trial}
    task = tasks.get(simulation.task_id)
    if task is None:
        return SimulationScore(**head, grade=None, error=f"task {simulation.task_id!r} is not in the file's tasks")
    try:
        grade = grade_messages(domain, task, simulation.messages, simulation.termination_reason)
    except ValueError as error:
        return SimulationScore(**head, grade=None, error=" ".join(str(error).split())[:500])
    return SimulationScore(**head, grade=grade)


def score_results(results: Any, directory: str | Path | None = None) -> Iterator[SimulationScore]:
    """Grade every simulation of ``results`` in file order."""
    domain = results_domain(results, directory)
    tasks = {task.id: task for task in results.tasks}
    for simulation in results.simulations:
        yield score_simulation(domain, tasks, simulation)

"""ToolScale's task filters (ToolOrchestra §3.3): a task stays only if (1) its golden calls execute without error
(and read-tagged functions leave the database as it was), (2) it cannot be solved without any action, and (3) some
orchestrator over the pool solves it within k attempts (the three tau2 criteria, against a simulated user)."""

import asyncio
from typing import Any

from podium.data.solver import Solver
from podium.data.sources import SourcedItem
from podium.data.synth.config import StepResult
from podium.datasets.items import BenchmarkItem
from podium.envs.domain import ActionKind, Domain, golden_actions
from podium.envs.evaluation import performed_grade
from podium.graders.environment import EnvironmentVerifier
from podium.solve.system import sample_seed


def _execute(domain: Domain, task: Any) -> str | None:
    environment = domain.environment(task)
    for action in golden_actions(task):
        if action.name not in environment.kinds:
            return "golden call names no function"
        before = environment.db_hash()
        if not environment.call(action.name, dict(action.arguments)).ok:
            return "golden call fails"
        if environment.kinds[action.name] is ActionKind.READ and environment.db_hash() != before:
            return "read-tagged function changes the database"
    return None


async def golden_problem(domain: Domain, task: Any, timeout_s: float) -> str | None:
    """Why the task's (a tau2 ``Task``) golden calls do not execute cleanly on a fresh database (``None`` when
    they do)."""
    if not golden_actions(task):
        return "no golden call"
    try:
        return await asyncio.wait_for(asyncio.to_thread(_execute, domain, task), timeout_s)
    except TimeoutError:
        return "golden calls did not finish in time"


def solvable_without_action(domain: Domain, task: Any) -> bool:
    """Whether an agent that calls nothing and just says the required information is solved by Podium's strict
    verdict (the tau2 reward is 1 and the three criteria of SPEC §6.3 hold)."""
    return performed_grade(domain, task, []).strict_solved


async def pass_at_k(
    solver: Solver, domain: Domain, task: Any, tau2_dir: str, *, k: int, temperature: float, seed: int
) -> StepResult:
    """The solver's attempts at a task until one solves it (at most ``k``)."""
    instructions = task.user_scenario.instructions
    request = instructions if isinstance(instructions, str) else instructions.reason_for_call
    item = BenchmarkItem(
        id=task.id,
        question=str(request),
        gold=task.id,
        verifier="environment",
        metadata={"domain": domain.name, "tau2_dir": tau2_dir},
    )
    entry = SourcedItem(item, domain.name)
    verifier = EnvironmentVerifier(domain)
    usd = 0.0
    for attempt in range(k):
        trajectory = await solver.attempt(entry, temperature=temperature, seed=sample_seed(seed, task.id, attempt))
        usd += trajectory.usage.usd
        if (await verifier.verify(trajectory, task)).correct:
            return StepResult(key=task.id, value={"solved_at": attempt + 1}, usd=usd)
    return StepResult(key=task.id, value={"solved_at": None}, reason=f"not solved in {k} attempt(s)", usd=usd)

"""An evaluation run's tau2 trajectories as a tau2 results file: the ``Results`` JSON that ``tau2 run`` saves, so
tau2's own tools (and ``podium env score``) read Podium's runs.

Each attempt at a tau2 item becomes a ``SimulationRun`` (its sample index is the trial) with tau2's
``RewardInfo`` from Podium's tau2 grading, which is tau2's evaluator (:mod:`podium.envs.evaluation`). Attempts
whose system failed before a conversation took place have no tau2 messages and are left out.
"""

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from podium.datasets.benchmark import shared_data_dir
from podium.envs.domain import load_domain
from podium.envs.evaluation import grade_trajectory
from podium.envs.transcript import DIALOGUE_KEY, results, simulation
from podium.evaluate.runner import EvalError, EvalRecord, load_run


def _tau2_records(records: list[EvalRecord]) -> list[EvalRecord]:
    return [record for record in records if DIALOGUE_KEY in record.trajectory.metadata]


def export_tau2_results(
    run: str | Path,
    path: str | Path,
    *,
    data_dir: str | Path | None = None,
    track: Callable[[Iterable[EvalRecord], int], Iterable[EvalRecord]] | None = None,
) -> tuple[int, int]:
    """Write the tau2 trajectories of run directory ``run`` to ``path`` as tau2 results; returns (written, left
    out). ``track`` wraps the records being graded (a progress display: about a second each)."""
    manifest, records = load_run(run)
    kept = _tau2_records(records)
    domains = {record.trajectory.metadata.get("domain") for record in kept}
    if not kept:
        raise EvalError(f"{run} holds no tau2 conversation to export ({manifest.benchmark})")
    if len(domains) != 1:
        raise EvalError(f"{run} mixes tau2 domains {sorted(map(str, domains))}; a results file holds one")
    domain = load_domain(str(domains.pop()), shared_data_dir(data_dir) / "tau2")
    simulations: list[Any] = []
    for record in track(kept, len(kept)) if track else kept:
        trajectory = record.trajectory
        run_of = simulation(trajectory, domain, trial=record.sample)
        run_of.reward_info = grade_trajectory(domain, domain.task(run_of.task_id), trajectory).reward_info
        simulations.append(run_of)
    user = kept[0].trajectory.metadata.get("user_model")
    max_turns = manifest.system_config.get("max_turns")
    saved = results(
        domain,
        simulations,
        agent=manifest.system,
        user=str(user) if user else None,
        max_steps=max_turns if isinstance(max_turns, int) else 0,
    )
    saved.save(Path(path))
    return len(simulations), len(records) - len(kept)

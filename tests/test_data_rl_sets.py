"""``podium data filter-rl`` and ``podium data curriculum`` with scripted solvers: pass-rate bands, Uno's split,
augmentation and fallback promotions counted by hand, provenance, infrastructure failures, and RL tasks that
``podium train grpo`` reads with their preference for ToolOrchestra's reward."""

import asyncio
import json

from podium.core.preference import Preference
from podium.core.trajectory import Trajectory
from podium.data.curriculum import CurriculumConfig, curriculum
from podium.data.difficulty import DifficultyConfig, filter_rl
from podium.data.solver import worker_solver
from podium.rewards.registry import build_reward
from podium.train.config import GRPOConfig
from podium.train.scoring import task_preference
from podium.train.tasks import load_tasks
from support.servers import FaultServer
from tests.data_fixtures import scripted_worker, write_tasks

TASKS = [("q1", "What is 12 * 34?", "408"), ("q2", "What is 2 + 2?", "4"), ("q3", "What is 3 + 4?", "7")]


def boxed(*answers: object) -> list[str]:
    return [f"So the answer is \\boxed{{{answer}}}." for answer in answers]


def solver(name: str, replies: list[str]) -> dict:
    return {"name": name, "pool": {"workers": [scripted_worker(name, replies)], "tools": []}, "max_turns": 2}


def lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_filter_rl_keeps_questions_inside_the_band_with_a_preference_each(tmp_path):
    tasks = write_tasks(tmp_path / "tasks.jsonl", TASKS)
    preferences = tmp_path / "prefs.jsonl"
    preferences.write_text(json.dumps({"instruction": "Be quick.", "weights": {"outcome": 1.0, "latency": 1.0}}) + "\n")
    replies = boxed(408, 408, 408, 408, 4, 5, 4, 5, 1, 1, 1, 1)  # q1 always, q2 half the time, q3 never
    pool = {"workers": [scripted_worker("worker", replies)], "tools": []}
    config = DifficultyConfig(
        out=str(tmp_path / "rl"), tasks=str(tasks), samples=4, concurrency=1, preferences=str(preferences),
        solver=worker_solver(pool, None),
    )  # fmt: skip
    funnel = asyncio.run(filter_rl(config, progress=False))
    band = funnel.steps[1]
    assert (band.entered, band.kept, band.left) == (3, 1, {"always solved": 1, "never solved": 1})
    [row] = lines(tmp_path / "rl" / "rl.jsonl")
    assert (row["id"], row["metadata"]["pass_rate"], row["metadata"]["attempts"]) == ("q2", 0.5, 4)
    assert row["metadata"]["provenance"]["stage"] == "filter-rl" and row["metadata"]["provenance"]["model"] == "worker"
    assert row["metadata"]["decisions"] == [
        {"stage": "filter-rl", "filter": "pass rate band", "kept": True, "reason": "pass rate 0.5 in (0, 1)"}
    ]

    # podium train grpo reads the set; the task's preference reaches ToolOrchestra's reward through the episode.
    [item] = load_tasks(GRPOConfig(tasks=str(tmp_path / "rl" / "rl.jsonl"), output_dir=str(tmp_path / "o")))
    preference = task_preference(item)
    assert preference == Preference(instruction="Be quick.", weights={"outcome": 1.0, "latency": 1.0})
    fast = Trajectory(question=item.question, answer="4", wall_s=1.0, preference=preference)
    slow = fast.model_copy(update={"wall_s": 9.0})
    rewards = build_reward("toolorchestra", tools=[])([fast, slow], [True, True])
    # Both are right, so outcome normalises to 0 over the batch; the faster one gets the latency weight.
    assert rewards == [1.0, 0.0]


def test_filter_rl_leaves_infrastructure_failures_out_of_the_rates(tmp_path):
    tasks = write_tasks(tmp_path / "tasks.jsonl", TASKS[:1])
    with FaultServer(["500"]).running() as url:
        remote = {"name": "remote", "backend": "http", "model": "m", "base_url": url, "max_retries": 0,
                  "price": {"input_per_mtok": 0, "output_per_mtok": 0}}  # fmt: skip
        config = DifficultyConfig(
            out=str(tmp_path / "rl"), tasks=str(tasks), samples=2, solver=worker_solver({"workers": [remote]}, None)
        )
        funnel = asyncio.run(filter_rl(config, progress=False))
    assert funnel.steps[1].left == {"every answer lost to infrastructure failures": 1}
    assert funnel.notes == ["2 answer(s) lost to infrastructure failures were left out of the pass rates"]


def test_curriculum_splits_promotes_and_records_each_teacher(tmp_path):
    tasks = write_tasks(
        tmp_path / "tasks.jsonl", [*TASKS, ("q4", "What is 4 + 5?", "9"), ("q5", "What is 2 + 3?", "5")]
    )
    wrong = [1, 1, 1]
    cold = solver("pi0", boxed(*wrong, 4, 4, 4, *wrong, *wrong, *wrong))  # solves q2 only
    teacher = solver(
        "teacher",
        boxed(408, 1, 1, *wrong, *wrong, *wrong)  # pass@3: q1 solved; q3, q4, q5 not
        + boxed(408, 1, 1, 7, 1, *wrong, *wrong),  # augmentation: q1 at 0.5/1.0; q3, q4, q5 at 0.3/0.7/1.0
    )
    fallback = [solver("strong", boxed(*wrong, *wrong)), solver("stronger", boxed(9, 1, 1, *wrong))]
    config = CurriculumConfig(
        out=str(tmp_path / "cur"), tasks=str(tasks), cold_start=cold, teacher=teacher, fallback=fallback,
        concurrency=1,
    )  # fmt: skip
    funnel = asyncio.run(curriculum(config, progress=False))
    steps = [(step.name, step.entered, step.kept, step.left) for step in funnel.steps]
    assert steps == [
        ("cold-start π0 pass@3", 5, 4, {"solved by π0 (no learning signal)": 1}),
        ("teacher π* pass@3", 4, 3, {"→ D_SFT: teacher solved": 1}),
        ("RL pool: augmentation", 3, 2, {"→ D_SFT: passed at augmentation": 1}),
        ("RL pool: fallback strong", 2, 2, {}),
        ("RL pool: fallback stronger", 2, 1, {"→ D_SFT: passed by stronger": 1}),
        ("SFT trajectories", 11, 4, {"wrong answer": 7}),
    ]
    assert funnel.outputs == {"sft.jsonl": 4, "rl.jsonl": 1, "failures.jsonl": 22}
    sft = [(row["item_id"], row["provenance"]["solver"], row["provenance"]["distillation_pass"],
            row["provenance"]["temperature"]) for row in lines(tmp_path / "cur" / "sft.jsonl")]  # fmt: skip
    assert sft == [
        ("q1", "teacher", "primary", 1.0),
        ("q1", "teacher", "augmentation", 0.5),
        ("q3", "teacher", "augmentation", 0.7),
        ("q4", "stronger", "fallback", 1.0),
    ]
    [rl] = lines(tmp_path / "cur" / "rl.jsonl")
    assert rl["id"] == "q5" and rl["metadata"]["provenance"]["solver"] == "teacher"
    assert [decision["filter"] for decision in rl["metadata"]["decisions"]] == [
        "cold-start π0 pass@3", "teacher π* pass@3", "RL pool: augmentation", "RL pool: fallback strong",
        "RL pool: fallback stronger",
    ]  # fmt: skip


def test_curriculum_drops_questions_whose_cold_start_attempts_all_failed_for_infrastructure(tmp_path):
    tasks = write_tasks(tmp_path / "tasks.jsonl", TASKS[:1])
    with FaultServer(["500"]).running() as url:
        remote = {"name": "remote", "backend": "http", "model": "m", "base_url": url, "max_retries": 0,
                  "price": {"input_per_mtok": 0, "output_per_mtok": 0}}  # fmt: skip
        config = CurriculumConfig(
            out=str(tmp_path / "cur"), tasks=str(tasks), cold_start={"pool": {"workers": [remote]}},
            teacher=solver("teacher", boxed(408)),
        )  # fmt: skip
        funnel = asyncio.run(curriculum(config, progress=False))
    assert funnel.steps[0].left == {"infrastructure: every π0 attempt failed": 1}
    assert funnel.outputs == {"sft.jsonl": 0, "rl.jsonl": 0, "failures.jsonl": 0}

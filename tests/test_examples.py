"""Every script under examples/ and experiments/ runs, in its quick mode where it has one, and its output is checked:
the demo's teacher data (every episode right, every call OK, every reply within the grammar it was decoded
under), the CPU training demo (teacher trajectories, SFT, GRPO and the evaluations between them), and collection
then SFT on the embedded model. The llama.cpp example server runs in ``tests/test_llamacpp.py`` under
``make test-extras`` (llama.cpp is compiled from source there)."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from podium.core.calls import Status
from podium.core.trajectory import read_trajectories
from podium.pool.summarizer import SUMMARIZER_PROMPT

ROOT = Path(__file__).resolve().parent.parent
RUN_BY = {
    "examples/data_collect_sft.sh": "tests/test_examples.py",
    "examples/demo/make_sft_data.py": "tests/test_examples.py",
    "examples/train_cpu_demo.py": "tests/test_examples.py",
    "examples/llamacpp/serve_smollm2.py": "tests/test_llamacpp.py",
    "examples/serve_frameworks.py": "tests/test_serve_frameworks.py",
    "experiments/flywheel/traffic.py": "tests/test_flywheel.py",
}
"""Each shipped script → the test file that runs it."""


def test_every_shipped_script_is_run_by_a_test():
    scripts = {path.relative_to(ROOT).as_posix() for folder in ("examples", "experiments")
               for suffix in ("py", "sh") for path in (ROOT / folder).rglob(f"*.{suffix}")}  # fmt: skip
    assert scripts == set(RUN_BY)
    for script, test in RUN_BY.items():
        assert script in (ROOT / test).read_text(encoding="utf-8")


def run(arguments: list[str], timeout: float, **environment: str) -> subprocess.CompletedProcess:
    completed = subprocess.run(
        arguments, cwd=ROOT, capture_output=True, text=True, timeout=timeout, env={**os.environ, **environment}
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    return completed


def value(question: str) -> str:
    """What the arithmetic in ``question`` evaluates to (our own integers)."""
    expression = re.search(r"\d[\d\s*+\-]*\d", question).group(0)
    return str(eval(expression))  # digits and operators only, matched above


def test_make_sft_data_writes_right_episodes_of_every_policy_and_the_workers_replies(tmp_path):
    out = tmp_path / "sft.jsonl"
    completed = run([sys.executable, "examples/demo/make_sft_data.py", "--per-policy", "1", "--out", str(out)], 300)
    assert completed.stdout.strip() == f"wrote 5 trajectories to {out}"
    trajectories = list(read_trajectories(out))
    episodes = [trajectory for trajectory in trajectories if trajectory.turns]
    assert [trajectory.metadata["policy"] for trajectory in episodes] == ["serial", "parallel", "dag"]
    for episode in episodes:
        assert episode.answer == value(episode.question), episode.question
        assert episode.results and all(result.status is Status.OK for result in episode.results)
    # The parallel policy's summarizer and the dag policy's execute_python worker, played by the teacher.
    summary, program = (trajectory.messages for trajectory in trajectories if not trajectory.turns)
    assert summary[0].content == SUMMARIZER_PROMPT and summary[-1].content.endswith(f"\\boxed{{{episodes[1].answer}}}")
    assert json.loads(program[-1].content)["code"].startswith("print(")


@pytest.mark.slow
def test_the_cpu_training_demo_runs_every_phase_in_its_quick_mode(tmp_path, tiny_model):
    # from the tiny stand-in for SmolLM2 (tests/tiny_model.py): every phase runs and reports, whatever it learns
    demo = [sys.executable, "examples/train_cpu_demo.py", "--quick", "--out", str(tmp_path)]
    completed = run([*demo, "--model", str(tiny_model)], 600)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert list(summary["results"]) == ["before SFT", "after SFT", "after GRPO"]
    assert all(0.0 <= row["accuracy"] <= 1.0 and row["usd"] > 0 for row in summary["results"].values())
    assert [point["step"] for point in summary["grpo_curve"]] == [1]
    assert all((tmp_path / phase / "adapter_config.json").exists() for phase in ("sft", "grpo"))
    teacher = list(read_trajectories(tmp_path / "sft.jsonl"))
    assert len(teacher) == 1 and all(trajectory.answer == value(trajectory.question) for trajectory in teacher)
    assert "GRPO training curve" in completed.stdout and "after GRPO" in completed.stdout


@pytest.mark.slow
def test_collection_then_sft_on_the_embedded_model(tmp_path):
    podium = str(Path(sys.executable).parent / "podium")
    run(["examples/data_collect_sft.sh", str(tmp_path)], 600, PODIUM=podium, LIMIT="2", STEPS="1")
    funnel = json.loads((tmp_path / "collect" / "funnel.json").read_text())
    assert funnel["steps"][0]["entered"] == 2
    kept = [json.loads(line) for line in (tmp_path / "collect" / "sft.jsonl").read_text().splitlines()]
    assert kept and all(row["correct"] for row in kept)
    assert (tmp_path / "sft" / "config.json").exists()

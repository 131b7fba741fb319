"""Every data stage end to end, offline, on the embedded SmolLM2-135M-Instruct (small n): the funnels add up, the
outputs load with ``datasets``, and ``podium train sft`` trains on what ``podium data collect`` kept.

Quality is not the point (a 135M model rarely answers well, and its JSON is often cut short); the paths are. The
funnel of each stage is printed (``pytest -s``) for the record."""

import asyncio
import itertools
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from podium.config import read_structured_file
from podium.data import (
    ClassifyConfig,
    CollectConfig,
    CurriculumConfig,
    DifficultyConfig,
    PreferenceConfig,
    SynthConfig,
    classify_failures,
    collect,
    curriculum,
    filter_rl,
    propose_preferences,
    synthesize_domain,
)
from podium.data.funnel import print_funnel
from podium.data.solver import worker_solver
from podium.envs import load_domain
from podium.graders.records import Funnel

pytestmark = pytest.mark.slow
EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "data"
QUIZ = str(EXAMPLES / "quiz.jsonl")


def run(work) -> Funnel:
    funnel = asyncio.run(work)  # the stages run with their progress bars, as on the command line
    print_funnel(funnel, Console(width=140))
    assert all(step.consistent for step in funnel.steps), funnel.steps
    return funnel


def chained(funnel: Funnel, names: list[str]) -> None:
    """Each named step starts with what the one before it kept."""
    steps = {step.name: step for step in funnel.steps}
    for before, after in itertools.pairwise(names):
        assert steps[after].entered == steps[before].kept, (before, after)


def loads(path: Path, rows: int) -> None:
    """The file has ``rows`` lines and, when it has any, ``datasets`` loads them all."""
    datasets = pytest.importorskip("datasets")
    assert len(path.read_text().splitlines()) == rows
    if rows:
        assert datasets.load_dataset("json", data_files=str(path), split="train").num_rows == rows


def test_every_stage_runs_offline_on_the_embedded_model(tmp_path):
    teacher = read_structured_file(EXAMPLES / "embedded_teacher.yaml")
    sft_dir = tmp_path / "collect"
    config = CollectConfig(out=str(sft_dir), tasks=QUIZ, limit=2, samples=1, temperature=0.0, teacher=teacher)
    funnel = run(collect(config, progress=False))
    chained(funnel, ["infrastructure", "format errors", "verifier", "at most 1 per question", "tool balance"])
    assert funnel.steps[1].entered == 2 and funnel.outputs["sft.jsonl"] >= 1
    assert funnel.outputs["sft.jsonl"] + funnel.outputs["failures.jsonl"] == 2
    loads(sft_dir / "sft.jsonl", funnel.outputs["sft.jsonl"])
    loads(sft_dir / "failures.jsonl", funnel.outputs["failures.jsonl"])

    from podium.cli.train import app as train_app  # the train extra; podium train sft, as a user runs it

    trained = CliRunner().invoke(train_app, [
        "sft", "--config", str(EXAMPLES / "train_sft_collected.yaml"), "--trajectories", str(sft_dir / "sft.jsonl"),
        "--output-dir", str(tmp_path / "sft"), "--max-steps", "1",
    ])  # fmt: skip
    assert trained.exit_code == 0, trained.output
    assert "trained 1 steps" in trained.output and (tmp_path / "sft" / "model.safetensors").exists()

    worker = worker_solver(None, None, max_tokens=48)
    rl = run(filter_rl(DifficultyConfig(out=str(tmp_path / "rl"), tasks=QUIZ, limit=1, samples=2, solver=worker)))
    chained(rl, ["attempted", "pass rate band"])
    loads(tmp_path / "rl" / "rl.jsonl", rl.outputs["rl.jsonl"])

    uno_config = CurriculumConfig(
        out=str(tmp_path / "uno"),
        tasks=QUIZ,
        limit=2,
        attempts=1,
        sft_temperatures=[],
        rl_temperatures=[1.0],
        cold_start=teacher,
        teacher=teacher,
    )
    uno = run(curriculum(uno_config))
    chained(uno, ["cold-start π0 pass@1", "teacher π* pass@1", "RL pool: augmentation"])
    for name in ("sft.jsonl", "rl.jsonl", "failures.jsonl"):
        loads(tmp_path / "uno" / name, uno.outputs[name])

    failures = [str(sft_dir / "failures.jsonl")]
    classes = run(
        classify_failures(ClassifyConfig(out=str(tmp_path / "classes"), inputs=failures, max_tokens=96, attempts=1))
    )
    chained(classes, ["failures", "rule-based pre-classifier", "LLM classifier (checked)"])
    assert classes.steps[0].entered == funnel.outputs["failures.jsonl"]
    loads(tmp_path / "classes" / "classifications.jsonl", classes.outputs["classifications.jsonl"])

    prefs = run(propose_preferences(PreferenceConfig(out=str(tmp_path / "prefs"), pairs=1, max_tokens=96, attempts=1)))
    chained(prefs, ["rule checks", "LLM consistency check"])
    kept = prefs.steps[-1].kept
    assert prefs.outputs["train.jsonl"] + prefs.outputs["eval.jsonl"] == kept

    synth = SynthConfig(
        out=str(tmp_path / "tau2"),
        domain="a public library",
        name="library",
        subjects=1,
        records=1,
        functions=1,
        intents=1,
        evolve=False,
        pass_k=1,
        max_tokens=128,
        attempts=1,
    )
    domain = run(synthesize_domain(synth))
    loaded = load_domain("library", tmp_path / "tau2")
    assert len(loaded.tasks) == domain.outputs["tasks.json"]
    assert len(loaded.toolkit.actions()) == domain.outputs["tools.py"]

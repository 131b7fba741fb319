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
from podium.solve.records import Funnel

# One test worker for the module: two of its tests share the collection the module fixture runs.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900), pytest.mark.xdist_group("data_embedded")]
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


@pytest.fixture(scope="module")
def teacher() -> dict:
    return read_structured_file(EXAMPLES / "embedded_teacher.yaml")


@pytest.fixture(scope="module")
def collected(tmp_path_factory, teacher) -> tuple[Path, Funnel]:
    """Two quiz questions, one greedy attempt each, by the embedded teacher."""
    out = tmp_path_factory.mktemp("collect")
    config = CollectConfig(out=str(out), tasks=QUIZ, limit=2, samples=1, temperature=0.0, teacher=teacher)
    return out, run(collect(config, progress=False))


def test_collect_feeds_podium_train_sft(collected, tmp_path):
    out, funnel = collected
    chained(funnel, ["infrastructure", "format errors", "verifier", "at most 1 per question", "tool balance"])
    assert funnel.steps[1].entered == 2 and funnel.outputs["sft.jsonl"] >= 1
    assert funnel.outputs["sft.jsonl"] + funnel.outputs["failures.jsonl"] == 2
    loads(out / "sft.jsonl", funnel.outputs["sft.jsonl"])
    loads(out / "failures.jsonl", funnel.outputs["failures.jsonl"])
    from podium.cli.train import app as train_app  # the train extra; podium train sft, as a user runs it

    arguments = ["sft", "--config", str(EXAMPLES / "train_sft_collected.yaml"), "--max-steps", "1"]
    arguments += ["--trajectories", str(out / "sft.jsonl"), "--output-dir", str(tmp_path / "sft")]
    trained = CliRunner().invoke(train_app, arguments)
    assert trained.exit_code == 0, trained.output
    assert "trained 1 steps" in trained.output and (tmp_path / "sft" / "model.safetensors").exists()


def test_filter_rl(tmp_path):
    worker = worker_solver(None, None, max_tokens=48)
    funnel = run(filter_rl(DifficultyConfig(out=str(tmp_path), tasks=QUIZ, limit=1, samples=2, solver=worker)))
    chained(funnel, ["attempted", "pass rate band"])
    loads(tmp_path / "rl.jsonl", funnel.outputs["rl.jsonl"])


def test_curriculum(tmp_path, teacher):
    config = CurriculumConfig(
        out=str(tmp_path), tasks=QUIZ, limit=2, attempts=1, sft_temperatures=[], rl_temperatures=[1.0],
        cold_start=teacher, teacher=teacher,
    )  # fmt: skip
    funnel = run(curriculum(config))
    chained(funnel, ["cold-start π0 pass@1", "teacher π* pass@1", "RL pool: augmentation"])
    for name in ("sft.jsonl", "rl.jsonl", "failures.jsonl"):
        loads(tmp_path / name, funnel.outputs[name])


def test_classify_failures(collected, tmp_path):
    out, collection = collected
    config = ClassifyConfig(out=str(tmp_path), inputs=[str(out / "failures.jsonl")], max_tokens=96, attempts=1)
    funnel = run(classify_failures(config))
    chained(funnel, ["failures", "rule-based pre-classifier", "LLM classifier (checked)"])
    assert funnel.steps[0].entered == collection.outputs["failures.jsonl"]
    loads(tmp_path / "classifications.jsonl", funnel.outputs["classifications.jsonl"])


def test_preferences(tmp_path):
    funnel = run(propose_preferences(PreferenceConfig(out=str(tmp_path), pairs=1, max_tokens=96, attempts=1)))
    chained(funnel, ["rule checks", "LLM consistency check"])
    assert funnel.outputs["train.jsonl"] + funnel.outputs["eval.jsonl"] == funnel.steps[-1].kept
    for name in ("train.jsonl", "eval.jsonl"):
        loads(tmp_path / name, funnel.outputs[name])


def test_synth_domain(tmp_path):
    config = SynthConfig(
        out=str(tmp_path), domain="a public library", name="library", subjects=1, records=1, functions=1,
        intents=1, evolve=False, pass_k=1, max_tokens=128, attempts=1,
    )  # fmt: skip
    funnel = run(synthesize_domain(config))
    loaded = load_domain("library", tmp_path)
    assert len(loaded.tasks) == funnel.outputs["tasks.json"]
    assert len(loaded.tool_kinds) == funnel.outputs["tools.py"]

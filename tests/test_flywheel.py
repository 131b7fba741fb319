"""The flywheel end to end (`make flywheel`, docs/guides/flywheel.md) on a handful of questions: the claim's SFT system
served over the replayed GSM8K recording, its traffic sent through the OpenAI client by experiments/flywheel/traffic.py
and graded on serve, collected, trained on by one small GRPO step, the candidate gated on the held-back traffic, run
in shadow, promoted only if it passed, and the test questions compared before and after."""

import json
from pathlib import Path

import pytest
import yaml

from podium.evaluate.gate import Comparison
from podium.solve.jsonl import read_tasks
from podium.solve.router import load_system
from podium.solve.served import read_traffic
from tests.test_claim import make
from tests.test_serve_traffic import free_port

pytest.importorskip("peft")
ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_flywheel_serves_collects_trains_gates_shadows_and_compares(tmp_path) -> None:
    grpo = yaml.safe_load((ROOT / "experiments" / "flywheel" / "grpo.yaml").read_text())
    # one question's four paths make the one step (the documented round: 16 rollouts a step, 4 steps)
    grpo |= {"batch_size": 4, "gradient_accumulation_steps": 1, "resample_groups": 0}
    (tmp_path / "grpo.yaml").write_text(yaml.safe_dump(grpo))
    runs = tmp_path / "runs"
    done = make(
        "flywheel", f"FLYWHEEL_RUNS={runs}", "FLYWHEEL_TRAIN=2", "FLYWHEEL_VALID=2", "FLYWHEEL_LIMIT=2",
        "FLYWHEEL_SHADOW=1", "FLYWHEEL_STEPS=1", f"FLYWHEEL_GRPO={tmp_path / 'grpo.yaml'}", "FLYWHEEL_ROUTERS_TRAIN=40",
        f"FLYWHEEL_PORT={free_port()}",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:] + done.stdout[-2000:]
    serving = load_system(ROOT / "experiments" / "claim" / "system-sft.yaml").version

    traffic = read_traffic(runs / "served")  # 1. every episode graded against the gold sent with it
    assert len(traffic.episodes) == 4 and all(episode.grade is not None for episode in traffic.episodes)
    assert {episode.version for episode in traffic.episodes} == {serving}
    assert [episode.key for episode in traffic.episodes].count("validation") == 2
    assert all(call.price is not None for episode in traffic.episodes for call in episode.calls if call.worker)

    collected = runs / "collect"  # 2. GRPO tasks from the train traffic, the validation traffic held back
    train = read_tasks(runs / "train.jsonl")[:2]
    assert sorted(task.question for task in read_tasks(collected / "tasks.jsonl")) == sorted(t.question for t in train)
    assert len(read_tasks(collected / "heldout.jsonl")) == 2 and (collected / f"heldout-{serving}").is_dir()

    candidate = load_system(runs / "system-candidate.yaml")  # 3. trained: a new version
    assert (runs / "adapter" / "adapter_model.safetensors").is_file() and candidate.version != serving

    gate = Comparison.model_validate_json((runs / "gate" / "comparison.json").read_text())  # 4. the gate
    assert (gate.items, gate.baseline.version, gate.candidate.version) == (2, serving, candidate.version)

    shadowed = read_traffic(runs / "served-shadow")  # 5. the candidate beside the live system, then promoted or not
    shadows = [episode for episode in shadowed.episodes if episode.role == "shadow"]
    live = [episode for episode in shadowed.episodes if episode.role == "live"]
    assert {episode.version for episode in shadows} == {candidate.version} and len(shadows) >= 1
    assert {shadow.id.removesuffix(":shadow") for shadow in shadows} <= {episode.id for episode in live}
    last = max(live, key=lambda episode: episode.created)
    if gate.passed:
        assert f"version {candidate.version} is live" in done.stdout and last.version == candidate.version
    else:
        assert "the candidate stays in shadow" in done.stdout and last.version == serving
        assert "did not pass its gate" in done.stderr

    paired = Comparison.model_validate_json((runs / "test-after" / "comparison.json").read_text())  # 6. the test split
    assert (paired.items, paired.baseline.version, paired.candidate.version) == (2, serving, candidate.version)
    compared = json.loads((runs / "compare" / "results.json").read_text())  # before and after, beside the routers
    assert compared["n_test"] == 2 and {"before", "after"} <= set(compared["usd_per_question"])
    assert json.loads(done.stdout.strip().splitlines()[-1]) == compared

"""The gate a candidate passes before it replaces the serving system: the paired bootstrap (checked against SciPy's),
`podium eval --against` comparing two runs on the same items, and `podium promote` refusing any promotion the
comparison does not allow."""

import json
from contextlib import chdir
from pathlib import Path

import numpy as np
import pytest
import yaml
from click.testing import Result
from typer.testing import CliRunner

from podium.cli import app
from podium.evaluate.gate import Comparison, GateConfig, compare_runs, decide
from podium.evaluate.intervals import paired_bootstrap
from tests.serve_fixtures import served, system
from tests.test_serve_traffic import forty_three

ROOT = Path(__file__).resolve().parents[1]


def test_the_paired_bootstrap_matches_scipys_percentile_interval_of_the_paired_difference() -> None:
    stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(1)
    a = rng.integers(0, 2, 200).astype(float)
    b = np.where(rng.random(200) < 0.15, 1 - a, a)  # the candidate differs on about 15 % of the items
    ours = paired_bootstrap(a, b, 20_000, seed=3)
    theirs = stats.bootstrap(
        (a, b), lambda x, y, axis: np.mean(y, axis) - np.mean(x, axis), paired=True, n_resamples=20_000,
        method="percentile", random_state=4,
    ).confidence_interval  # fmt: skip
    assert ours.difference == pytest.approx(b.mean() - a.mean())
    assert (ours.low, ours.high) == pytest.approx((theirs.low, theirs.high), abs=0.006)
    # pairing narrows the interval: the same values unpaired (independent resamples of each side) spread wider
    unpaired = stats.bootstrap((b,), np.mean, n_resamples=5000, random_state=5).standard_error
    assert ours.high - ours.low < 2 * 1.96 * (2**0.5) * unpaired


def test_the_paired_bootstrap_is_exact_where_it_must_be_and_refuses_unpaired_values() -> None:
    shifted = paired_bootstrap([0.1, 0.5, 0.2], [0.3, 0.7, 0.4])  # b = a + 0.2 on every item
    assert (shifted.difference, shifted.low, shifted.high) == pytest.approx((0.2, 0.2, 0.2))
    assert paired_bootstrap([1, 0, 1], [0, 1, 1], 500, seed=7) == paired_bootstrap([1, 0, 1], [0, 1, 1], 500, seed=7)
    median = paired_bootstrap(
        [[1.0], [2.0], [9.0]], [[2.0], [3.0], [10.0]], statistic=lambda rows: float(np.median(rows))
    )
    assert median.difference == pytest.approx(1.0)
    with pytest.raises(ValueError, match="one per item"):
        paired_bootstrap([1, 0], [1, 0, 1])
    with pytest.raises(ValueError, match="no paired item"):
        paired_bootstrap([], [])


TASKS = [
    {"id": f"q{i}", "question": f"Question {i}?", "gold": "42" if i < 10 else "43", "verifier": "math"}
    for i in range(12)
]


def answering(answer: str, name: str) -> dict:
    """A system file whose orchestrator answers ``answer`` to everything."""
    worker = {
        "name": "orchestrator",
        "backend": "scripted",
        "model": f"{name}-model",
        "replies": [f"<answer>{answer}</answer>"],
    }
    return {"kind": "orchestrator", "name": name, "orchestrator": "orchestrator", "deny": ["orchestrator"],
            "pool": {"workers": [worker], "tools": []}}  # fmt: skip


def podium(*arguments: str, cwd: Path) -> Result:
    """``podium ARGUMENTS`` run in this process (in ``cwd``), its stdout and stderr apart."""
    with chdir(cwd):
        return CliRunner().invoke(app, list(arguments), env={"COLUMNS": "200"})


def test_eval_against_a_baseline_run_compares_paired_items_and_says_whether_the_candidate_wins(tmp_path) -> None:
    (tmp_path / "tasks.jsonl").write_text("".join(json.dumps(task) + "\n" for task in TASKS))
    (tmp_path / "weak.yaml").write_text(yaml.safe_dump(answering("43", "weak")))  # right on 2 of 12
    (tmp_path / "strong.yaml").write_text(yaml.safe_dump(answering("42", "strong")))  # right on 10 of 12
    done = podium("eval", "--tasks", "tasks.jsonl", "--system", "weak.yaml", "--out", "weak", "--quiet", cwd=tmp_path)
    assert done.exit_code == 0, done.output
    better = podium(
        "eval", "--tasks", "tasks.jsonl", "--system", "strong.yaml", "--out", "strong", "--quiet", "--against", "weak",
        cwd=tmp_path,
    )  # fmt: skip
    assert better.exit_code == 0, better.output
    assert "gate passed" in better.stdout and "accuracy +0.6667" in better.stdout
    comparison = Comparison.model_validate_json((tmp_path / "strong" / "comparison.json").read_text())
    assert (comparison.items, comparison.unpaired, comparison.passed) == (12, 0, True)
    accuracy = comparison.metrics["accuracy"]
    assert (accuracy.baseline, accuracy.candidate) == pytest.approx((2 / 12, 10 / 12))
    assert 0.0 < accuracy.interval.low < 2 / 3 < accuracy.interval.high
    assert comparison.baseline.version is not None and comparison.baseline.version != comparison.candidate.version
    worse = compare_runs(tmp_path / "strong", tmp_path / "weak", GateConfig())
    assert not worse.passed and "not higher" in worse.reason
    refused = podium("eval", "--tasks", "tasks.jsonl", "--system", "strong.yaml", "--out", "x", "--gate-metric",
                     "reward", "--against", "weak", cwd=tmp_path)  # fmt: skip
    assert refused.exit_code == 2 and "metric reward needs cost_usd_scale" in refused.stderr
    alone = podium("eval", "--tasks", "tasks.jsonl", "--system", "strong.yaml", "--out", "y", "--gate-margin", "0.1",
                   cwd=tmp_path)  # fmt: skip
    assert alone.exit_code == 2 and "give --against RUN" in alone.stderr


def test_a_candidate_wins_only_above_zero_and_within_the_margin() -> None:
    sure = paired_bootstrap([0] * 10 + [1] * 10, [1] * 20, 500)
    unsure = paired_bootstrap([0, 1, 1, 0, 1, 1, 0, 1], [1, 1, 0, 0, 1, 1, 1, 1], 500)
    assert decide(sure, GateConfig())[0]
    assert unsure.difference > 0 and unsure.low < 0
    assert not decide(unsure, GateConfig())[0] and decide(unsure, GateConfig(margin=1.0))[0]


def comparison_of(baseline: str, candidate: str, passed: bool = True) -> dict:
    interval = {"difference": 0.1, "low": 0.05, "high": 0.15, "confidence": 0.95, "items": 3, "resamples": 10}
    metric = {"baseline": 0.5, "candidate": 0.6, "interval": interval}
    side = {"run": "r", "system": "s"}
    sides = {"baseline": side | {"version": baseline}, "candidate": side | {"version": candidate}}
    return sides | {"items": 3, "unpaired": 0, "metrics": {"accuracy": metric}, "gate": {}, "passed": passed,
                    "reason": "as given"}  # fmt: skip


def test_promote_swaps_in_the_shadow_only_when_its_gate_compared_it_with_the_serving_version(tmp_path) -> None:
    live, candidate = system(), system("candidate", script=forty_three, max_episode_usd=10.0)
    runner = CliRunner()
    with served(live, shadows={"tiny-orchestrator": candidate}) as url:

        def promote(comparison: dict) -> tuple[int, str]:
            (tmp_path / "comparison.json").write_text(json.dumps(comparison))
            options = ["--model", "tiny-orchestrator", "--gate", str(tmp_path / "comparison.json"), "--url", url]
            done = runner.invoke(app, ["promote", *options])
            return done.exit_code, done.output

        code, said = promote(comparison_of(live.version, candidate.version, passed=False))
        assert code == 2 and "did not pass its gate (as given)" in said
        code, said = promote(comparison_of(live.version, live.version))
        assert code == 2 and f"the shadow is {candidate.version}" in said
        code, said = promote(comparison_of(candidate.version, candidate.version))
        assert code == 2 and f"{live.version} is serving" in said
        code, said = promote(comparison_of(live.version, candidate.version))
        assert code == 0 and f"version {candidate.version} is live (was {live.version})" in said
        code, said = promote(comparison_of(live.version, candidate.version))
        assert code == 2 and "it has no shadow" in said

"""Ray: `podium eval --ray` solves samples on Ray workers with the local path's resume, lock and USD cap, and GRPO
rollouts run on Ray workers against a policy server. One local Ray instance (`ray.init(num_cpus=2)`) for the module,
shut down by it."""

import asyncio
import json
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from typer.testing import CliRunner  # noqa: E402

from podium.backends.scripted import ScriptedBackend  # noqa: E402
from podium.cli import app  # noqa: E402
from podium.datasets.loaders import get_benchmark  # noqa: E402
from podium.evaluate.ray_system import solving_system  # noqa: E402
from podium.evaluate.rundir import RunLocked, hold_run_directory  # noqa: E402
from podium.evaluate.runner import read_results, run_eval  # noqa: E402
from podium.evaluate.system_config import system_config_from_dict  # noqa: E402
from podium.serve.model_server import serving_in_thread  # noqa: E402
from podium.train.config import RolloutConfig  # noqa: E402
from podium.train.rollouts import RayRollouts, collect  # noqa: E402

pytestmark = pytest.mark.xdist_group("ray")  # one Ray instance: the module's tests share one test worker

PRICE = {"input_per_mtok": 100.0, "output_per_mtok": 100.0}
"""Each attempt costs a few cents: its system prompt is a few hundred tokens."""


def system(replies: list[str] | None = None, **worker: object) -> dict:
    """An orchestrator config over one scripted worker that answers at once (what every replica builds)."""
    spec = {"name": "o", "backend": "scripted", "model": "o-model", "price": PRICE, **worker}
    if spec["backend"] == "scripted":
        spec.setdefault("replies", replies or ["<answer>\\boxed{18}</answer>"])
    return {"kind": "orchestrator", "name": "scripted", "max_turns": 1, "pool": {"workers": [spec], "tools": []}}


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def evaluate(config: dict, out: Path, ray_address: str | None, **options: object):
    parsed = system_config_from_dict(config)
    with solving_system(parsed, ray_address, 2) as built:
        return asyncio.run(
            run_eval(get_benchmark("gsm8k"), built, out=out, concurrency=2, progress=False, **options)  # type: ignore[arg-type]
        )


def outcomes(out: Path) -> list[tuple[str, str | None, bool, float]]:
    records, _ = read_results(out / "results.jsonl")
    return sorted((r.item_id, r.answer, r.verdict.correct, round(r.usage.usd, 9)) for r in records)


def test_eval_on_ray_matches_local_and_keeps_resume_lock_and_cap(cluster, tmp_path) -> None:
    bound = 1.0  # each episode's own cap, which each sample reserves from the run's
    config = {**system(), "max_episode_usd": bound}
    local = evaluate(config, tmp_path / "local", None, limit=6)
    per_attempt = local.usd / 6
    # Room for one bound and one and a half attempts: the second sample starts once the first has cost less than
    # its bound, a third never does.
    cap = bound + 1.5 * per_attempt
    capped = evaluate(config, tmp_path / "ray", "auto", limit=6, max_run_usd=cap)
    assert capped.stopped_by_budget and capped.done == 2 and capped.usd <= cap
    finished = evaluate(config, tmp_path / "ray", "auto", limit=6)
    assert finished.resumed == capped.done and finished.done == 6 and not finished.stopped_by_budget
    assert outcomes(tmp_path / "ray") == outcomes(tmp_path / "local")  # same answers, verdicts and prices
    assert read_results(tmp_path / "ray" / "results.jsonl")[1] == 0  # nothing torn or duplicated
    with hold_run_directory(tmp_path / "ray"), pytest.raises(RunLocked):
        evaluate(config, tmp_path / "ray", "auto", limit=6)


def test_ray_replicas_draw_each_attempts_blind_labels_as_the_local_path_does(cluster, tmp_path) -> None:
    config = system()
    config["pool"]["workers"].append({**config["pool"]["workers"][0], "name": "p", "model": "p-model"})
    config["pool"]["blind"] = {"enabled": True, "seed": 4}
    labels = {}
    for where, address in (("local", None), ("ray", "auto")):
        evaluate(config, tmp_path / where, address, limit=4)
        records, _ = read_results(tmp_path / where / "results.jsonl")
        labels[where] = {r.item_id: r.trajectory.metadata["labels"] for r in records}
    assert labels["ray"] == labels["local"] and len({tuple(m.items()) for m in labels["ray"].values()}) > 1


def test_a_failing_remote_system_is_an_error_record_and_a_broken_config_stops_early(cluster, tmp_path) -> None:
    down = system(backend="http", base_url="http://127.0.0.1:9/v1", max_retries=0)
    summary = evaluate(down, tmp_path / "down", "auto", limit=2)
    assert summary.errors == 2
    [record, _] = read_results(tmp_path / "down" / "results.jsonl")[0]
    assert "SystemRunError" in (record.error or "")
    broken = system()
    broken["pool"]["prices"] = str(tmp_path / "missing-prices.yaml")
    with pytest.raises(Exception, match="missing-prices"):
        evaluate(broken, tmp_path / "broken", "auto", limit=2)


def test_podium_eval_ray_flag(cluster, tmp_path) -> None:
    (tmp_path / "system.json").write_text(json.dumps(system()))
    arguments = ["eval", "--benchmark", "gsm8k", "--system", str(tmp_path / "system.json"), "--limit", "3",
                 "--out", str(tmp_path / "run"), "--concurrency", "2", "--quiet", "--ray", "auto"]  # fmt: skip
    result = CliRunner().invoke(app, arguments)
    assert result.exit_code == 0, result.output
    assert len(outcomes(tmp_path / "run")) == 3


def test_grpo_rollouts_on_ray_workers_reach_the_policy_server(cluster) -> None:
    policy = ScriptedBackend(["<answer>42</answer>"], model="policy", repeat_last=True)
    with serving_in_thread(policy) as url:
        config = RolloutConfig(backend="vllm", vllm_base_url=url.removesuffix("/v1"), ray="auto", concurrency=3)
        rollouts = RayRollouts(config, "policy")
        try:
            questions = [f"What is {n} * 2?" for n in range(5)]
            trajectories = asyncio.run(collect(rollouts, questions, [7, 7, 8, 8, 9], [None] * 5, 3))
        finally:
            rollouts.stop()
    assert [t.question for t in trajectories] == questions
    assert all(t.answer == "42" for t in trajectories) and [t.metadata["seed"] for t in trajectories] == [7, 7, 8, 8, 9]
    assert len(policy.requests) == 5  # every rollout's orchestrator turn reached the policy server


def test_rollouts_on_ray_need_a_served_policy() -> None:
    with pytest.raises(Exception, match="backend: vllm"):
        RayRollouts(RolloutConfig(ray="auto"), "policy")

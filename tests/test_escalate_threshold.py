"""The escalation threshold (``escalate_above``): after a reply the threshold decides, not the most probable word;
settings it cannot honour are refused; ``podium routing threshold`` computes it for a price sheet (the claim's sweep
checks that a run at it decides as ``podium routing compare``'s priced row)."""

import asyncio
import json
import math
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from podium.backends.base import ChatBackend, Completion, GenerationRequest
from podium.backends.scripted import ScriptedBackend
from podium.cli import app
from podium.datasets.loaders import shared_data_dir
from podium.errors import ConfigError
from podium.evaluate.routing.importers import GPT4, MIXTRAL, import_routellm
from podium.evaluate.routing.priced import Calibration, CostPenalty, pair_edge, score_threshold
from podium.recording import Recording
from podium.routers.data import Outcome, RoutingItem, routing_set
from podium.runtime import Executor, RunConfig
from podium.solve.config import SystemConfig
from podium.solve.system import System
from support.runtime_fixtures import replay_pool
from tests.test_routers import cat_pool

QUESTION = "How many legs has a cat?"
WEAK_REPLY, STRONG_REPLY = "It has 1 + 2 = 4 legs.\n#### 4", "It has 4 legs."


class Scored(ChatBackend):
    """Takes the most probable of the choices offered under fixed weights, and tells their probabilities (a
    stand-in for a local model scoring its choices)."""

    supports_choices = True
    supports_regex = True

    def __init__(self, weights: dict[str, float]) -> None:
        super().__init__("scored")
        self.weights = weights

    async def _complete(self, request: GenerationRequest) -> Completion:
        total = sum(self.weights[choice] for choice in request.choices)
        probabilities = {choice: self.weights[choice] / total for choice in request.choices}
        return Completion(max(probabilities, key=probabilities.__getitem__), 3, 1, "stop", choice_probs=probabilities)


def play(tmp_path, weights: dict[str, float], escalate_above: float | None) -> tuple[list[str], str | None]:
    """The words of an escalation episode over the cat pool, and its answer."""
    run = RunConfig(policy={"name": "escalate", "escalate_above": escalate_above}, constrained="always", max_tokens=16)
    trajectory = asyncio.run(Executor(cat_pool(tmp_path), run, orchestrator=Scored(weights)).run(QUESTION))
    if escalate_above is not None:
        assert trajectory.metadata["escalate_above"] == escalate_above  # the run says how it decided
    return [turn.output for turn in trajectory.turns], trajectory.answer


def test_the_threshold_decides_after_a_reply_and_the_first_word_stays_the_most_probable(tmp_path) -> None:
    leaning_up = {"w": 0.9, "s": 0.6, "accept": 0.4}  # first w (0.6 of w, s); after w's reply P(escalate) = 0.6
    assert play(tmp_path, leaning_up, None) == (["w", "s", "accept"], STRONG_REPLY)
    assert play(tmp_path, leaning_up, 0.7) == (["w", "accept"], WEAK_REPLY)  # 0.6 does not pass 0.7
    assert play(tmp_path, leaning_up, 0.6) == (["w", "accept"], WEAK_REPLY)  # escalate only above it
    assert play(tmp_path, leaning_up, 0.5) == (["w", "s", "accept"], STRONG_REPLY)
    leaning_to_accept = {"w": 0.9, "s": 0.3, "accept": 0.7}  # P(escalate) = 0.3 after w's reply
    assert play(tmp_path, leaning_to_accept, None) == (["w", "accept"], WEAK_REPLY)
    assert play(tmp_path, leaning_to_accept, 0.2) == (["w", "s", "accept"], STRONG_REPLY)
    assert play(tmp_path, leaning_to_accept, 1.0) == (["w", "accept"], WEAK_REPLY)  # never escalates


def three_pool(tmp_path, blind: bool = False) -> object:
    """The cat pool with a third worker ``b``, right like ``s`` in other words."""
    recording = tmp_path / "r3.csv"
    recording.write_text(
        f'prompt,w,w_response,s,s_response,b,b_response\n"{QUESTION}",False,"{WEAK_REPLY}",True,"{STRONG_REPLY}",True,'
        '"Four legs."\n'
    )
    return replay_pool(recording, names=("w", "s", "b"), blind=blind)


def test_a_threshold_per_worker_sends_the_first_escalation_to_the_highest_it_passes_then_accepts(tmp_path) -> None:
    pool = three_pool(tmp_path)
    weights = {"w": 0.9, "s": 0.5, "b": 0.1, "accept": 0.4}  # w first; after its reply P(escalate) = 0.6, s first

    def words(escalate_above: object) -> tuple[list[str], str | None]:
        run = RunConfig(
            policy={"name": "escalate", "escalate_above": escalate_above}, constrained="always", max_tokens=16
        )
        trajectory = asyncio.run(Executor(pool, run, orchestrator=Scored(weights)).run(QUESTION))
        return [turn.output for turn in trajectory.turns], trajectory.answer

    assert words(0.5) == (["w", "s", "accept"], STRONG_REPLY)  # one threshold: the model's first-ranked worker
    assert words({"b": 0.3, "s": 0.7}) == (["w", "b", "accept"], "Four legs.")  # 0.6 passes b's only
    assert words({"b": 0.3, "s": 0.5}) == (["w", "s", "accept"], STRONG_REPLY)  # the highest passed
    assert words({"b": 0.7, "s": 0.65}) == (["w", "accept"], WEAK_REPLY)  # none passed
    assert words({"w": 0.1}) == (["w", "accept"], WEAK_REPLY)  # its worker has answered already
    # after b's reply P(escalate) = 1 − 0.4 / 0.9 still passes s's 0.2, but a worker was valued as the last asked
    assert words({"s": 0.2, "b": 0.5}) == (["w", "b", "accept"], "Four legs.")
    with pytest.raises(ConfigError, match=r"\['x'\] are no workers of the pool"):
        Executor(
            pool, RunConfig(policy={"name": "escalate", "escalate_above": {"x": 0.5}}), orchestrator=Scored(weights)
        )
    with pytest.raises(ConfigError, match="a blind pool hides behind new labels"):
        blind = RunConfig(policy={"name": "escalate", "escalate_above": {"b": 0.5}})
        Executor(three_pool(tmp_path, blind=True), blind, orchestrator=Scored(weights))
    with pytest.raises(ValueError, match="less than or equal to 1"):
        RunConfig(policy={"name": "escalate", "escalate_above": {"b": 1.5}})


def test_escalate_above_is_refused_where_it_cannot_decide(tmp_path) -> None:
    pool = cat_pool(tmp_path)
    with pytest.raises(ValueError, match="escalate_above applies to the escalate policy, not to 'serial'"):
        RunConfig(policy={"name": "serial", "escalate_above": 0.5})
    with pytest.raises(ValueError, match=r"needs temperature 0, not 1\.0"):
        RunConfig(policy={"name": "escalate", "escalate_above": 0.5}, temperature=1.0)
    sampled = RunConfig(policy={"name": "escalate", "escalate_above": 0.5}).model_copy(update={"temperature": 1.0})
    with pytest.raises(ConfigError, match="needs temperature 0"):  # a sampled attempt copies the settings
        Executor(pool, sampled, orchestrator=Scored({}))
    with pytest.raises(ConfigError, match="backend 'scripted' does not give"):
        Executor(
            pool, RunConfig(policy={"name": "escalate", "escalate_above": 0.5}), orchestrator=ScriptedBackend(["w"])
        )
    never = RunConfig(policy={"name": "escalate", "escalate_above": 0.5}, constrained="never")
    with pytest.raises(ConfigError, match="with constrained: 'never'"):
        Executor(pool, never, orchestrator=Scored({}))
    system = tmp_path / "system.yaml"
    system.write_text("policy:\n  name: escalate\n  escalate_above: 1.5\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"system.yaml:3.*escalate_above"):
        SystemConfig.from_file(system)
    explored = System("teacher", pool, RunConfig(policy={"name": "escalate", "escalate_above": 0.5}))
    with pytest.raises(ConfigError, match="exploring plays every path"):  # `samples: all` collection
        asyncio.run(explored.explore(QUESTION))


def test_the_score_threshold_is_the_breakeven_probability_read_through_the_calibration() -> None:
    calibration = Calibration(slope=0.8, bias=-0.3)
    scores = [i / 200 for i in range(1, 200)]
    for probability in (0.05, 0.19, 0.5, 0.83):
        threshold = score_threshold(probability, calibration)
        assert calibration(threshold) == pytest.approx(probability)
        assert [s > threshold for s in scores] == [calibration(s) > probability for s in scores]
        assert score_threshold(probability) == probability  # uncalibrated: the score is the probability
    assert score_threshold(1.0, calibration) == 1.0 and score_threshold(-0.2, calibration) == 0.0


@pytest.fixture(scope="module")
def gsm8k(tmp_path_factory) -> Path:
    """RouteLLM's GSM8K recording, imported."""
    out = tmp_path_factory.mktemp("gsm8k") / "recording"
    import_routellm("routellm-gsm8k", out)
    return out


def breakeven(train: list[RoutingItem], reward: CostPenalty) -> float:
    return pair_edge(train, "mixtral", "gpt4", reward)


def routing_threshold(recording: Path, *arguments: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["routing", "threshold", "--recording", str(recording), *arguments])
    return result.exit_code, result.output


def test_routing_threshold_writes_the_system_at_each_sheets_breakeven(tmp_path, gsm8k) -> None:
    reward = tmp_path / "grpo.yaml"
    reward.write_text(
        "tasks: tasks.jsonl\noutput_dir: out\nreward: {design: cost_penalty, cost_weight: 2.0, cost_usd_scale: 0.01}\n"
    )
    system = tmp_path / "system.yaml"
    system.write_text("kind: orchestrator\nname: trained\npolicy: escalate\nmax_tokens: 16\n", encoding="utf-8")
    dear = tmp_path / "dear.yaml"
    dear.write_text("models:\n  gpt-4-1106-preview: {input_per_mtok: 40, output_per_mtok: 120}\n", encoding="utf-8")
    arguments = ["--reward-from", str(reward), "--system", str(system), "--out", f"{tmp_path}/a"]
    code, output = routing_threshold(gsm8k, *arguments)
    assert code == 0, output
    listed = json.loads(output.strip().splitlines()[-1])
    expected = breakeven(routing_set(Recording.load(gsm8k)).split("train"), CostPenalty(2.0, 0.01))
    assert listed["breakeven"] == pytest.approx(expected) and listed["escalate_above"] == listed["breakeven"]
    assert listed["calibration"] is None and 0.0 < expected < 1.0
    written = yaml.safe_load((tmp_path / "a").read_text())
    policy = {"name": "escalate", "escalate_above": listed["escalate_above"]}
    assert written == {**yaml.safe_load(system.read_text()), "policy": policy}
    code, output = routing_threshold(gsm8k, "--reward-from", str(reward), "--prices", str(dear))
    assert code == 0, output
    assert json.loads(output.strip().splitlines()[-1])["escalate_above"] > listed["escalate_above"]
    assert not math.isnan(listed["escalate_above"])


def test_routing_threshold_prices_each_worker_of_a_pool_that_has_several_to_escalate_to(tmp_path, gsm8k) -> None:
    reward = tmp_path / "grpo.yaml"
    reward.write_text(
        "tasks: tasks.jsonl\noutput_dir: out\nreward: {design: cost_penalty, cost_weight: 2.0, cost_usd_scale: 0.01}\n"
    )
    train = routing_set(Recording.load(gsm8k)).split("train")
    csv = shared_data_dir() / "routing" / "gsm8k_responses.csv"
    expected, thresholds = {}, {}
    for factor in (0.5, 2.0):  # GPT-4's replies under a second name, at half and at twice its price
        repriced = [
            RoutingItem(entry.item, {**entry.outcomes, "gpt4": scaled(entry.outcomes["gpt4"], factor)})
            for entry in train
        ]
        expected[factor] = breakeven(repriced, CostPenalty(2.0, 0.01))
        pool = tmp_path / f"pool-{factor}.yaml"
        pool.write_text(yaml.safe_dump({"workers": [
            {"name": "mixtral", "backend": "replay", "model": MIXTRAL, "path": str(csv)},
            {"name": "gpt4", "backend": "replay", "model": GPT4, "path": str(csv)},
            {"name": "gpt4_batch", "backend": "replay", "model": GPT4, "path": str(csv),
             "price": {"input_per_mtok": 10 * factor, "output_per_mtok": 30 * factor}},
        ], "roles": ["standard_reasoner"], "workers_as_tools": False}), encoding="utf-8")  # fmt: skip
        system = tmp_path / f"system-{factor}.yaml"
        system.write_text(f"kind: orchestrator\npolicy: escalate\nmax_tokens: 16\npool: {pool}\n", encoding="utf-8")
        out = tmp_path / f"threshold-{factor}.yaml"
        arguments = ["--reward-from", str(reward), "--system", str(system), "--out", str(out)]
        code, output = routing_threshold(gsm8k, *arguments)
        assert code == 0, output
        listed = json.loads(output.strip().splitlines()[-1])
        assert yaml.safe_load(out.read_text())["policy"]["escalate_above"] == listed["escalate_above"]
        thresholds[factor] = listed["escalate_above"]
    at_list = breakeven(train, CostPenalty(2.0, 0.01))
    assert expected[0.5] < at_list < expected[2.0]
    # the cheaper copy of GPT-4 takes every escalation, at its own break-even probability
    assert thresholds == {0.5: {"gpt4_batch": pytest.approx(expected[0.5])}, 2.0: {"gpt4": pytest.approx(at_list)}}


def scaled(outcome: Outcome, factor: float) -> Outcome:
    """``outcome`` at ``factor`` times its USD."""
    return Outcome(outcome.correct, outcome.usd * factor, outcome.response, outcome.tokens)


def test_routing_threshold_refuses_what_it_cannot_write(tmp_path, gsm8k) -> None:
    reward = tmp_path / "grpo.yaml"
    reward.write_text("tasks: tasks.jsonl\noutput_dir: out\nreward: {design: cost_penalty}\n", encoding="utf-8")
    serial = tmp_path / "serial.yaml"
    serial.write_text("kind: orchestrator\npolicy: serial\n", encoding="utf-8")
    out = tmp_path / "out.yaml"
    code, output = routing_threshold(gsm8k, "--reward-from", str(reward), "--system", str(serial), "--out", str(out))
    assert code != 0 and "applies to an orchestrator with policy escalate" in output and not out.exists()
    code, output = routing_threshold(gsm8k, "--reward-from", str(reward), "--system", str(serial))
    assert code != 0 and "system and system_out go together" in output
    reward.write_text("tasks: tasks.jsonl\noutput_dir: out\nreward: {design: uno}\n", encoding="utf-8")
    code, output = routing_threshold(gsm8k, "--reward-from", str(reward))
    assert code != 0 and "reward.design is 'uno'" in output


def test_a_served_request_cannot_sample_a_system_that_decides_by_its_threshold() -> None:
    from podium.core.budget import Budget
    from podium.serve.http import ApiError
    from podium.serve.requests import EpisodeRequest, request_config

    base = RunConfig(policy={"name": "escalate", "escalate_above": 0.4})
    ask = {"model": "orchestrator", "messages": [{"role": "user", "content": QUESTION}]}
    assert request_config(base, Budget(), EpisodeRequest(**ask, temperature=0.0), None).policy.escalate_above == 0.4
    with pytest.raises(ApiError, match=r"needs temperature 0, not 0\.7") as refused:
        request_config(base, Budget(), EpisodeRequest(**ask, temperature=0.7), None)
    assert (refused.value.status, refused.value.param) == (400, "temperature")


def test_podium_check_names_a_threshold_the_orchestrator_cannot_give(tmp_path) -> None:
    system = tmp_path / "system.yaml"
    system.write_text("kind: orchestrator\npolicy:\n  name: escalate\n  escalate_above: 0.3\nconstrained: never\n")
    result = CliRunner().invoke(app, ["check", str(system)])
    assert result.exit_code == 2
    expected = f"{system}:4: policy.escalate_above: thresholds the probabilities of the orchestrator's choices"
    assert expected in result.output
    system.write_text("kind: orchestrator\npolicy: {name: escalate, escalate_above: 0.3}\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["check", str(system)])
    assert result.exit_code == 0 and "ok (system)" in result.output

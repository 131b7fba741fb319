"""Every path of an escalation episode played once; the exact expected policy gradient over that tree; the
success-gated cost penalty; decision-token masks; oracle-labelled collection and dynamic group resampling."""

import asyncio
import math

import pytest

from podium.backends.base import ChatBackend, Completion, GenerationRequest
from podium.core.calls import CallUsage
from podium.core.preference import Preference
from podium.core.trajectory import Trajectory, Turn
from podium.errors import ConfigError
from podium.rewards import build_reward
from podium.rewards.expected import expected_advantages
from podium.runtime import Executor, RunConfig
from podium.runtime.explore import explore
from tests.test_routers import cat_pool


class UniformScorer(ChatBackend):
    """Scores every choice set uniformly (a stand-in for the policy model)."""

    supports_choices = True

    async def _complete(self, request: GenerationRequest) -> Completion:
        share = 1.0 / len(request.choices)
        return Completion(request.choices[0], 3, 1, "stop", choice_probs=dict.fromkeys(request.choices, share))


def play_on(pool, run: RunConfig, question: str):
    async def play(backend: ChatBackend) -> Trajectory:
        return await Executor(pool, run, orchestrator=backend).run(question)

    return play


def test_every_path_of_an_escalation_episode_is_played_once(tmp_path) -> None:
    pool = cat_pool(tmp_path, tools=["check_arithmetic"])
    run = RunConfig(policy={"name": "escalate", "verify": "check_arithmetic"}, constrained="always", max_tokens=16)
    leaves = asyncio.run(explore(play_on(pool, run, "How many legs has a cat?"), UniformScorer("policy")))
    answers = {tuple(turn.output for turn in leaf.turns): leaf.answer for leaf in leaves}
    weak, strong = "It has 1 + 2 = 4 legs.\n#### 4", "It has 4 legs."
    assert answers == {("w", "s", "accept"): strong, ("w", "accept"): weak, ("s", "w", "accept"): weak,
                       ("s", "accept"): strong}  # fmt: skip
    assert len(leaves) == 4
    assert leaves[0].turns[1].choice_probs == {"s": 0.5, "accept": 0.5}
    assert leaves[0].turns[2].choice_probs == {"accept": 1.0}
    assert asyncio.run(explore(play_on(pool, run, "How many legs has a cat?")))[0].turns[0].choice_probs is None


def test_exploring_needs_a_finite_action_space_and_a_small_tree(tmp_path) -> None:
    pool = cat_pool(tmp_path)
    serial = RunConfig(policy="serial", constrained="always", max_tokens=600)
    with pytest.raises(Exception, match="one of a few words"):
        asyncio.run(explore(play_on(pool, serial, "How many legs has a cat?")))
    escalation = RunConfig(policy="escalate", constrained="always", max_tokens=16)
    with pytest.raises(ConfigError, match="more than 3 action paths"):
        asyncio.run(explore(play_on(pool, escalation, "How many legs has a cat?"), max_paths=3))


TREE = {  # node → the policy's probability of each word there
    (): {"a": 0.75, "b": 0.25},
    ("a",): {"accept": 0.6, "b": 0.4},
    ("a", "b"): {"accept": 1.0},
    ("b",): {"accept": 0.5, "a": 0.5},
    ("b", "a"): {"accept": 1.0},
}
REWARDS = {("a", "accept"): 1.0, ("a", "b", "accept"): 0.5, ("b", "accept"): 0.0, ("b", "a", "accept"): 0.8}


def paths_of(tree: dict) -> list[list[tuple[dict, str]]]:
    return [[(tree[words[:depth]], words[depth]) for depth in range(len(words))] for words in REWARDS]


def test_expected_advantages_match_hand_computed_values() -> None:
    result = expected_advantages(paths_of(TREE), list(REWARDS.values()))
    assert result.value == pytest.approx(0.7)  # 0.75·(0.6·1 + 0.4·0.5) + 0.25·(0.5·0 + 0.5·0.8)
    assert result.path_probabilities == pytest.approx([0.45, 0.3, 0.125, 0.125])
    assert result.per_turn[0] == pytest.approx([0.45 * (0.8 - 0.7), 0.45 * (1.0 - 0.8)])
    assert result.per_turn[1] == pytest.approx([0.3 * (0.8 - 0.7), 0.3 * (0.5 - 0.8), 0.0])  # the forced turn: 0
    with pytest.raises(ValueError, match="incomplete"):
        expected_advantages(paths_of(TREE)[:3], list(REWARDS.values())[:3])


def test_expected_advantages_are_the_exact_policy_gradient() -> None:
    """Σ_paths Σ_turns A · ∇ log π(word) equals the finite-difference gradient of J = Σ P(path) R(path) for a
    softmax policy with one logit per (node, word)."""
    keys = [(node, word) for node, words in TREE.items() for word in words]
    logits = {key: math.log(TREE[key[0]][key[1]]) for key in keys}

    def policy(values: dict) -> dict:
        return {node: {w: math.exp(values[(node, w)]) / sum(math.exp(values[(node, v)]) for v in words)
                       for w in words} for node, words in TREE.items()}  # fmt: skip

    def objective(values: dict) -> float:
        tree = policy(values)
        return sum(
            math.prod(p[w] for p, w in path) * r for path, r in zip(paths_of(tree), REWARDS.values(), strict=True)
        )

    result = expected_advantages(paths_of(policy(logits)), list(REWARDS.values()))
    tree = policy(logits)
    for key in keys:
        bumped = {**logits, key: logits[key] + 1e-6}
        numeric = (objective(bumped) - objective(logits)) / 1e-6
        analytic = 0.0
        for path, advantages in zip(paths_of(tree), result.per_turn, strict=True):
            words = tuple(w for _, w in path)
            for depth, advantage in enumerate(advantages):
                if words[:depth] == key[0]:  # ∂ log softmax(word | node) / ∂ logit(node, key word)
                    analytic += advantage * ((words[depth] == key[1]) - tree[key[0]][key[1]])
        assert analytic == pytest.approx(numeric, abs=1e-5)


def test_the_cost_penalty_is_gated_by_success() -> None:
    reward = build_reward("cost_penalty", weight=1.0, usd_scale=0.01)

    def spent(usd: float, preference: Preference | None = None) -> Trajectory:
        return Trajectory(
            question="q", turns=[Turn(index=0, output="x", usage=CallUsage(usd=usd))], preference=preference
        )

    values = reward(
        [spent(0.002), spent(0.002), spent(0.005, Preference(weights={"compute": 0.5}))], [True, False, True]
    )
    assert values == pytest.approx([0.8, 0.0, 0.75])


def test_decision_tokens_are_the_branching_ones() -> None:
    pytest.importorskip("trl")
    from podium.core.messages import Message
    from podium.train.samples import ChatFormat, masked_spans, trajectory_samples
    from tests.test_train_support import tiny_tokenizer

    tokenizer = tiny_tokenizer()
    chat = ChatFormat(tokenizer)
    turns = [Turn(index=0, output="python", choices=["python", "answer"]),
             Turn(index=1, output="answer", choices=["answer"])]  # fmt: skip
    messages = [Message(role="system", content="Pick."), Message(role="user", content="What is 12 * 34?"),
                Message(role="assistant", content="python"), Message(role="user", content="408"),
                Message(role="assistant", content="answer")]  # fmt: skip
    trajectory = Trajectory(question="What is 12 * 34?", turns=turns, messages=messages)
    [full] = trajectory_samples(trajectory, chat)
    assert len(masked_spans(full)) == 2
    [decisions] = trajectory_samples(trajectory, chat, decisions=True)
    assert masked_spans(decisions) == [[tokenizer("python", add_special_tokens=False)["input_ids"][0]]]
    assert len(decisions.input_ids) < len(full.input_ids)  # nothing after the last decision is kept
    forced_only = trajectory.model_copy(
        update={"turns": [turns[0].model_copy(update={"choices": ["python"]}), turns[1]]}
    )
    assert trajectory_samples(forced_only, chat, decisions=True) == []


def test_the_oracle_teacher_keeps_the_cheapest_correct_path(tmp_path) -> None:
    from podium.data.collect import CollectConfig, collect
    from podium.pool.config import PoolConfig
    from podium.solve.records import read_trajectory_lines

    recording = tmp_path / "r.csv"
    rows = [("What is 2 + 2?", "False", "2 + 2 = 5\n#### 5", "True", "4"),
            ("What is 3 + 3?", "True", "#### 6", "True", "6"),
            ("What is 4 + 4?", "False", "#### 9", "False", "7")]  # fmt: skip
    recording.write_text(
        "prompt,w,w_response,s,s_response\n" + "".join(",".join(f'"{c}"' for c in r) + "\n" for r in rows)
    )
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(
        "".join(f'{{"question": "{q}", "gold": "{int(q[8]) * 2}", "verifier": "math"}}\n' for q, *_ in rows)
    )
    workers = [{"name": n, "backend": "replay", "model": n, "path": str(recording),
                "price": {"input_per_mtok": p, "output_per_mtok": p}} for n, p in (("w", 1), ("s", 30))]  # fmt: skip
    pool = PoolConfig.model_validate({"workers": workers, "tools": ["check_arithmetic"], "roles": ["standard_reasoner"],
                                      "workers_as_tools": False})  # fmt: skip
    teacher = {"pool": pool, "policy": {"name": "escalate", "verify": "check_arithmetic"}, "max_tokens": 16}
    config = CollectConfig(tasks=str(tasks), out=str(tmp_path / "out"), teacher=teacher, samples="all",
                           prefer_recovered=False, prefer_cheap=True, max_tool_share=1.0)  # fmt: skip
    funnel = asyncio.run(collect(config, progress=False))
    kept = {line.trajectory.question.splitlines()[0]: [t.output for t in line.trajectory.turns]
            for line in read_trajectory_lines(tmp_path / "out" / "sft.jsonl")}  # fmt: skip
    assert kept == {"What is 2 + 2?": ["w", "s", "accept"], "What is 3 + 3?": ["w", "accept"]}  # 4 + 4: nobody right
    assert funnel.steps[0].entered == 3 and funnel.outputs["sft.jsonl"] == 2
    with pytest.raises(ValueError, match="temperature: not used with samples: all"):
        CollectConfig(tasks=str(tasks), out=str(tmp_path / "o2"), samples="all", temperature=0.5)


def test_homogeneous_groups_are_replaced_by_fresh_questions() -> None:
    pytest.importorskip("trl")
    from podium.datasets.items import BenchmarkItem
    from podium.train.batches import GroupMaker, batch_plan
    from podium.train.config import GRPOConfig, RewardConfig
    from podium.train.scoring import RewardScorer

    tasks = [
        BenchmarkItem(id=f"t{n}", question=f"What is {n} + {n}?", gold=str(2 * n), verifier="math") for n in range(6)
    ]

    calls: dict[str, int] = {}

    async def rollout(task, seed: int, preference=None) -> Trajectory:
        question = task.question
        value = int(question.split()[2])  # questions 0-2: every rollout right; 3-5: every other one wrong
        calls[question] = calls.get(question, 0) + 1
        answer = str(2 * value) if value < 3 or calls[question] % 2 else "0"
        return Trajectory(question=question, answer=answer, turns=[Turn(index=0, output=answer)])

    config = GRPOConfig(tasks="t.jsonl", output_dir="o", group_size=2, batch_size=4, resample_groups=3,
                        drop_malformed=False, reward={"design": "cost_penalty"})  # fmt: skip
    maker = GroupMaker(rollout, RewardScorer(RewardConfig(design="cost_penalty"), []), config, tasks)
    groups = asyncio.run(maker.batch(tasks[:2]))
    assert maker.replaced >= 2 and len(groups) == 2
    assert all(len({scored.reward for scored in group}) == 2 for group in groups)
    plan = batch_plan([s for g in groups for s in g], [[0]] * 4, config)
    assert plan.groups_dropped == 0 and all(reward is not None for reward in plan.rewards)
    maker_without = GroupMaker(rollout, RewardScorer(RewardConfig(design="cost_penalty"), []),
                               config.model_copy(update={"resample_groups": 0}), tasks)  # fmt: skip
    kept = asyncio.run(maker_without.batch(tasks[:2]))
    assert batch_plan([s for g in kept for s in g], [[0]] * 4, config).groups_dropped == 1.0
    assert [g[0].trajectory.question for g in kept] == [tasks[0].question, tasks[1].question]

"""``podium data preferences``: rule checks of (instruction, vector) pairs against the pool, the scripted proposal
and second-pass check counted by hand, the train/eval split, and ``podium eval --preferences``."""

import asyncio
import json

import pytest
import yaml
from typer.testing import CliRunner

from podium.backends.scripted import ScriptedBackend
from podium.cli import app
from podium.core.messages import Message
from podium.data.preference_rules import pool_tools, rule_problems
from podium.data.preferences import PreferenceConfig, propose_preferences, read_preferences
from podium.datasets.loaders import shared_data_dir
from podium.pool.config import PoolConfig
from podium.pool.pool import build_pool

POOL = {
    "workers": [
        {"name": "small", "backend": "scripted", "model": "small", "replies": ["ok"]},
        {"name": "big", "backend": "http", "model": "big", "base_url": "http://127.0.0.1:9/v1",
         "price": {"input_per_mtok": 2.0, "output_per_mtok": 8.0}},
    ],
    "tools": ["python", "web_search"],
}  # fmt: skip
TOOLS = ["python", "web_search", "small", "big"]


@pytest.fixture(scope="module")
def tools():
    config = PoolConfig.model_validate(POOL)
    pool = build_pool(config)
    prices = {name: (b.price.input_per_mtok, b.price.output_per_mtok) for name, b in pool.backends.items()}
    return pool_tools(config, pool.prices, prices)


def test_the_pool_gives_the_tools_in_vector_order_with_what_the_rules_need(tools):
    assert [tool.name for tool in tools] == TOOLS
    assert [tool.external for tool in tools] == [False, True, False, True]
    assert [tool.paid for tool in tools] == [True, True, False, True]  # python is paid by the second


@pytest.mark.parametrize(
    ("instruction", "vector", "problem"),
    [
        (
            "My data is confidential; avoid API calls.",
            [1, 0, 1, 1, 1, 0, 0],
            "keeps data local, yet weighs external big",
        ),
        ("Use only free tools, please.", [1, 0, 1, 0, 1, 0, 0], "asks for free tools, yet weighs paid python"),
        ("Avoid web search entirely.", [1, 1, 0, 0, 1, 0, 0], "says to avoid web_search, yet weighs it"),
        ("Please use big for everything.", [0, 0, 1, 0, 1, 0, 0], "asks for big, yet gives it 0"),
        ("I need the answer fast.", [1, 1, 1, 1, 1, 0, 0], "mentions latency, yet gives it 0"),
        ("Keep the cost down.", [1, 1, 1, 1, 1, 0, 1], "mentions compute, yet gives it 0"),
        ("Anything goes.", [1, 1, 1, 1, 1, 1], "vector has 6 entries, expected 7"),
        ("Anything goes.", [0, 0, 0, 0, 0, 0, 0], "every weight is 0"),
        ("Anything goes.", [2, 0, 0, 0, 1, 0, 0], "a weight lies outside [0, 1]"),
    ],
)
def test_rules_catch_inconsistent_pairs(tools, instruction, vector, problem):
    assert problem in "; ".join(rule_problems(instruction, vector, tools))


def test_consistent_pairs_pass_every_rule(tools):
    assert rule_problems("My data is confidential; avoid API calls.", [1, 0, 1, 0, 1, 0, 0], tools) == []
    assert rule_problems("Quick and cheap answers, please.", [0, 0, 1, 0, 0.5, 1, 1], tools) == []


GOOD = [
    {"instruction": "My data is confidential; avoid API calls.", "vector": [1, 0, 1, 0, 1, 0, 0]},
    {"instruction": "I want the best answer, whatever it costs.", "vector": [1, 1, 1, 1, 1, 0, 0]},
]
PROPOSALS = [
    [*GOOD, {"instruction": "Keep it offline, no internet.", "vector": [1, 1, 1, 0, 1, 0, 0]},
     {"instruction": "Short vector, for a change.", "vector": [1, 1]}],
    [{"instruction": "My data is confidential; avoid API calls.", "vector": [1, 0, 1, 0, 1, 0, 0]},
     {"instruction": "A cheap answer is all I need.", "vector": [0, 0, 1, 0, 1, 1, 0]}],
]  # fmt: skip


def scripted_llm() -> ScriptedBackend:
    proposals = iter(PROPOSALS)

    def reply(messages: list[Message]) -> str:
        prompt = messages[0].content
        if "Are the weights consistent" in prompt:
            consistent = "cheap" not in prompt
            return json.dumps({"consistent": consistent, "reason": "matches" if consistent else "cost ignored"})
        return json.dumps({"pairs": next(proposals)})

    return ScriptedBackend([reply], repeat_last=True, model="proposer")


def test_pairs_are_proposed_checked_twice_and_split(tmp_path):
    pool = tmp_path / "pool.yaml"
    pool.write_text(yaml.safe_dump(POOL))
    config = PreferenceConfig(out=str(tmp_path / "out"), pool=str(pool), pairs=6, eval_fraction=0.5, concurrency=1)
    funnel = asyncio.run(propose_preferences(config, progress=False, backend=scripted_llm()))
    steps = [(step.name, step.entered, step.kept, step.left) for step in funnel.steps]
    assert steps == [
        ("proposal requests", 2, 2, {}),
        ("rule checks", 6, 3, {"keeps data local": 1, "vector has 2 entries": 1, "repeats an earlier instruction": 1}),
        ("LLM consistency check", 3, 2, {"inconsistent (second LLM pass)": 1}),
    ]
    assert funnel.outputs == {"train.jsonl": 1, "eval.jsonl": 1}
    pairs = [json.loads(line) for name in ("train", "eval") for line in (tmp_path / "out" / f"{name}.jsonl").open()]
    assert sorted(pair["instruction"] for pair in pairs) == sorted(pair["instruction"] for pair in GOOD)
    pair = next(pair for pair in pairs if "confidential" in pair["instruction"])
    assert pair["tools"] == TOOLS and pair["vector"] == [1, 0, 1, 0, 1, 0, 0]
    assert pair["weights"] == {
        "python": 1,
        "web_search": 0,
        "small": 1,
        "big": 0,
        "outcome": 1,
        "compute": 0,
        "latency": 0,
    }
    assert [decision["filter"] for decision in pair["decisions"]] == ["rules", "LLM check"]
    assert pair["provenance"]["prompt"].startswith("preferences/propose@v1#")
    preferences = read_preferences(tmp_path / "out" / "train.jsonl")
    assert len(preferences) == 1 and preferences[0].vector(TOOLS) in ([1, 0, 1, 0, 1, 0, 0], [1, 1, 1, 1, 1, 0, 0])


@pytest.mark.skipif(not shared_data_dir().is_dir(), reason="shared benchmark data not present")
def test_eval_gives_each_item_a_preference_from_the_file(tmp_path):
    pairs = tmp_path / "eval.jsonl"
    pairs.write_text(
        "".join(json.dumps({"instruction": g["instruction"], "weights": {"outcome": 1}}) + "\n" for g in GOOD)
    )
    system = tmp_path / "system.yaml"
    worker = {"name": "o", "backend": "scripted", "model": "o", "replies": ["<answer>18</answer>"]}
    system.write_text(yaml.safe_dump({"kind": "orchestrator", "pool": {"workers": [worker], "tools": []}}))
    command = ["eval", "--benchmark", "gsm8k", "--limit", "3", "--system", str(system), "--out", str(tmp_path / "run"),
               "--quiet", "--preferences", str(pairs)]  # fmt: skip
    result = CliRunner().invoke(app, command)
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in (tmp_path / "run" / "results.jsonl").open()]
    instructions = {record["item_id"]: record["trajectory"]["preference"]["instruction"] for record in records}
    assert instructions == {"gsm8k-0": GOOD[0]["instruction"], "gsm8k-1": GOOD[1]["instruction"],
                            "gsm8k-2": GOOD[0]["instruction"]}  # fmt: skip
    task = next(r for r in records if r["item_id"] == "gsm8k-1")["trajectory"]["messages"][1]["content"]
    assert task.endswith(GOOD[1]["instruction"])
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({"instruction": "Be quick.", "weights": {"latency": 1}}) + "\n")
    resumed = CliRunner().invoke(app, [*command[:-1], str(other)])
    assert resumed.exit_code == 2 and "preferences: was" in resumed.output

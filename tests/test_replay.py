"""Replay workers: question matching, recorded answers, prices, latency, clear errors, repricing, mixed pools."""

import asyncio
import csv
from pathlib import Path

import pytest

from podium.backends.base import BackendError
from podium.backends.factory import ReplayBackendSpec, build_backend
from podium.backends.replay import LatencyModel, ReplayBackend, count_tokens, load_recording
from podium.core.calls import Status, ToolCall
from podium.core.messages import Message
from podium.costs.prices import ModelPrice, PriceCatalog
from podium.errors import ConfigError
from podium.pool.config import PoolConfig, WorkerConfig
from podium.pool.pool import build_pool

pytest.importorskip("bpe_openai")

QUESTIONS = ["Janet’s ducks lay 16 eggs. How many are left?", "How many eggs?"]


def write_recording(path: Path) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["prompt", "big", "big_response", "small", "small_response"])
        writer.writerow([QUESTIONS[0], "True", "Hello world", "False", "#### 3"])
        writer.writerow([QUESTIONS[1], "False", "#### 7", "True", "#### 8"])
    return path


def ask(backend: ReplayBackend, text: str) -> str:
    return asyncio.run(backend.generate([Message(role="user", content=text)])).text


def test_the_recorded_response_answers_a_prompt_that_quotes_the_question(tmp_path: Path) -> None:
    backend = ReplayBackend.from_file(write_recording(tmp_path / "r.csv"), "big")
    assert ask(backend, f"Solve this, step by step:\n{QUESTIONS[0]}\nEnd with \\boxed{{}}.") == "Hello world"
    # normalised: typographic quote, case and whitespace do not matter
    assert ask(backend, "  janet's DUCKS lay 16   eggs.\nhow many are left?") == "Hello world"


def test_the_longest_contained_question_wins(tmp_path: Path) -> None:
    backend = ReplayBackend.from_file(write_recording(tmp_path / "r.csv"), "small")
    assert ask(backend, QUESTIONS[1]) == "#### 8"
    assert ask(backend, "Janet's ducks lay 16 eggs. How many are left? How many eggs?") == "#### 3"


def test_an_unknown_or_reworded_question_is_a_clear_exec_error(tmp_path: Path) -> None:
    backend = ReplayBackend.from_file(write_recording(tmp_path / "r.csv"), "big")
    with pytest.raises(BackendError, match="no recorded answer") as error:
        ask(backend, "Janet has ducks that lay sixteen eggs; how many remain?")
    assert error.value.status is Status.EXEC_ERR


def test_cost_is_list_price_times_cl100k_tokens_of_recorded_prompt_and_response(tmp_path: Path) -> None:
    price = ModelPrice(input_per_mtok=10.0, output_per_mtok=30.0)
    backend = ReplayBackend.from_file(
        write_recording(tmp_path / "r.csv"), "big", price=price, latency=LatencyModel(first_token_s=0.5, tokens_per_s=4)
    )
    generation = asyncio.run(backend.generate([Message(role="user", content="Please: " + QUESTIONS[0])]))
    assert count_tokens("Hello world") == 2  # "Hello", " world" in cl100k_base
    assert generation.output_tokens == 2
    assert generation.input_tokens == count_tokens(QUESTIONS[0])  # the recorded prompt, not the request
    assert generation.usd == pytest.approx((generation.input_tokens * 10.0 + 2 * 30.0) / 1e6)
    assert generation.latency_s == pytest.approx(0.5 + 2 / 4)


def test_bad_recordings_are_config_errors(tmp_path: Path) -> None:
    path = write_recording(tmp_path / "r.csv")
    with pytest.raises(ConfigError, match="no column"):
        load_recording(path, "medium")
    with pytest.raises(ConfigError, match="replay recording"):
        load_recording(tmp_path / "absent.csv", "big")
    assert [r.correct for r in load_recording(path, "big")] == [True, False]


def test_list_prices_of_the_recorded_models_are_in_the_sheet() -> None:
    catalog = PriceCatalog.default()
    gpt4 = catalog.model_price("gpt-4-1106-preview")
    mixtral = catalog.model_price("mistralai/Mixtral-8x7B-Instruct-v0.1")
    assert (gpt4.input_per_mtok, gpt4.output_per_mtok) == (10.0, 30.0)
    assert (mixtral.input_per_mtok, mixtral.output_per_mtok) == (0.7, 0.7)
    assert "OpenAI" in gpt4.source and "Mistral" in mixtral.source


def test_a_replayed_model_without_a_price_is_an_error(tmp_path: Path) -> None:
    spec = ReplayBackendSpec(model="big", path=str(write_recording(tmp_path / "r.csv")))
    with pytest.raises(ConfigError, match="big"):
        build_backend(spec, PriceCatalog())


def pool_config(path: Path) -> PoolConfig:
    free = ModelPrice(input_per_mtok=1.0, output_per_mtok=2.0)
    return PoolConfig(
        workers=[
            WorkerConfig(name="big", backend="replay", model="big", path=str(path), price=free),
            WorkerConfig(name="tiny", backend="local", model="smollm2-135m-instruct"),
        ],
        tools=["python", "local_search"],
        roles=["standard_reasoner"],
    )


def test_pools_mix_replay_workers_with_python_the_embedded_model_and_local_search(tmp_path: Path) -> None:
    pool = build_pool(pool_config(write_recording(tmp_path / "r.csv")))
    assert {"big", "tiny", "python", "local_search", "standard_reasoner"} <= set(pool.registry.names())
    call = ToolCall(name="standard_reasoner", arguments={"model": "big", "subtask": QUESTIONS[0]})
    result = asyncio.run(pool.registry.call(call))
    assert result.status is Status.OK and result.observation == "Hello world"
    unknown = asyncio.run(pool.registry.call(ToolCall(name="big", arguments={"prompt": "What is 2 + 2?"})))
    assert unknown.status is Status.EXEC_ERR and "no recorded answer" in (unknown.reason or "")


def test_a_price_sheet_per_instance_reprices_replay_workers(tmp_path: Path) -> None:
    pool = build_pool(pool_config(write_recording(tmp_path / "r.csv")))
    sheet = PriceCatalog(models={"big": ModelPrice(input_per_mtok=4.0, output_per_mtok=8.0)})
    repriced = pool.repriced(sheet)
    call = ToolCall(name="big", arguments={"prompt": QUESTIONS[0]})
    before = asyncio.run(pool.registry.call(call)).usage
    after = asyncio.run(repriced.registry.call(call)).usage
    tokens_in, tokens_out = count_tokens(QUESTIONS[0]), 2
    # the worker's own price (1/2) is beaten by the sheet given explicitly, as is a price from the catalog
    assert before.usd == pytest.approx((tokens_in * 1.0 + tokens_out * 2.0) / 1e6)
    assert after.usd == pytest.approx((tokens_in * 4.0 + tokens_out * 8.0) / 1e6)
    by_catalog = pool_config(tmp_path / "r.csv")
    by_catalog.workers[0].backend.price = None
    catalog_pool = build_pool(by_catalog, PriceCatalog(models={"big": ModelPrice(input_per_mtok=1, output_per_mtok=2)}))
    moved = asyncio.run(catalog_pool.repriced(sheet).registry.call(call)).usage
    assert moved.usd == pytest.approx((tokens_in * 4.0 + tokens_out * 8.0) / 1e6)

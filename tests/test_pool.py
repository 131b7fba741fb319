import asyncio
import json

import pytest

from podium.core import Status, ToolCall
from podium.costs.prices import ModelPrice
from podium.errors import ConfigError
from podium.pool.config import PoolConfig, WorkerConfig
from podium.pool.context import EpisodeContext, current_episode
from podium.pool.pool import blind_labels, build_pool, embedded_pool_config, load_pool_config, resolve_pool_config


def scripted(name, replies, **fields):
    return WorkerConfig(
        name=name,
        backend="scripted",
        model=f"{name}-model",
        replies=replies,
        price=ModelPrice(input_per_mtok=1e6, output_per_mtok=2e6),
        **fields,
    )


def call(pool, name, question="What is 6 times 7?", history="", **arguments):
    async def run():
        current_episode.set(EpisodeContext(question=question, history=history))
        return await pool.registry.call(ToolCall(name=name, arguments=arguments))

    return asyncio.run(run())


def test_pool_config_errors_name_the_field(tmp_path):
    path = tmp_path / "pool.yaml"
    path.write_text("workers:\n  - {name: a, backend: http, model: m}\n")
    with pytest.raises(ConfigError, match="base_url"):
        load_pool_config(path)
    path.write_text("workers:\n  - {name: a, backend: scripted, model: m, replies: [x]}\nroles: [oracle]\n")
    with pytest.raises(ConfigError, match=r"roles\.0"):
        load_pool_config(path)
    path.write_text("workers:\n  - {name: a, backend: scripted, model: m, replies: [x]}\nrole_worker: b\n")
    with pytest.raises(ConfigError, match="role_worker"):
        load_pool_config(path)
    path.write_text("workers:\n  - {name: a, backend: scripted, model: m, replies: [x]}\nroles: [knowledge_searcher]\n")
    with pytest.raises(ConfigError, match="search tool"):
        load_pool_config(path)
    worker = "  - {name: a, backend: scripted, model: m, replies: [x]}\n"
    path.write_text("workers:\n" + worker + worker)
    with pytest.raises(ConfigError, match="unique"):
        load_pool_config(path)


def test_a_worker_entry_is_its_own_fields_beside_its_backend_spec_and_dumps_as_written(tmp_path):
    from podium.backends.factory import HttpBackendSpec, LocalBackendSpec, ReplayBackendSpec

    path = tmp_path / "pool.yaml"
    path.write_text(
        "workers:\n"
        "  - {name: a, backend: http, model: m, base_url: 'http://127.0.0.1:9/v1', deadline_s: 30}\n"
        "  - {name: b, backend: local, model: m, dtype: float32, max_retries: 0}\n"
        "  - {name: c, backend: replay, model: m, path: rec.csv}\n"
    )
    served, local, replayed = load_pool_config(path).workers
    # every field of a backend's spec is a field of the worker entry, defined once, in the spec
    assert served.backend == HttpBackendSpec(model="m", base_url="http://127.0.0.1:9/v1", deadline_s=30,
                                             timeout_s=120, max_retries=3)  # fmt: skip
    assert local.backend == LocalBackendSpec(model="m", dtype="float32") and local.call_timeout_s == 120
    assert replayed.backend == ReplayBackendSpec(model="m", path="rec.csv", worker="c")
    for worker in (served, local, replayed):
        entry = worker.model_dump(mode="json")
        assert entry["backend"] == worker.backend.kind and entry["model"] == "m"
        assert WorkerConfig.model_validate(entry) == worker
    embedded = WorkerConfig(name="e", backend="local", model=LocalBackendSpec().model)  # its spec's default model
    assert WorkerConfig.model_validate(embedded.model_dump(mode="json", exclude_defaults=True)) == embedded
    path.write_text("workers:\n  - name: a\n    backend: local\n    model: m\n    base_url: x\n")
    with pytest.raises(ConfigError, match=r"pool.yaml:5: workers\.0\.base_url: Extra inputs are not permitted"):
        load_pool_config(path)
    path.write_text("workers:\n  - {name: a, backend: http, model: m, base_url: ''}\n")
    with pytest.raises(ConfigError, match=r"workers\.0\.base_url: String should have at least 1 character"):
        load_pool_config(path)
    path.write_text("workers:\n  - name: a\n    backend: grpc\n")
    with pytest.raises(ConfigError, match=r"pool.yaml:3: workers\.0\.backend: Input should be 'http', 'local'"):
        load_pool_config(path)


def test_unknown_served_model_price_is_an_error_not_free():
    served = WorkerConfig(name="a", backend="http", model="no-such-model-priced", base_url="http://127.0.0.1:9/v1")
    with pytest.raises(ConfigError, match="no-such-model-priced"):
        build_pool(PoolConfig(workers=[served]))
    local = WorkerConfig(name="a", backend="scripted", model="no-such-model-priced", replies=["x"])
    assert build_pool(PoolConfig(workers=[local])).backends["a"].price.cost(10**6, 10**6) == 0.0


def test_relative_price_file_is_found_beside_the_pool_file(tmp_path):
    (tmp_path / "prices.yaml").write_text("models:\n  m: {input_per_mtok: 3, output_per_mtok: 4}\n")
    (tmp_path / "pool.yaml").write_text(
        "workers:\n  - {name: a, backend: scripted, model: m, replies: [x]}\nprices: prices.yaml\n"
    )
    pool = build_pool(load_pool_config(tmp_path / "pool.yaml"))
    price = pool.backends["a"].price
    assert (price.input_per_mtok, price.output_per_mtok) == (3, 4)
    assert price.source == f"price sheet {(tmp_path / 'prices.yaml').resolve()}"


def test_a_pool_reference_is_a_file_an_inline_pool_or_the_embedded_pool(tmp_path):
    (tmp_path / "pool.yaml").write_text("workers:\n  - {name: a, backend: scripted, model: m, replies: [x]}\n")
    inline = PoolConfig(workers=[WorkerConfig(name="b", backend="scripted", model="m", replies=["y"])])
    assert resolve_pool_config(str(tmp_path / "pool.yaml")) == load_pool_config(tmp_path / "pool.yaml")
    assert resolve_pool_config(inline) is inline
    assert resolve_pool_config(None) == embedded_pool_config()


def test_a_model_is_a_tool_with_its_description_price_and_usage():
    pool = build_pool(PoolConfig(workers=[scripted("expert", ["forty two"], description="Knows numbers.")], tools=[]))
    spec = {s.name: s for s in pool.registry.specs()}["expert"]
    assert spec.description.startswith("Knows numbers.") and "$1e+06 per 1M input" in spec.description
    result = call(pool, "expert", prompt="six times seven")
    assert (result.status, result.value, result.worker) == (Status.OK, "forty two", "expert-model")
    assert (result.usage.input_tokens, result.usage.output_tokens) == (3, 2)
    assert result.usage.usd == pytest.approx(3 * 1 + 2 * 2)


def test_a_blind_pool_lists_its_workers_in_label_order_so_a_place_tells_no_more_than_a_label():
    config = PoolConfig(
        workers=[scripted(name, ["x"], description=f"about {name}") for name in ("gpt-x", "qwen-y", "llama-z")],
        tools=[],
        workers_as_tools=True,
        blind={"enabled": True},
    )
    built = build_pool(config)
    first_listed = set()
    for seed in range(12):
        pool = built.relabelled(seed)
        rows = [[cell.strip() for cell in line.strip("|").split("|")][:3] for line in pool.table().splitlines()[2:]]
        assert [label for label, _, _ in rows] == sorted(pool.labels.values())
        assert [about for _, _, about in rows] == [f"about {worker.name}" for worker in pool.shown_workers]
        assert pool.registry.names() == sorted(pool.labels.values())
        first_listed.add(rows[0][2])
    assert first_listed == {"about gpt-x", "about qwen-y", "about llama-z"}


def test_blind_labels_hide_names_and_are_resampled_per_seed():
    config = PoolConfig(
        workers=[scripted(name, ["x"]) for name in ("gpt-x", "qwen-y", "llama-z")],
        tools=[],
        roles=["standard_reasoner"],
        blind={"enabled": True, "seed": 3},
    )
    pool = build_pool(config)
    assert sorted(pool.labels.values()) == ["Worker1", "Worker2", "Worker3"]
    shown = pool.registry.names()
    assert not {"gpt-x", "qwen-y", "llama-z"} & set(shown)
    assert "gpt-x" not in pool.table() and "Worker1" in pool.table()
    role_models = pool.registry.get("standard_reasoner").spec.parameters["properties"]["model"]["enum"]
    assert role_models == ["Worker1", "Worker2", "Worker3"]
    assert blind_labels(config, 3) == pool.labels
    mappings = {tuple(sorted(pool.relabelled(seed).labels.items())) for seed in range(20)}
    assert len(mappings) > 1
    label = pool.labels["qwen-y"]
    assert call(pool, label, prompt="hi").worker == "qwen-y-model"
    pseudonyms = blind_labels(
        config.model_copy(update={"blind": config.blind.model_copy(update={"style": "pseudonym"})}), 0
    )
    assert all("-" in label and label.split("-")[1].isdigit() for label in pseudonyms.values())


def test_pool_table_lists_members_with_prices_and_primitives():
    pool = build_pool(
        PoolConfig(workers=[scripted("a", ["x"], primitives=["reason", "execute_python"])], roles=["ensemble_solver"])
    )
    table = pool.table()
    assert "| a | model |" in table and "reason, execute_python (+$8.3e-06/s)" in table
    assert "| python | tool |" in table and "$8.3e-06/s" in table
    assert "| ensemble_solver | role |" in table and "4 cost units" in table
    pair = pool.admissible_pairs()[("a", "execute_python")]
    assert pair.model.input_per_mtok == 1e6 and pair.tool.per_second_usd == pytest.approx(8.3e-06)


def test_standard_reasoner_defaults_to_the_episode_question():
    pool = build_pool(
        PoolConfig(workers=[scripted("a", ["6*7 = 42, so \\boxed{42}"])], tools=[], roles=["standard_reasoner"])
    )
    result = call(pool, "standard_reasoner")
    assert result.status is Status.OK and "\\boxed{42}" in result.value
    request = pool.backends["a"].requests[0]
    assert request[0].role == "system" and "What is 6 times 7?" in request[1].content
    assert result.usage.cost_units == 1


def test_critical_reviewer_sees_the_history_and_may_use_another_model():
    pool = build_pool(
        PoolConfig(
            workers=[scripted("a", ["unused"]), scripted("b", ["The step 6*7=48 is wrong."])],
            tools=[],
            roles=["critical_reviewer"],
        )
    )
    result = call(pool, "critical_reviewer", history="turn 1: 6*7 = 48", model="b")
    assert result.value == "The step 6*7=48 is wrong." and result.worker == "b-model"
    assert "turn 1: 6*7 = 48" in pool.backends["b"].requests[0][1].content
    assert pool.backends["a"].requests == []


def test_code_reasoner_writes_code_runs_it_and_returns_both():
    pool = build_pool(
        PoolConfig(workers=[scripted("a", [json.dumps({"code": "print(6*7)"})])], tools=[], roles=["code_reasoner"])
    )
    result = call(pool, "code_reasoner")
    assert result.status is Status.OK
    assert result.value["code"] == "print(6*7)" and result.value["output"]["stdout"] == "42\n"
    assert "[code]\nprint(6*7)" in result.observation and "42" in result.observation
    assert "python" not in pool.registry  # the orchestrator was not offered python, the role still runs it
    failing = build_pool(
        PoolConfig(workers=[scripted("a", ["```python\n1/0\n```"])], tools=[], roles=["code_reasoner"])
    )
    broken = call(failing, "code_reasoner")
    assert broken.status is Status.EXEC_ERR and "ZeroDivisionError" in broken.observation


def test_ensemble_solver_votes_over_samples():
    replies = ["\\boxed{42}", "\\boxed{41}", "so \\boxed{ 42 }", "\\boxed{40}"]
    pool = build_pool(PoolConfig(workers=[scripted("a", replies)], tools=[], roles=["ensemble_solver"]))
    result = call(pool, "ensemble_solver")
    assert result.value["answer"] == "42" and result.value["votes"]["42"] == 2
    assert len(pool.backends["a"].requests) == 4 and result.usage.cost_units == 4
    assert result.usage.output_tokens == sum(len(r.split()) for r in replies)


def test_role_with_unknown_model_is_a_parse_error():
    pool = build_pool(PoolConfig(workers=[scripted("a", ["x"])], tools=[], roles=["standard_reasoner"]))
    assert call(pool, "standard_reasoner", model="nope").status is Status.PARSE_ERR


def test_worker_failure_is_exec_err_not_a_crash():
    pool = build_pool(
        PoolConfig(workers=[scripted("a", ["only one"])], tools=[], roles=["ensemble_solver"], ensemble_samples=2)
    )
    pool.backends["a"].repeat_last = False
    result = call(pool, "ensemble_solver")
    assert result.status is Status.OK and result.value["votes"] == {"only one": 1}
    assert call(pool, "a", prompt="again").status is Status.EXEC_ERR


def test_knowledge_searcher_writes_queries_and_returns_evidence(hotpot_index):
    queries = json.dumps({"queries": ["Scott Derrickson", "Ed Wood director"]})
    pool = build_pool(
        PoolConfig(workers=[scripted("a", [queries])], tools=["local_search"], roles=["knowledge_searcher"])
    )
    result = call(pool, "knowledge_searcher", subtask="Were Scott Derrickson and Ed Wood of the same nationality?")
    assert result.status is Status.OK
    assert result.value["queries"] == ["Scott Derrickson", "Ed Wood director"]
    assert "Scott Derrickson" in result.value["evidence"] and "[query] Ed Wood director" in result.observation
    assert result.usage.output_tokens == len(queries.split()) and result.usage.cost_units == 1
    unreadable = build_pool(
        PoolConfig(workers=[scripted("a", ["not json"])], tools=["local_search"], roles=["knowledge_searcher"])
    )
    fallback = call(unreadable, "knowledge_searcher", subtask="Ed Wood")
    assert fallback.value["queries"] == ["Ed Wood"]  # the subtask itself is searched


@pytest.mark.parametrize(
    ("tools", "searched"), [(["web_search", "local_search"], "local_search"), (["web_search"], "web_search")]
)
def test_roles_and_primitives_search_with_the_same_tool(tools, searched):
    worker = WorkerConfig(name="a", backend="scripted", model="m", replies=["x"], primitives=["web_search"])
    pool = build_pool(PoolConfig(workers=[worker], tools=tools, roles=["knowledge_searcher"]))
    assert pool.config.search_tool == searched
    # The worker is free, so what a call may cost is its searches: three at Tavily's $0.01, or free local ones.
    searches = 0.03 if searched == "web_search" else 0.0
    role = pool.registry.cost_bound(ToolCall(name="knowledge_searcher", arguments={}))
    primitive = pool.primitives.cost_bound(ToolCall(name="web_search", arguments={"model": "a", "instruction": "x"}))
    assert role.usd == pytest.approx(searches) and primitive.usd == pytest.approx(searches)
    assert ("web_search (+$0.01/call)" in pool.table()) is (searched == "web_search")

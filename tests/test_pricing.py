import asyncio
import json
from decimal import Decimal

import pytest
import yaml
from genai_prices import Usage, calc_price
from typer.testing import CliRunner

from podium.backends.scripted import ScriptedBackend
from podium.cli import app
from podium.core.messages import Message
from podium.costs.prices import ModelPrice, PriceCatalog, ToolPrice
from podium.errors import ConfigError, UnknownPriceError
from podium.pool.pool import build_pool, load_pool_config


def test_token_cost_is_tokens_times_price_per_million():
    # $2.50 / 1M input, $10 / 1M output: 1,000 in + 500 out = $0.0025 + $0.0050.
    price = ModelPrice(input_per_mtok=2.5, output_per_mtok=10.0)
    assert price.cost(1_000, 500) == pytest.approx(0.0075, rel=1e-12)
    # One million of each costs exactly the quoted prices: the per-token/per-million confusion of the
    # reference implementation would give 10^6 times this.
    assert price.cost(1_000_000, 1_000_000) == pytest.approx(12.5, rel=1e-12)
    assert price.cost(0, 0) == 0


def test_tool_cost_is_per_call_plus_per_second():
    assert ToolPrice(per_second_usd=0.0000083).cost(2.0) == pytest.approx(0.0000166, rel=1e-12)
    assert ToolPrice(per_call_usd=0.01).cost(123.0) == pytest.approx(0.01, rel=1e-12)
    assert ToolPrice(per_call_usd=0.01, per_second_usd=0.5).cost(3.0) == pytest.approx(1.51, rel=1e-12)
    # A request that was not served (refused, failed) is not billed per call; its compute time still is.
    assert ToolPrice(per_call_usd=0.01, per_second_usd=0.5).cost(3.0, served=False) == pytest.approx(1.5, rel=1e-12)


def test_default_sheet_has_tool_prices_and_paramanager_cost_units():
    catalog = PriceCatalog.default()
    assert catalog.tool_price("python").per_second_usd == pytest.approx(0.0000083)
    assert catalog.tool_price("web_search").per_call_usd == pytest.approx(0.01)
    units = {name: catalog.tool_price(name).cost_units for name in ("standard_reasoner", "ensemble_solver", "python")}
    assert units == {"standard_reasoner": 1, "ensemble_solver": 4, "python": 0}
    assert catalog.tool_price("some_domain_function") == ToolPrice()
    assert catalog.model_price("smollm2-135m-instruct").cost(10**6, 10**6) == 0


def test_models_missing_from_the_sheet_come_from_genai_prices_and_agree_with_it():
    catalog = PriceCatalog.default()
    price = catalog.model_price("gpt-4o", provider="openai")
    assert price.source == "genai-prices:openai/gpt-4o"
    expected = calc_price(Usage(input_tokens=12_345, output_tokens=678), model_ref="gpt-4o", provider_id="openai")
    assert Decimal(str(price.cost(12_345, 678))).quantize(Decimal("1e-12")) == expected.total_price.quantize(
        Decimal("1e-12")
    )


def test_unknown_models_are_an_error_not_free():
    with pytest.raises(UnknownPriceError, match="no-such-model-anywhere"):
        PriceCatalog.default().model_price("no-such-model-anywhere")
    offline_only = PriceCatalog(use_genai_prices=False)
    with pytest.raises(UnknownPriceError, match="--prices"):
        offline_only.model_price("gpt-4o")


def test_user_file_overrides_entries_and_settings(tmp_path):
    override = tmp_path / "prices.yaml"
    override.write_text(
        "provider: together\n"
        "models:\n  gpt-4o: {input_per_mtok: 1.0, output_per_mtok: 2.0}\n"
        "tools:\n  python: {per_call_usd: 0.5}\n"
    )
    catalog = PriceCatalog.for_run(override)
    assert catalog.model_price("gpt-4o").cost(1_000_000, 0) == pytest.approx(1.0)
    assert catalog.tool_price("python") == ToolPrice(per_call_usd=0.5)
    assert catalog.tool_price("web_search").per_call_usd == pytest.approx(0.01)  # untouched entries stay
    assert catalog.provider == "together"
    assert catalog.use_genai_prices  # a setting the file does not mention keeps its value


def test_broken_price_files_name_the_field(tmp_path):
    bad = tmp_path / "prices.yaml"
    bad.write_text("models:\n  m: {input_per_mtok: -1, output_per_mtok: 2}\n")
    with pytest.raises(ConfigError, match=r"models\.m\.input_per_mtok"):
        PriceCatalog.for_run(bad)
    bad.write_text("modles: {}\n")
    with pytest.raises(ConfigError, match="modles"):
        PriceCatalog.for_run(bad)
    with pytest.raises(ConfigError, match="cannot read"):
        PriceCatalog.for_run(tmp_path / "missing.yaml")
    bad.write_text("models: [\n")
    with pytest.raises(ConfigError, match="cannot parse"):
        PriceCatalog.for_run(bad)


# ------------------------------------------------------------------- an explicit sheet beats an inline price

INLINE = {"input_per_mtok": 1.0, "output_per_mtok": 1.0}
SHEET = "models:\n  served-model: {input_per_mtok: 1000.0, output_per_mtok: 1000.0}\n"


def _inline_pool(tmp_path):
    """A worker priced inline, as an HTTP model unknown to genai-prices must be (scripted here: no server)."""
    worker = {"name": "Worker2", "backend": "scripted", "model": "served-model", "replies": ["two words"],
              "price": INLINE}  # fmt: skip
    path = tmp_path / "pool.yaml"
    path.write_text(yaml.safe_dump({"workers": [worker], "tools": [], "prices": "pool-prices.yaml"}))
    (tmp_path / "pool-prices.yaml").write_text(SHEET.replace("1000.0", "500.0"))  # the pool's own sheet
    sheet = tmp_path / "sheet.yaml"
    sheet.write_text(SHEET)
    return path, sheet


def test_an_explicit_sheet_beats_an_inline_price_and_the_call_records_which_it_paid(tmp_path):
    pool_file, sheet = _inline_pool(tmp_path)
    call = ["tools", "call", "Worker2", "--pool", str(pool_file), "--args", '{"prompt": "say two words"}', "--json"]
    inline = json.loads(CliRunner().invoke(app, call).stdout)["usage"]
    priced = json.loads(CliRunner().invoke(app, [*call, "--prices", str(sheet)]).stdout)["usage"]
    tokens = inline["input_tokens"] + inline["output_tokens"]
    assert inline["usd"] == pytest.approx(tokens * 1.0 / 1e6)  # the inline price beats the pool's own sheet
    assert priced["usd"] == pytest.approx(tokens * 1000.0 / 1e6)
    assert inline["price"] == "$1/$1 per 1M in/out tokens (inline price of served-model)"
    assert priced["price"] == f"$1000/$1000 per 1M in/out tokens (price sheet {sheet})"


def test_repricing_a_pool_reaches_workers_priced_inline(tmp_path):
    pool_file, sheet = _inline_pool(tmp_path)
    pool = build_pool(load_pool_config(pool_file))
    assert pool.backends["Worker2"].price.input_per_mtok == 1.0
    repriced = pool.repriced(PriceCatalog.from_file(sheet))
    assert repriced.backends["Worker2"].price.input_per_mtok == 1000.0
    assert pool.repriced(PriceCatalog()).backends["Worker2"].price.input_per_mtok == 1.0  # no entry: inline stays


def test_an_orchestrator_turn_records_its_price():
    backend = ScriptedBackend(
        ["<answer>1</answer>"], model="orch", price=ModelPrice(input_per_mtok=2, output_per_mtok=3)
    )
    generation = asyncio.run(backend.generate([Message(role="user", content="hi")]))
    assert generation.usage.price == "$2/$3 per 1M in/out tokens (catalog)"
    total = generation.usage + generation.usage.model_copy(update={"price": "$9/$9 per 1M in/out tokens (x)"})
    assert total.price == "$2/$3 per 1M in/out tokens (catalog); $9/$9 per 1M in/out tokens (x)"


def test_a_generation_a_tool_output_and_a_call_share_one_definition_of_their_usage_fields():
    from dataclasses import fields

    from podium.backends.base import Generation
    from podium.core.calls import CallUsage, TokenUsage
    from podium.pool.tool import ToolOutput

    shared = TokenUsage.model_fields
    for record in (Generation, CallUsage):
        assert {name: record.model_fields[name].description for name in shared} == {
            name: field.description for name, field in shared.items()
        }
    assert {field.name: field.type for field in fields(ToolOutput)}["usage"] is TokenUsage
    assert not {field.name for field in fields(ToolOutput)} & set(shared)

from decimal import Decimal

import pytest
from genai_prices import Usage, calc_price

from podium.costs.prices import ModelPrice, PriceCatalog, ToolPrice
from podium.errors import ConfigError, UnknownPriceError


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

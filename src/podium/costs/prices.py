"""Prices: per-1M-token model prices, per-call and per-second tool prices, ParaManager cost units.

Lookup order for a model: the run's catalog (Podium's sheet merged with the user's override file), then the
maintained ``genai-prices`` data package. A model found in neither is an error, never silently free.
"""

from datetime import UTC, datetime
from importlib.resources import files
from pathlib import Path

from genai_prices import data_snapshot
from genai_prices.types import TieredPrices
from pydantic import ConfigDict, Field, NonNegativeFloat

from podium.config import Config
from podium.core.record import Record
from podium.errors import UnknownPriceError

TOKENS_PER_PRICE_UNIT = 1_000_000
"""Model prices are quoted per million tokens (the unit of every provider's price sheet)."""


class ModelPrice(Record):
    """Token prices of one model (finite numbers)."""

    model_config = ConfigDict(allow_inf_nan=False)

    input_per_mtok: NonNegativeFloat
    """USD per 1,000,000 prompt tokens."""
    output_per_mtok: NonNegativeFloat
    """USD per 1,000,000 completion tokens."""
    cost_units: NonNegativeFloat = 0.0
    """ParaManager cost units charged per call of this model."""
    source: str = "catalog"
    """Where the price came from (``catalog`` or ``genai-prices:PROVIDER/MODEL``)."""

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        """USD for one call: tokens × price per token, the price being quoted per million tokens."""
        return (input_tokens * self.input_per_mtok + output_tokens * self.output_per_mtok) / TOKENS_PER_PRICE_UNIT

    def describe(self) -> str:
        """The price and where it came from, as a call records it."""
        return f"${self.input_per_mtok:g}/${self.output_per_mtok:g} per 1M in/out tokens ({self.source})"

    def sourced(self, source: str) -> "ModelPrice":
        """This price, saying it came from ``source`` unless its sheet already names a source."""
        return self if "source" in self.model_fields_set else self.model_copy(update={"source": source})


class ToolPrice(Record):
    """Price of one tool call (finite numbers)."""

    model_config = ConfigDict(allow_inf_nan=False)

    per_call_usd: NonNegativeFloat = 0.0
    """USD charged per call (e.g. a search API)."""
    per_second_usd: NonNegativeFloat = 0.0
    """USD charged per second of wall time (e.g. a code interpreter)."""
    cost_units: NonNegativeFloat = 0.0
    """ParaManager cost units charged per call."""

    def cost(self, seconds: float, *, served: bool = True) -> float:
        """USD for one call that took ``seconds`` of wall time; the per-call price only if it was ``served``."""
        return (self.per_call_usd if served else 0.0) + self.per_second_usd * seconds


class PriceCatalog(Config):
    """A price sheet for one run (or one training instance)."""

    models: dict[str, ModelPrice] = Field(default_factory=dict)
    """Model name → token prices. Names are matched exactly."""
    tools: dict[str, ToolPrice] = Field(default_factory=dict)
    """Tool name → call prices. A tool not listed is free."""
    use_genai_prices: bool = True
    """Look models missing from ``models`` up in the genai-prices data package."""
    provider: str | None = None
    """Default genai-prices provider id for lookups (e.g. ``together``, ``deepinfra``, ``openai``)."""

    @classmethod
    def default(cls) -> "PriceCatalog":
        """Podium's bundled sheet (tool prices, cost units, local models)."""
        return cls.from_file(files("podium.costs") / "prices.yaml", source="Podium's price sheet")

    @classmethod
    def from_file(cls, path: str | Path, source: str | None = None) -> "PriceCatalog":
        """A price file; each model price without a ``source`` of its own says it came from ``source`` (default:
        the file)."""
        sheet = super().from_file(path)
        named = source or f"price sheet {path}"
        return sheet.model_copy(update={"models": {name: p.sourced(named) for name, p in sheet.models.items()}})

    @classmethod
    def for_run(cls, override: str | Path | None = None) -> "PriceCatalog":
        """The bundled sheet with a user's override file merged over it."""
        catalog = cls.default()
        return catalog if override is None else catalog.merged(cls.from_file(override))

    def merged(self, override: "PriceCatalog") -> "PriceCatalog":
        """A new catalog where entries and settings given in ``override`` win."""
        settings = {name: getattr(override, name) for name in override.model_fields_set - {"models", "tools"}}
        return self.model_copy(
            update={
                "models": {**self.models, **override.models},
                "tools": {**self.tools, **override.tools},
                **settings,
            }
        )

    def model_price(self, model: str, provider: str | None = None) -> ModelPrice:
        """Token prices of ``model``; raises :class:`UnknownPriceError` when no source has them."""
        if model in self.models:
            return self.models[model]
        if self.use_genai_prices:
            found = _genai_price(model, provider or self.provider)
            if found is not None:
                return found
        raise UnknownPriceError(
            f"no price for model '{model}'"
            + (f" at provider '{provider or self.provider}'" if provider or self.provider else "")
            + "; add it under 'models:' in a price file passed with --prices"
        )

    def tool_price(self, tool: str) -> ToolPrice:
        """Call prices of ``tool`` (free when not listed)."""
        return self.tools.get(tool, ToolPrice())


def _genai_price(model: str, provider: str | None) -> ModelPrice | None:
    snapshot = data_snapshot.get_snapshot()
    try:
        found_provider, info = snapshot.find_provider_model(model, None, provider, None)
    except LookupError:
        return None
    prices = info.get_prices(datetime.now(tz=UTC))
    if prices.input_mtok is None or prices.output_mtok is None:
        return None
    return ModelPrice(
        input_per_mtok=float(_base_price(prices.input_mtok)),
        output_per_mtok=float(_base_price(prices.output_mtok)),
        source=f"genai-prices:{found_provider.id}/{info.id}",
    )


def _base_price(price: object) -> object:
    # Tiered prices (e.g. long-context surcharges) are charged at the base tier: Podium's prompts are far
    # below the thresholds at which providers switch tiers.
    return price.base if isinstance(price, TieredPrices) else price

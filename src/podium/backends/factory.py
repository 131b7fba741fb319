"""The one backend factory: a backend spec (a config with a ``kind``) and a price catalog give a backend.

Pools, system configs and training configs all describe models with these specs and build them here.
"""

from typing import Annotated, Literal

from pydantic import Field

from podium.backends.base import FREE, ChatBackend
from podium.backends.http import HttpBackend, HttpBackendConfig
from podium.backends.local import LocalBackend, LocalBackendConfig
from podium.backends.replay import LatencyModel, ReplayBackend, recorded_worker
from podium.backends.scripted import ScriptedBackend
from podium.config import Config
from podium.costs.prices import ModelPrice, PriceCatalog
from podium.errors import ConfigError, UnknownPriceError


class HttpBackendSpec(HttpBackendConfig):
    """An OpenAI-compatible endpoint (every field of ``HttpBackendConfig``) and its price."""

    kind: Literal["http"] = "http"
    """Selects this backend type."""
    price: ModelPrice | None = None
    """Token prices; when absent the model is looked up in the run's price catalog and genai-prices, and a model
    found in neither is an error (give ``price: {input_per_mtok: 0, output_per_mtok: 0}`` for a free server)."""
    provider: str | None = None
    """genai-prices provider id for the price lookup (e.g. ``together``)."""


class LocalBackendSpec(LocalBackendConfig):
    """A model run in this process (every field of ``LocalBackendConfig``; no path means embedded SmolLM2)."""

    kind: Literal["local"] = "local"
    """Selects this backend type."""
    price: ModelPrice | None = None
    """Token prices; when absent the catalog's entry for ``model``, else free (no provider bills local tokens)."""


class ScriptedBackendSpec(Config):
    """Replayed replies, for tests and demos."""

    kind: Literal["scripted"] = "scripted"
    """Selects this backend type."""
    model: str = "scripted"
    """Name in records."""
    replies: list[str] = Field(min_length=1)
    """Replies in request order."""
    repeat_last: bool = True
    """Keep answering with the last reply once the list is used up."""
    price: ModelPrice | None = None
    """Token prices (tokens are counted as words), so cost accounting and the USD cap can be exercised; when
    absent the catalog's entry for ``model``, else free."""


class ReplayBackendSpec(Config):
    """A model's recorded answers replayed at its price (``podium.backends.replay``)."""

    kind: Literal["replay"] = "replay"
    """Selects this backend type."""
    model: str
    """The model's column in the recording, and its name for pricing."""
    path: str = Field(min_length=1)
    """The recording: a CSV with ``prompt``, ``MODEL`` (True/False) and ``MODEL_response`` columns, or a Podium
    recording's directory (``podium routing record``)."""
    worker: str | None = None
    """In a Podium recording: the recorded worker to replay (default: the one that ran ``model``)."""
    latency: LatencyModel = Field(default_factory=LatencyModel)
    """Modelled latency of one call."""
    price: ModelPrice | None = None
    """Token prices; when absent the catalog's entry for ``model`` (a replayed model found in no catalog is an
    error: it stands for a paid model)."""


AnySpec = HttpBackendSpec | LocalBackendSpec | ScriptedBackendSpec | ReplayBackendSpec
"""Every backend spec type."""
BACKEND_SPECS: dict[str, type[AnySpec]] = {
    "http": HttpBackendSpec,
    "local": LocalBackendSpec,
    "scripted": ScriptedBackendSpec,
    "replay": ReplayBackendSpec,
}
"""Each backend spec type by its ``kind``."""
BackendSpec = Annotated[AnySpec, Field(discriminator="kind")]
"""Any backend, selected by its ``kind``."""


def backend_price(spec: AnySpec, catalog: PriceCatalog, sheet: PriceCatalog | None = None) -> ModelPrice:
    """The price of ``spec``'s model: an explicitly given ``sheet``'s entry for it (``--prices``, a per-instance
    price sheet) beats the spec's own ``price:``, which beats the price a Podium recording replayed was recorded at,
    which beats the ``catalog`` (the pool's sheet, Podium's, genai-prices). A served (``http``) or replayed model
    with no price anywhere is an error, never silently free; local and scripted models are free unless priced."""
    if sheet is not None and spec.model in sheet.models:
        return sheet.models[spec.model]
    if spec.price is not None:
        return spec.price.sourced(f"inline price of {spec.model}")
    if isinstance(spec, ReplayBackendSpec):
        recorded = recorded_worker(spec.path, spec.model, spec.worker)
        if recorded is not None:  # a Podium recording: the price it was recorded at
            return recorded.price
    provider = spec.provider if isinstance(spec, HttpBackendSpec) else None
    try:
        return catalog.model_price(spec.model, provider)
    except UnknownPriceError as error:
        if isinstance(spec, HttpBackendSpec | ReplayBackendSpec):
            raise ConfigError(f"backend {spec.model}: {error}; or set 'price:' on the backend") from error
        return FREE


def build_backend(spec: AnySpec, catalog: PriceCatalog | None = None, sheet: PriceCatalog | None = None) -> ChatBackend:
    """The backend ``spec`` describes, priced by :func:`backend_price` (``catalog`` default: Podium's sheet)."""
    price = backend_price(spec, catalog or PriceCatalog.default(), sheet)
    if isinstance(spec, ScriptedBackendSpec):
        return ScriptedBackend(spec.replies, model=spec.model, repeat_last=spec.repeat_last, price=price)
    if isinstance(spec, ReplayBackendSpec):
        return ReplayBackend.from_file(spec.path, spec.model, worker=spec.worker, price=price, latency=spec.latency)
    if isinstance(spec, LocalBackendSpec):
        return LocalBackend(LocalBackendConfig(**spec.model_dump(exclude={"kind", "price"})), price)
    return HttpBackend(HttpBackendConfig(**spec.model_dump(exclude={"kind", "price", "provider"})), price)

"""Provenance of data rows: stable hashes of the pool and the price sheet, and Podium's version."""

import hashlib
import json
from typing import Any

from pydantic import BaseModel

from podium import __version__
from podium.costs.prices import PriceCatalog
from podium.pool.config import PoolConfig


def short_hash(data: Any) -> str:
    """The first 16 hex digits of the SHA-256 of ``data`` as canonical JSON (a model is dumped first)."""
    if isinstance(data, BaseModel):
        data = data.model_dump(mode="json")
    text = json.dumps(data, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def pool_hash(config: PoolConfig) -> str:
    """Hash of a pool configuration (workers, tools, roles, limits)."""
    return short_hash(config)


def prices_hash(catalog: PriceCatalog) -> str:
    """Hash of the price sheet a pool was priced with (its models and tools)."""
    return short_hash(catalog)


def podium_version() -> str:
    return __version__

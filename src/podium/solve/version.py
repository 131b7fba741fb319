"""A system's version: a content hash of what decides its episodes, so that traffic, evaluations and training data
can say which system produced them, and a retrained system is never mistaken for the one it replaces.

The hash covers the system's run settings (its policy, limits, deny list…), its pool as configured, the price sheet
that pool runs under, the orchestrator's own worker, and the weights of every LoRA adapter they load (the files'
bytes, not their paths: the same adapter in another checkout is the same version, a retrained one at the same path
is not). A checkpoint given by ``path`` counts by its path (its weights can be gigabytes); what is not part of the
system's files (a replayed recording's rows, a live endpoint's model) counts by name.
"""

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from podium.costs.prices import PriceCatalog
from podium.pool.config import PoolConfig, WorkerConfig
from podium.runtime.config import RunConfig

VERSION_DIGITS = 12
"""Hex digits of a version (48 bits: no two versions of one deployment collide in practice)."""
ADAPTER_FILES = ("adapter_config.json", "adapter_model.safetensors", "adapter_model.bin")
"""The files of a LoRA adapter directory that decide its weights."""


def adapter_digest(directory: str | Path) -> str:
    """SHA-256 of an adapter's config and weights (``missing`` when the directory holds neither: such a system is
    refused when it loads, so its version is never served)."""
    digest = hashlib.sha256()
    found = False
    for name in ADAPTER_FILES:
        path = Path(directory) / name
        if path.is_file():
            found = True
            digest.update(name.encode())
            with path.open("rb") as handle:
                for block in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(block)
    return digest.hexdigest() if found else "missing"


def _worker(worker: WorkerConfig) -> dict[str, Any]:
    """A worker's config with its adapter as the digest of its weights."""
    data = worker.model_dump(mode="json")
    adapter = getattr(worker.backend, "adapter", None)
    if adapter is not None:
        data["adapter"] = f"sha256:{adapter_digest(adapter)}"
    return data


def system_version(
    run: RunConfig,
    pool: PoolConfig,
    prices: PriceCatalog,
    *,
    orchestrator: WorkerConfig | None = None,
    extra: Iterable[Any] = (),
) -> str:
    """The version of a system: ``run`` settings, its ``pool`` (adapters by their weights; the pool's own price
    file by the sheet it resolves to, ``prices``), the ``orchestrator`` worker of its own, and ``extra`` parts (a
    fitted router's data, the simulated user, instructions)."""
    # the sandbox's interpreter is this machine's (it defaults to the running one: `podium serve` and the tests
    # that load the same file run under different paths to it), not the system's
    pool_data = pool.model_dump(mode="json", exclude={"workers": True, "prices": True, "sandbox": {"python"}})
    pool_data["workers"] = [_worker(worker) for worker in pool.workers]
    parts = {
        "run": run.model_dump(mode="json"),
        "pool": pool_data,
        "prices": prices.model_dump(mode="json"),
        "orchestrator": None if orchestrator is None else _worker(orchestrator),
        "extra": list(extra),
    }
    text = json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:VERSION_DIGITS]

"""Pools of a stage, built once per configuration: a stage whose teacher, cold-start policy, writer and validator
name the same pool shares its backends, so a local model is loaded once, not once per role."""

from podium.data.provenance import short_hash
from podium.pool.config import PoolConfig
from podium.pool.pool import Pool, build_pool

PoolCache = dict[str, Pool]
"""Hash of a pool configuration → the pool built from it."""


def shared_pool(config: PoolConfig, cache: PoolCache | None) -> Pool:
    """The pool of ``config``, from ``cache`` when an equal configuration was built before."""
    if cache is None:
        return build_pool(config)
    key = short_hash(config)
    if key not in cache:
        cache[key] = build_pool(config)
    return cache[key]

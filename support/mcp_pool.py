"""A pool of one scripted worker whose tools come from MCP servers, and the command that starts the test server
(``support/mcp_server_script.py``; run it from the repository root)."""

import sys

from podium.pool.config import PoolConfig, WorkerConfig
from podium.pool.pool import Pool, build_pool

SCRIPT = [sys.executable, "-m", "support.mcp_server_script"]
"""Starts ``support/mcp_server_script.py`` over stdio."""


def pool_with(*servers: dict, tools: tuple[str, ...] = ()) -> Pool:
    worker = WorkerConfig(name="w", backend="scripted", model="w", replies=["unused"])
    return build_pool(PoolConfig(workers=[worker], tools=list(tools), mcp_servers=list(servers)))  # type: ignore[arg-type]

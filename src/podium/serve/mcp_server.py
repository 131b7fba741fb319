"""``podium mcp serve``: the pool's tools (python sandbox, symbolic math, search, workers, roles) for any MCP
client, over stdio or streamable HTTP, on the official ``mcp`` SDK (extra ``podium[mcp]``).

Every call goes through the pool's registry, as the orchestrator's calls do: arguments are validated against
the tool's schema, the call runs under its time limit, and the result carries its status. The MCP result's text
is the observation the orchestrator would see; ``isError`` is set unless the status is OK; the structured content
holds the status, its reason, the value, the USD charged and the latency.
"""

from collections.abc import Sequence
from typing import Any, Literal

import anyio
from pydantic import Field

from podium import __version__
from podium.core.calls import ToolCall, ToolResult
from podium.errors import ConfigError
from podium.extras import require_extra
from podium.pool.choice import PoolChoice
from podium.pool.pool import Pool
from podium.pool.registry import ToolRegistry
from podium.serve.http import Listen, run_app

Transport = Literal["stdio", "http"]


class McpServeConfig(PoolChoice, Listen):
    """The pool's tools served over MCP."""

    tool: list[str] = Field(default_factory=list)
    """Expose only this tool of the pool (repeatable); default: every tool."""
    transport: Transport = "stdio"
    """stdio (a client starts this command) or http (streamable HTTP; host and port apply)."""
    port: int = Field(default=8765, ge=0, le=65535)
    """For http: port to listen on (endpoint /mcp)."""


def exposed_registry(pool: Pool, tools: Sequence[str] | None = None) -> ToolRegistry:
    """The pool's registry, or only ``tools`` of it."""
    try:
        return pool.registry.subset(allow=list(tools) if tools else None)
    except KeyError as error:
        raise ConfigError(f"--tool: {error.args[0]}; the pool has {pool.registry.names()}") from error


def result_content(result: ToolResult) -> dict[str, Any]:
    """The structured content of a call's result (JSON: status, reason, value, usd, latency_s)."""
    dumped = result.model_dump(mode="json", include={"status", "reason", "value"})
    return {**dumped, "usd": result.usage.usd, "latency_s": result.usage.latency_s}


def mcp_server(registry: ToolRegistry) -> Any:
    """A low-level MCP server listing and calling the tools of ``registry``."""
    require_extra("mcp", "mcp")
    from mcp import types
    from mcp.server.lowlevel import Server

    async def list_tools(_: Any, __: Any) -> Any:
        return types.ListToolsResult(
            tools=[
                types.Tool(name=spec.name, description=spec.description, input_schema=spec.parameters)
                for spec in registry.specs()
            ]
        )

    async def call_tool(_: Any, params: Any) -> Any:
        result = await registry.call(ToolCall(name=params.name, arguments=params.arguments or {}))
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=result.observation)],
            structured_content=result_content(result),
            is_error=not result.ok,
        )

    return Server("podium", version=__version__, on_list_tools=list_tools, on_call_tool=call_tool)


def serve_mcp(registry: ToolRegistry, transport: Transport, *, host: str = "127.0.0.1", port: int = 8765) -> None:
    """Serve the tools until the client hangs up (stdio) or until interrupted (HTTP, at ``/mcp``)."""
    server = mcp_server(registry)
    if transport == "http":
        run_app(server.streamable_http_app(host=host), host=host, port=port)
        return
    from mcp.server.stdio import stdio_server

    async def over_stdio() -> None:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    anyio.run(over_stdio)

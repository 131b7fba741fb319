"""A small MCP server for the tests, on the official SDK: ``python -m tests.mcp_server_script`` serves over
stdio, ``… --http PORT`` over streamable HTTP on 127.0.0.1. Its tools add, fail, sleep and crash the server."""

import asyncio
import os
import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("podium-test-server")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def shout(text: str) -> str:
    """The text in capitals."""
    return text.upper()


@server.tool()
def fail(reason: str) -> str:
    """Raise an error with the given reason."""
    raise ValueError(reason)


@server.tool()
async def sleep(seconds: float) -> str:
    """Sleep, then say so."""
    await asyncio.sleep(seconds)
    return f"slept {seconds}"


@server.tool()
def crash() -> str:
    """End the server process at once, mid-call."""
    os._exit(3)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()

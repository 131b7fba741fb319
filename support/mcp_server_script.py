"""A small MCP server for the tests, on the official SDK: ``python -m support.mcp_server_script`` serves over
stdio, ``… --http PORT`` over streamable HTTP on 127.0.0.1. Its tools add, fail, sleep, crash the server, and
return too much: megabytes of text or of error, structured content nested thousands of levels deep, and a line
of megabytes that is not JSON in place of a reply."""

import asyncio
import os
import sys
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("podium-test-server", log_level="CRITICAL")  # the big errors are results, not log noise
WIRE = os.dup(1)
"""The stdio wire, kept before the SDK diverts file descriptor 1 to stderr while it serves."""


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
def big(megabytes: float, error: bool = False) -> str:
    """Return (or fail with) that many megabytes of text."""
    text = "x" * int(megabytes * 1_000_000)
    if error:
        raise ToolError(text)
    return text


@server.tool(structured_output=True)
def deep(levels: int) -> dict[str, Any]:
    """A structured value nested ``levels`` deep."""
    value: dict[str, Any] = {"leaf": 1}
    for _ in range(levels):
        value = {"inner": value}
    return value


@server.tool()
async def garble(megabytes: float) -> str:
    """Write a line of that many megabytes that is not JSON-RPC in place of the reply (stdio only), then never
    reply."""
    line = memoryview(b"x" * int(megabytes * 1_000_000) + b"\n")
    while line:
        line = line[os.write(WIRE, line) :]
    await asyncio.sleep(3600)
    return "never"


@server.tool()
def crash() -> str:
    """End the server process at once, mid-call."""
    os._exit(3)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()

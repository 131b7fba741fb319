"""MCP servers as members of the pool, through the official ``mcp`` SDK (extra ``podium[mcp]``).

A pool's ``mcp_servers`` lists servers reached over stdio (a command Podium starts) or streamable HTTP (a URL).
When the pool is built, Podium connects to each, lists its tools and adds them to the registry as
``<name>__<tool>``, their JSON schemas checked like any tool's; they are then validated, timed, priced and
given statuses as every tool is. A tool that reports an error is EXEC_ERR with its text; a call past
``timeout_s`` is TIMEOUT; a server that dies mid-call makes that call EXEC_ERR at once ("Connection closed"),
and the next call starts (stdio) or reaches (HTTP) the server again. A reply the client cannot read (nested too
deeply for the SDK, malformed, longer than ``max_reply_mb``) names no call the client could tell, so every call
then in flight on that server is EXEC_ERR at once, rather than waiting out its time limit; the calls after it are
served as usual (stdio lines are read in linear time, see :mod:`podium.pool.builtin.mcp_stdio`).

Each server's session lives on its own event loop in a background thread, so the tools can be called from any
event loop (a CLI command's, the HTTP server's, a test's) and the session outlives them all; the pool's
:meth:`McpClients.close` (also run at exit) ends the sessions and the stdio servers.
"""

import asyncio
import atexit
import logging
import os
import threading
from collections.abc import AsyncIterator, Coroutine, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Any, Self

from pydantic import Field, PositiveFloat, PositiveInt, model_validator

from podium.config import Config
from podium.core.calls import Status
from podium.costs.prices import PriceCatalog, ToolPrice
from podium.errors import ConfigError, ToolDefinitionError
from podium.extras import require_extra
from podium.pool.tool import Tool, ToolOutput

log = logging.getLogger(__name__)


class UnreadableReply(RuntimeError):
    """The server sent a reply the MCP client could not read."""


class McpServerConfig(Config):
    """One MCP server whose tools join the pool."""

    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_\-]*$")
    """The server's name in the pool; its tools are named ``<name>__<tool>`` unless ``prefix`` is set."""
    command: list[str] | None = Field(default=None, min_length=1)
    """stdio: the command that starts the server, e.g. ``[python, -m, my_server]``."""
    env: dict[str, str] = Field(default_factory=dict)
    """stdio: environment variables for the server, on top of a minimal default environment."""
    cwd: str | None = None
    """stdio: the server's working directory."""
    url: str | None = None
    """Streamable HTTP: the server's endpoint, e.g. ``http://127.0.0.1:8000/mcp``."""
    api_key_env: str | None = None
    """Streamable HTTP: environment variable holding a key sent as ``Authorization: Bearer <key>``."""
    tools: list[str] | None = None
    """Only these of the server's tools (by their MCP names); default: all."""
    prefix: str | None = None
    """Prefix of the tools' names in the pool; default ``<name>__``; empty for the bare names."""
    timeout_s: PositiveFloat = 60.0
    """Time limit of one call."""
    connect_timeout_s: PositiveFloat = 30.0
    """Time limit of connecting and listing the tools."""
    max_reply_mb: PositiveInt = 64
    """Longest message read from the server, in MiB (a stdio line, an HTTP server-sent event); a longer one is
    skipped, and fails the calls in flight on the server."""
    price: ToolPrice | None = None
    """Price of each call of the server's tools; a price file's entry for a tool's pool name wins."""

    @model_validator(mode="after")
    def _one_transport(self) -> Self:
        if (self.command is None) == (self.url is None):
            raise ValueError(f"mcp server '{self.name}': give exactly one of command (stdio) or url (HTTP)")
        return self

    def pool_name(self, tool: str) -> str:
        return f"{f'{self.name}__' if self.prefix is None else self.prefix}{tool}"


class McpConnection:
    """A session with one MCP server, held on an event loop of its own (see the module docstring)."""

    def __init__(self, config: McpServerConfig) -> None:
        self.config = config
        self.mcp = require_extra("mcp", "mcp")
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name=f"mcp-{config.name}", daemon=True)
        self.thread.start()
        self.client: Any = None
        """The live ``mcp.Client`` (``None`` before connecting and once the session has ended)."""
        self.closing: asyncio.Event | None = None
        self.holder: asyncio.Task[None] | None = None
        self.reconnecting: asyncio.Task[None] | None = None
        self.in_flight: set[asyncio.Future[None]] = set()
        """One future per call awaiting its reply, failed when the server sends a reply the client cannot read."""

    def open(self) -> list[Any]:
        """Connect and list the server's tools (blocks up to ``connect_timeout_s``)."""
        future = asyncio.run_coroutine_threadsafe(self._connect(), self.loop)
        try:
            return future.result(timeout=self.config.connect_timeout_s)
        except Exception as error:
            future.cancel()
            self.close()
            reason = "timed out" if isinstance(error, TimeoutError) else f"{type(error).__name__}: {error}"
            raise ConfigError(
                f"mcp server '{self.config.name}': cannot connect and list its tools ({reason})"
            ) from error

    async def call(self, tool: str, arguments: dict[str, Any]) -> Any:
        """Call ``tool`` from any event loop; returns the SDK's ``CallToolResult``."""
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(self._call(tool, arguments), self.loop))

    def close(self) -> None:
        """End the session (and a stdio server), then the loop thread."""
        if not self.loop.is_running():
            return
        if self.holder is not None:
            stop = asyncio.run_coroutine_threadsafe(self._disconnect(), self.loop)
            try:
                stop.result(timeout=self.config.connect_timeout_s)
            except Exception as error:  # closing must not fail the caller; say what was left
                log.warning("mcp server '%s' did not close cleanly: %s", self.config.name, error)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=self.config.connect_timeout_s)

    # On the connection's loop -----------------------------------------------------------------------------

    async def _connect(self) -> list[Any]:
        ready: asyncio.Future[list[Any]] = self.loop.create_future()
        self.closing = asyncio.Event()
        self.holder = asyncio.create_task(self._hold(ready, self.closing))
        return await ready

    async def _hold(self, ready: asyncio.Future[list[Any]], closing: asyncio.Event) -> None:
        """Hold one session open until asked to close (the SDK's contexts must open and close in one task)."""
        try:
            async with (
                self._transport() as transport,
                self.mcp.Client(transport, cache=None, message_handler=self._on_message) as client,
            ):
                tools = await _list_tools(client)
                self.client = client
                ready.set_result(tools)
                await closing.wait()
        except Exception as error:
            if not ready.done():
                ready.set_exception(error)
            else:
                log.warning("mcp server '%s': the session ended: %s", self.config.name, error)
        finally:
            self.client = None

    def _transport(self) -> AbstractAsyncContextManager[Any]:
        """A context giving the SDK transport to connect through."""
        config = self.config
        if config.command is not None:
            from podium.pool.builtin.mcp_stdio import stdio_transport  # needs the mcp extra, checked in __init__

            return nullcontext(stdio_transport(config.command, config.env, config.cwd, config.max_reply_mb << 20))
        headers = {}
        if config.api_key_env is not None:
            key = os.environ.get(config.api_key_env)
            if not key:
                raise ConfigError(
                    f"mcp server '{config.name}': the environment variable {config.api_key_env} is not set"
                )
            headers["Authorization"] = f"Bearer {key}"
        return _http_transport(self.mcp, str(config.url), headers, config.timeout_s, config.max_reply_mb << 20)

    async def _call(self, tool: str, arguments: dict[str, Any]) -> Any:
        if self.client is None:  # the session ended (the server died): connect again, once for all waiting calls
            if self.reconnecting is None or self.reconnecting.done():
                self.reconnecting = asyncio.create_task(self._reconnect())
            await asyncio.shield(self.reconnecting)  # a call that times out leaves the reconnection running
        try:
            # The registry's time limit ends the call first (TIMEOUT); the SDK's read timeout is a backstop.
            reply = self.client.call_tool(tool, arguments, read_timeout_seconds=self.config.timeout_s + 5.0)
            return await self._answer(reply)
        except UnreadableReply:
            raise  # the session goes on: only a reply was lost
        except self.mcp.MCPError as error:
            if error.code == self.mcp.types.CONNECTION_CLOSED:  # the server died: the next call connects again
                await self._disconnect()
            raise
        except Exception:  # the transport failed (an HTTP server gone): the next call connects again
            await self._disconnect()
            raise

    async def _answer(self, reply: Coroutine[Any, Any, Any]) -> Any:
        """The reply, or :class:`UnreadableReply` as soon as the server sends one the client cannot read."""
        unreadable: asyncio.Future[None] = self.loop.create_future()
        self.in_flight.add(unreadable)
        answered = asyncio.ensure_future(reply)
        try:
            await asyncio.wait((answered, unreadable), return_when=asyncio.FIRST_COMPLETED)
        finally:
            self.in_flight.discard(unreadable)
            if not answered.done():
                answered.cancel()
        if answered.done() and not answered.cancelled():
            return answered.result()
        return unreadable.result()  # raises the UnreadableReply it was failed with

    async def _on_message(self, message: Any) -> None:
        """What the session passes on besides replies: a transport-level error is a reply it could not read."""
        if isinstance(message, Exception):
            detail = " ".join(str(message).split())[:300]
            error = UnreadableReply(
                f"mcp server '{self.config.name}' sent a reply the client cannot read ({type(message).__name__}: "
                f"{detail}); the calls in flight on it failed at once"
            )
            for waiting in list(self.in_flight):
                if not waiting.done():
                    waiting.set_exception(error)
        await asyncio.sleep(0)

    async def _reconnect(self) -> None:
        await self._disconnect()
        await asyncio.wait_for(self._connect(), self.config.connect_timeout_s)

    async def _disconnect(self) -> None:
        if self.closing is not None and self.holder is not None:
            self.closing.set()
            await asyncio.gather(self.holder, return_exceptions=True)
        self.client = None


@asynccontextmanager
async def _http_transport(
    mcp: Any, url: str, headers: dict[str, str], timeout_s: float, max_event_bytes: int
) -> AsyncIterator[Any]:
    """The streamable HTTP transport over an HTTP client of its own (for the key header), closed with it."""
    httpx2 = require_extra("mcp", "httpx2")
    timeout = httpx2.Timeout(30.0, read=max(300.0, timeout_s + 30.0))  # SSE streams stay open while tools run
    async with httpx2.AsyncClient(headers=headers, timeout=timeout) as http:
        yield mcp.client.streamable_http.streamable_http_client(
            url, http_client=http, max_sse_event_size=max_event_bytes
        )


async def _list_tools(client: Any) -> list[Any]:
    tools, cursor = [], None
    for _ in range(1000):  # pages; bounded against a server that never ends its listing
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            return tools
    raise ConfigError("the server's tool listing did not end after 1000 pages")


def tool_output(result: Any) -> ToolOutput:
    """An MCP ``CallToolResult`` as a tool output: structured content as the value when the server gives
    it, the text blocks as the observation; an error result is EXEC_ERR with its text."""
    parts = [block.text if block.type == "text" else f"[{block.type} content]" for block in result.content]
    text = "\n".join(parts)
    if result.is_error:
        return ToolOutput(None, Status.EXEC_ERR, text or "the MCP tool reported an error")
    if result.structured_content is not None:
        return ToolOutput(result.structured_content, observation=text or None)
    return ToolOutput(text)


def converted_tool(config: McpServerConfig, connection: McpConnection, listed: Any) -> Tool:
    """One listed MCP tool as a Podium tool (its input schema checked as any tool's)."""
    schema = {key: value for key, value in dict(listed.input_schema or {}).items() if key != "$schema"}
    schema.setdefault("type", "object")
    description = listed.description or listed.title or f"The '{listed.name}' tool of the MCP server '{config.name}'."

    async def run(**arguments: Any) -> ToolOutput:
        return tool_output(await connection.call(listed.name, arguments))

    return Tool.from_schema(config.pool_name(listed.name), description, schema, run, timeout_s=config.timeout_s)


@dataclass
class McpClients:
    """The pool's MCP sessions and the tools they offer."""

    connections: list[McpConnection] = field(default_factory=list)
    tools: list[Tool] = field(default_factory=list)
    prices: dict[str, ToolPrice] = field(default_factory=dict)
    """Pool tool name → its server's configured price."""

    @classmethod
    def connect(cls, configs: Sequence[McpServerConfig]) -> "McpClients":
        """Connect to every server and convert its tools; a tool whose schema cannot be used is left out with a
        warning, a server that cannot be reached is a :class:`ConfigError`."""
        clients = cls()
        for config in configs:
            connection = McpConnection(config)
            clients.connections.append(connection)
            atexit.register(connection.close)
            try:
                listed = connection.open()
            except ConfigError:
                clients.close()
                raise
            for item in listed:
                if config.tools is not None and item.name not in config.tools:
                    continue
                try:
                    clients.tools.append(converted_tool(config, connection, item))
                except (ToolDefinitionError, ValueError) as error:
                    log.warning("mcp server '%s': tool '%s' left out: %s", config.name, item.name, error)
                    continue
                if config.price is not None:
                    clients.prices[clients.tools[-1].name] = config.price
        return clients

    def priced(self, catalog: PriceCatalog) -> PriceCatalog:
        """``catalog`` with the servers' prices for tools it does not price itself."""
        missing = {name: price for name, price in self.prices.items() if name not in catalog.tools}
        return catalog.merged(PriceCatalog(tools=missing)) if missing else catalog

    def close(self) -> None:
        for connection in self.connections:
            connection.close()

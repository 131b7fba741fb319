"""``podium mcp serve``: the pool's tools for any MCP client (stdio or streamable HTTP)."""

from typing import Annotated

import typer

from podium.cli.common import PoolOption, SandboxOption, UnisolatedOption, errors, fail, open_pool
from podium.cli.output import shown
from podium.errors import PodiumError

app = typer.Typer(help="Model Context Protocol: expose the pool's tools to MCP clients.", no_args_is_help=True)


@app.callback()
def mcp_group() -> None:
    """Model Context Protocol: expose the pool's tools to MCP clients."""


@app.command("serve")
def serve_command(
    pool: PoolOption = None,
    tool: Annotated[
        list[str] | None, typer.Option("--tool", help="Expose only this tool of the pool (repeatable).")
    ] = None,
    transport: Annotated[
        str, typer.Option("--transport", help="stdio (a client starts this command) or http (streamable HTTP).")
    ] = "stdio",
    host: Annotated[str, typer.Option("--host", help="For http: address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="For http: port to listen on (endpoint /mcp).")] = 8765,
    sandbox_config: SandboxOption = None,
    allow_unisolated: UnisolatedOption = False,
) -> None:
    """Serve the pool's tools (python sandbox, symbolic math, search, workers, roles) over MCP; every call is
    validated, timed and priced by the pool's registry and returns its status."""
    from podium.serve.mcp_server import exposed_registry, serve_mcp

    if transport not in ("stdio", "http"):
        raise fail(PodiumError(f"--transport must be stdio or http, not '{transport}'"))
    built = open_pool(pool, sandbox_config=sandbox_config, allow_unisolated=allow_unisolated)
    try:
        registry = exposed_registry(built, tool)
    except PodiumError as error:
        raise fail(error) from error
    if transport == "http":
        served = f"MCP tools {shown(registry.names())} on http://{host}:{port}/mcp"
        errors.print(served, highlight=False, soft_wrap=True)
    try:
        serve_mcp(registry, "http" if transport == "http" else "stdio", host=host, port=port)
    finally:
        built.close()

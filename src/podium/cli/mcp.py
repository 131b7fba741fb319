"""``podium mcp serve``: the pool's tools for any MCP client (stdio or streamable HTTP)."""

import typer

from podium.cli.common import POOL_FIELDS, ConfigFileOption, errors, fail, load_settings, open_pool
from podium.cli.fields import Flags, config_options
from podium.cli.output import shown
from podium.errors import PodiumError
from podium.serve.mcp_server import McpServeConfig, exposed_registry, serve_mcp

app = typer.Typer(help="Model Context Protocol: expose the pool's tools to MCP clients.", no_args_is_help=True)


@app.callback()
def mcp_group() -> None:
    """Model Context Protocol: expose the pool's tools to MCP clients."""


@app.command("serve")
@config_options(McpServeConfig, (*POOL_FIELDS, "tool", "transport", "host", "port"))
def serve_command(config: ConfigFileOption = None, *, flags: Flags) -> None:
    """Serve the pool's tools (python sandbox, symbolic math, search, workers, roles) over MCP; every call is
    validated, timed and priced by the pool's registry and returns its status."""
    settings = load_settings(McpServeConfig, config, flags)
    built = open_pool(settings)
    try:
        registry = exposed_registry(built, settings.tool)
    except PodiumError as error:
        raise fail(error) from error
    host, port = settings.host, settings.port
    if settings.transport == "http":
        served = f"MCP tools {shown(registry.names())} on http://{host}:{port}/mcp"
        errors.print(served, highlight=False, soft_wrap=True)
    try:
        serve_mcp(registry, settings.transport, host=host, port=port)
    finally:
        built.close()

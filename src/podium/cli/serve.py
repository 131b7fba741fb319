"""``podium serve``: orchestrators as OpenAI-compatible models, one episode per conversation."""

from pathlib import Path
from typing import Annotated

import typer

from podium.backends.base import BackendError
from podium.cli.common import errors, fail
from podium.cli.fields import Flags, config_options, load_config
from podium.errors import PodiumError
from podium.serve.http import run_app
from podium.serve.orchestrator_server import DEFAULT_SYSTEM, ServeConfig, create_orchestrator_app
from podium.solve.router import load_system
from podium.solve.system import System


@config_options(
    ServeConfig,
    ("max_concurrent", "max_queued", ("request_timeout_s", "--request-timeout"), "api_key_env", "trace", "request_log"),
)
def serve_command(
    system: Annotated[
        list[Path] | None,
        typer.Option(
            "--system",
            help="System file (repeatable): an orchestrator (a `podium eval` orchestrator file works as it is) or a "
            "router (kind router); its name is the model id. Default: the embedded offline orchestrator, two turns "
            "then the summarizer.",
        ),
    ] = None,
    host: Annotated[str, typer.Option("--host", help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port to listen on.")] = 8000,
    config: Annotated[
        Path | None,
        typer.Option("--config", help="ServeConfig file (YAML/JSON): queue, keys with daily USD limits, logs."),
    ] = None,
    *,
    flags: Flags,
) -> None:
    """Serve orchestrators as an OpenAI-compatible API: /v1/models lists them, /v1/chat/completions runs a
    conversation as an episode (client tools, streamed steps, sampling parameters; extra field `podium` for
    budget and preference), /metrics reports in Prometheus format."""
    try:
        settings = load_config(ServeConfig, config, flags)
        # a system that cannot answer never starts serving
        if system:
            systems = [load_system(path) for path in system]
        else:
            systems = [System.build(DEFAULT_SYSTEM, source="the embedded orchestrator")]
        app = create_orchestrator_app(systems, settings)
    except (PodiumError, BackendError) as error:
        raise fail(error) from error
    names = ", ".join(s.name for s in systems)
    errors.print(f"serving {names} on http://{host}:{port}/v1", highlight=False, soft_wrap=True)
    run_app(app, host=host, port=port)

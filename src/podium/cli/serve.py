"""``podium serve``: orchestrators as OpenAI-compatible models, one episode per conversation."""

from pathlib import Path
from typing import Annotated, Any

import typer

from podium.backends.base import BackendError
from podium.cli.common import errors, fail
from podium.errors import PodiumError
from podium.solve.config import SystemConfig
from podium.solve.system import System


def serve_command(
    system: Annotated[
        list[Path] | None,
        typer.Option(
            "--system",
            help="Orchestrator system file (repeatable; an `orchestrator` file of podium eval works as it is); "
            "its name is the model id. Default: the embedded offline orchestrator.",
        ),
    ] = None,
    host: Annotated[str, typer.Option("--host", help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port to listen on.")] = 8000,
    config: Annotated[
        Path | None,
        typer.Option("--config", help="ServeConfig file (YAML/JSON): queue, keys with daily USD limits, logs."),
    ] = None,
    max_concurrent: Annotated[
        int | None, typer.Option("--max-concurrent", min=1, help="Responses worked on at once (default 4).")
    ] = None,
    max_queued: Annotated[
        int | None, typer.Option("--max-queued", min=0, help="Requests waiting for a slot; more get 429 (default 64).")
    ] = None,
    api_key_env: Annotated[
        str | None, typer.Option("--api-key-env", help="Env variable holding the key clients must send.")
    ] = None,
    trace: Annotated[Path | None, typer.Option("--trace", help="Append every trajectory to this JSONL.")] = None,
    request_log: Annotated[
        str | None, typer.Option("--request-log", help="Append JSON request logs to this file ('-': stderr).")
    ] = None,
) -> None:
    """Serve orchestrators as an OpenAI-compatible API: /v1/models lists them, /v1/chat/completions runs a
    conversation as an episode (client tools, streamed steps, sampling parameters; extra field `podium` for
    budget and preference), /metrics reports in Prometheus format."""
    from podium.serve.http import run_app
    from podium.serve.orchestrator_server import ServeConfig, create_orchestrator_app

    flags: dict[str, Any] = {
        "max_concurrent": max_concurrent,
        "max_queued": max_queued,
        "api_key_env": api_key_env,
        "trace": None if trace is None else str(trace),
        "request_log": request_log,
    }
    try:
        base = ServeConfig.from_file(config) if config is not None else ServeConfig()
        settings = ServeConfig.from_dict(
            {**base.model_dump(), **{key: value for key, value in flags.items() if value is not None}},
            source="podium serve options",
        )
        # a system that cannot answer never starts serving
        if system:
            systems = [System.build(SystemConfig.from_file(path), source=str(path)) for path in system]
        else:
            systems = [System.build(SystemConfig(), source="the embedded orchestrator")]
        app = create_orchestrator_app(systems, settings)
    except (PodiumError, BackendError) as error:
        raise fail(error) from error
    names = ", ".join(s.name for s in systems)
    errors.print(f"serving {names} on http://{host}:{port}/v1", highlight=False, soft_wrap=True)
    run_app(app, host=host, port=port)

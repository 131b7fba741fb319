"""``podium serve``: orchestrators as OpenAI-compatible models, one episode per chat completion request."""

from pathlib import Path
from typing import Annotated

import typer

from podium.backends.base import BackendError
from podium.cli.common import errors, fail
from podium.errors import PodiumError
from podium.runtime.checks import require_runnable
from podium.runtime.system import OrchestratorSystem, SystemSpec


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
    max_concurrent: Annotated[
        int, typer.Option("--max-concurrent", min=1, help="Episodes run at once; more requests get 429.")
    ] = 4,
    api_key_env: Annotated[
        str | None, typer.Option("--api-key-env", help="Env variable holding the key clients must send.")
    ] = None,
    trace: Annotated[Path | None, typer.Option("--trace", help="Append every trajectory to this JSONL.")] = None,
) -> None:
    """Serve orchestrators as an OpenAI-compatible API: /v1/models lists them, /v1/chat/completions runs one
    episode per request (the last user message is the task; extra field `podium` for budget and preference)."""
    from podium.serve.http import run_app
    from podium.serve.orchestrator_server import ServeConfig, create_orchestrator_app, load_system_spec

    try:
        config = ServeConfig(
            max_concurrent=max_concurrent, api_key_env=api_key_env, trace=None if trace is None else str(trace)
        )
        specs = [load_system_spec(path) for path in system] if system else [SystemSpec()]
        systems = [OrchestratorSystem.build(spec) for spec in specs]
        for path, built in zip(system or ["the embedded orchestrator"], systems, strict=True):
            require_runnable(built.pool, built.config, str(path))  # one that cannot answer never starts serving
        app = create_orchestrator_app(systems, config)
    except (PodiumError, BackendError) as error:
        raise fail(error) from error
    names = ", ".join(s.name for s in systems)
    errors.print(f"serving {names} on http://{host}:{port}/v1", highlight=False, soft_wrap=True)
    run_app(app, host=host, port=port)

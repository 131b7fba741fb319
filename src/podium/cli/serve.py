"""``podium serve``: orchestrators as OpenAI-compatible models, one episode per conversation."""

from pathlib import Path
from typing import Annotated

import typer

from podium.backends.base import BackendError
from podium.cli.common import errors, fail
from podium.cli.fields import Flags, config_options, load_config
from podium.errors import ConfigError, PodiumError
from podium.serve.http import run_app
from podium.serve.orchestrator_server import DEFAULT_SYSTEM, ServeConfig, create_orchestrator_app
from podium.solve.router import load_system
from podium.solve.system import System


@config_options(
    ServeConfig,
    (
        "max_concurrent", "max_queued", ("request_timeout_s", "--request-timeout"), "api_key_env", "trace",
        "request_log", "served", "max_shadow",
    ),
)  # fmt: skip
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
    shadow: Annotated[
        list[Path] | None,
        typer.Option(
            "--shadow",
            help="A candidate system file (repeatable) run beside the served system of the same name (or the only "
            "one) on real requests: its answers are recorded in --served, never returned; promote it with "
            "`podium promote`.",
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
        shadows = shadowed(systems, [(path, load_system(path)) for path in shadow or []])
        app = create_orchestrator_app(systems, settings, shadows)
    except (PodiumError, BackendError) as error:
        raise fail(error) from error
    for served in systems:
        beside = shadows.get(served.name)
        also = "" if beside is None else f", shadow {beside.name} version {beside.version}"
        errors.print(
            f"serving {served.name} (version {served.version}{also}) on http://{host}:{port}/v1",
            highlight=False, soft_wrap=True,
        )  # fmt: skip
    run_app(app, host=host, port=port)


def shadowed(systems: list[System], candidates: list[tuple[Path, System]]) -> dict[str, System]:
    """Served model id → the candidate beside it: the served system of the candidate's name, or the only one."""
    names = [served.name for served in systems]
    shadows: dict[str, System] = {}
    for path, candidate in candidates:
        model = candidate.name if candidate.name in names else names[0] if len(names) == 1 else None
        if model is None:
            raise ConfigError(f"--shadow {path}: its system {candidate.name} is not served; served: {names}")
        if model in shadows:
            raise ConfigError(f"--shadow {path}: {model} has a shadow already ({shadows[model].name})")
        shadows[model] = candidate
    return shadows

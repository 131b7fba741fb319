"""``podium serve``: orchestrators as OpenAI-compatible models, one episode per conversation; ``podium promote``:
a served model's shadow made live once its gate passed."""

import os
from pathlib import Path
from typing import Any

import httpx

from podium.backends.base import BackendError
from podium.cli.common import ConfigFileOption, console, errors, fail
from podium.cli.fields import Flags, config_options, load_config
from podium.config import Config
from podium.errors import ConfigError, PodiumError
from podium.evaluate.gate import Comparison
from podium.serve.http import run_app
from podium.serve.orchestrator_server import create_orchestrator_app
from podium.serve.settings import DEFAULT_SYSTEM, ServeConfig
from podium.solve.router import load_system
from podium.solve.system import System

SERVE_FIELDS = (
    "system", "shadow", "host", "port", "max_concurrent", "max_queued", ("request_timeout_s", "--request-timeout"),
    "api_key_env", "trace", "request_log", "served", "max_shadow",
)  # fmt: skip
"""The fields of :class:`ServeConfig` offered as flags (the others: in its ``--config`` file)."""


@config_options(ServeConfig, SERVE_FIELDS)
def serve_command(config: ConfigFileOption = None, *, flags: Flags) -> None:
    """Serve orchestrators as an OpenAI-compatible API: /v1/models lists them, /v1/chat/completions runs a
    conversation as an episode (client tools, streamed steps, sampling parameters; extra field `podium` for
    budget and preference), /metrics reports in Prometheus format."""
    try:
        settings = load_config(ServeConfig, config, flags)
        # a system that cannot answer never starts serving
        if settings.system:
            systems = [load_system(path) for path in settings.system]
        else:
            systems = [System.build(DEFAULT_SYSTEM, source="the embedded orchestrator")]
        shadows = shadowed(systems, [(path, load_system(path)) for path in settings.shadow])
        app = create_orchestrator_app(systems, settings, shadows)
    except (PodiumError, BackendError) as error:
        raise fail(error) from error
    host, port = settings.host, settings.port
    for served in systems:
        beside = shadows.get(served.name)
        also = "" if beside is None else f", shadow {beside.name} version {beside.version}"
        errors.print(
            f"serving {served.name} (version {served.version}{also}) on http://{host}:{port}/v1",
            highlight=False, soft_wrap=True,
        )  # fmt: skip
    run_app(app, host=host, port=port)


def shadowed(systems: list[System], candidates: list[tuple[str, System]]) -> dict[str, System]:
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


class PromoteConfig(Config):
    """Promote the candidate in a served model's shadow, once it has won against the version serving."""

    model: str
    """The served model id."""
    gate: str
    """The comparison ``podium eval --against`` wrote (``comparison.json``): the candidate it compared must be the
    shadow, its baseline the version serving, and it must have passed."""
    url: str = "http://127.0.0.1:8000/v1"
    """The server's base URL."""
    api_key_env: str | None = None
    """Environment variable holding one of the server's ``admin_keys`` (where it needs keys)."""


@config_options(PromoteConfig, ("model", "gate", "url", "api_key_env"))
def promote_command(*, flags: Flags) -> None:
    """Make a served model's shadow its live system, if the gate's comparison says it won against the version
    serving; requests in flight finish on the version they started on."""
    try:
        settings = load_config(PromoteConfig, None, flags)
        comparison = read_comparison(Path(settings.gate))
        headers = {}
        if settings.api_key_env is not None:
            headers["authorization"] = f"Bearer {os.environ.get(settings.api_key_env, '')}"
        model_url = f"{settings.url.rstrip('/')}/models/{settings.model}"
        served = _answered(httpx.get(model_url, headers=headers, timeout=30))
        refusal = promotion_refusal(comparison, served)
        if refusal is not None:
            raise ConfigError(f"{settings.model} not promoted: {refusal}")
        version = str(comparison.candidate.version)
        promoted = _answered(httpx.post(f"{model_url}/promote", json={"version": version}, headers=headers, timeout=30))
    except (PodiumError, httpx.HTTPError) as error:
        raise fail(error) from error
    console.print(
        f"{settings.model}: version {promoted['version']} is live (was {served['version']}); {comparison.reason}",
        highlight=False, soft_wrap=True,
    )  # fmt: skip


def read_comparison(path: Path) -> Comparison:
    try:
        return Comparison.model_validate_json(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise ConfigError(f"{path} is not a comparison of `podium eval --against`: {error}") from error


def promotion_refusal(comparison: Comparison, served: dict[str, Any]) -> str | None:
    """Why the gate's ``comparison`` does not allow promoting the shadow of the ``served`` model object."""
    shadow = (served.get("podium") or {}).get("shadow")
    if not comparison.passed:
        return f"the candidate did not pass its gate ({comparison.reason})"
    if shadow is None:
        return "it has no shadow (serve the candidate with --shadow)"
    if comparison.candidate.version != shadow["version"]:
        return f"the gate compared version {comparison.candidate.version}, and the shadow is {shadow['version']}"
    if comparison.baseline.version != served["version"]:
        return f"the gate's baseline was version {comparison.baseline.version}, and {served['version']} is serving"
    return None


def _answered(response: httpx.Response) -> dict[str, Any]:
    """The server's JSON answer; its error message when it refused."""
    body = response.json()
    if response.is_success:
        return body
    error = body.get("error", {}) if isinstance(body, dict) else {}
    raise ConfigError(f"the server answered {response.status_code}: {error.get('message', response.text[:300])}")

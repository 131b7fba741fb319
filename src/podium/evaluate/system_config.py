"""System config files: a YAML naming the system kind and its backend(s), and the registry that builds it.

Example::

    kind: majority_vote
    name: qwen-vote8
    votes: 8
    temperature: 0.7
    backend: {kind: http, model: Qwen/Qwen3-8B, base_url: http://127.0.0.1:8000/v1,
              price: {input_per_mtok: 0.2, output_per_mtok: 0.2}}
    grading: {verifier: judge, judge: {kind: http, model: gpt-4o-mini, base_url: https://api.openai.com/v1}}

``grading`` is optional: without it each benchmark's own verifier grades the answers.

Built-in kinds: ``single_model``, ``majority_vote``, ``self_refine``, ``static_router``, and on the runtime
(:mod:`podium.evaluate.runtime_systems`, loaded on first use) ``tools_model``, ``orchestrator`` and ``router`` (a
router fitted on a recording). Other systems
plug in with :func:`register_system`, after which ``podium eval --system`` accepts their configs unchanged.
"""

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, NonNegativeFloat, PositiveInt

from podium.backends.factory import BackendSpec, build_backend
from podium.config import Config, read_structured_file
from podium.core.answers import VerifierKind
from podium.errors import ConfigError
from podium.evaluate.systems import (
    ItemSolver,
    MajorityVoteSystem,
    ModelCaller,
    RouteRule,
    SelfRefineSystem,
    SingleModelSystem,
    StaticRouterSystem,
)
from podium.graders.grader import GradingConfig
from podium.solve.config import NamedSystem

# -------------------------------------------------------------------------------------------------- systems


class EvalSystemConfig(NamedSystem):
    """Fields every system config of ``podium eval`` has: its kind (a key of :data:`SYSTEM_KINDS`), its name and
    how the run grades it."""

    grading: GradingConfig | None = None
    """How the run grades answers; default: each benchmark's own verifier. ``{verifier: judge, judge: {…}}`` has
    an LLM judge grade every answer instead."""


class SingleModelConfig(EvalSystemConfig):
    """One model without tools."""

    kind: Literal["single_model"] = "single_model"
    """Selects this system."""
    backend: BackendSpec
    """The model."""
    temperature: NonNegativeFloat = 0.0
    """Sampling temperature (0 is greedy)."""
    max_tokens: PositiveInt = 1024
    """Most completion tokens per generation."""


class MajorityVoteConfig(SingleModelConfig):
    """k samples and a vote over their normalised answers."""

    kind: Literal["majority_vote"] = "majority_vote"
    """Selects this system."""
    temperature: NonNegativeFloat = Field(default=0.7, gt=0.0)
    """Sampling temperature; must be above 0 or every vote is the same."""
    votes: PositiveInt = 8
    """Samples per item (k)."""


class SelfRefineConfig(SingleModelConfig):
    """Draft, critique, revise."""

    kind: Literal["self_refine"] = "self_refine"
    """Selects this system."""
    rounds: PositiveInt = 2
    """Most critique-and-revise rounds after the draft."""


class RouteRuleConfig(Config):
    """One routing rule; every condition given must hold, the first matching rule wins."""

    backend: str
    """Key in ``backends`` to send matching items to."""
    keywords: list[str] = Field(default_factory=list)
    """Any of these words in the question (case-insensitive)."""
    min_chars: PositiveInt | None = None
    """The question is at least this long."""
    verifiers: list[VerifierKind] = Field(default_factory=list)
    """The item is judged by one of these verifiers."""


class StaticRouterConfig(EvalSystemConfig):
    """Route each item to one of several models by a fixed rule."""

    kind: Literal["static_router"] = "static_router"
    """Selects this system."""
    backends: dict[str, BackendSpec] = Field(min_length=1)
    """Name → model, e.g. ``cheap`` and ``strong``."""
    rules: list[RouteRuleConfig] = Field(default_factory=list)
    """Rules in order of precedence."""
    default: str
    """Backend for items no rule matches."""
    temperature: NonNegativeFloat = 0.0
    """Sampling temperature of every backend."""
    max_tokens: PositiveInt = 1024
    """Most completion tokens per generation."""


PLUGIN_MODULES = ("podium.evaluate.runtime_systems",)
"""Modules that register more system kinds when imported, loaded before a config's kind is looked up (not at the
top of this module: they import it to register themselves)."""

SystemFactory = Callable[[Any], ItemSolver]
SYSTEM_KINDS: dict[str, tuple[type[EvalSystemConfig], SystemFactory]] = {}
"""System kind → (its config class, a function building the system from a validated config)."""


def register_system(kind: str, config_type: type[EvalSystemConfig], factory: SystemFactory) -> None:
    """Make ``kind`` usable in system config files (the runtime registers its systems here)."""
    SYSTEM_KINDS[kind] = (config_type, factory)


def system_config_from_dict(data: Any, *, source: str = "system config") -> EvalSystemConfig:
    """Validate a system config with the config class its ``kind`` names."""
    for module in PLUGIN_MODULES:
        importlib.import_module(module)
    if not isinstance(data, dict) or "kind" not in data:
        raise ConfigError(f"invalid {source}:\n  kind: required, one of {', '.join(sorted(SYSTEM_KINDS))}")
    if data["kind"] not in SYSTEM_KINDS:
        raise ConfigError(
            f"invalid {source}:\n  kind: {data['kind']!r} is not one of {', '.join(sorted(SYSTEM_KINDS))}"
        )
    return SYSTEM_KINDS[data["kind"]][0].from_dict(data, source=source)


def load_system_config(path: str | Path) -> EvalSystemConfig:
    """Read and validate a system config file (YAML or JSON)."""
    return system_config_from_dict(read_structured_file(path), source=str(path))


def build_system(config: EvalSystemConfig) -> ItemSolver:
    """The system a validated config describes."""
    return SYSTEM_KINDS[config.kind][1](config)


def _caller(config: SingleModelConfig) -> ModelCaller:
    return ModelCaller(build_backend(config.backend), config.temperature, config.max_tokens)


def _name(config: EvalSystemConfig, model: str) -> str:
    return config.name or f"{config.kind}:{model}"


def _single_model(config: SingleModelConfig) -> ItemSolver:
    return SingleModelSystem(_name(config, config.backend.model), _caller(config))


def _majority_vote(config: MajorityVoteConfig) -> ItemSolver:
    return MajorityVoteSystem(_name(config, config.backend.model), _caller(config), config.votes)


def _self_refine(config: SelfRefineConfig) -> ItemSolver:
    return SelfRefineSystem(_name(config, config.backend.model), _caller(config), config.rounds)


def _static_router(config: StaticRouterConfig) -> ItemSolver:
    callers = {
        key: ModelCaller(build_backend(spec), config.temperature, config.max_tokens)
        for key, spec in config.backends.items()
    }
    rules = [
        RouteRule(rule.backend, tuple(rule.keywords), rule.min_chars, tuple(rule.verifiers)) for rule in config.rules
    ]
    try:
        return StaticRouterSystem(_name(config, "+".join(config.backends)), callers, rules, config.default)
    except ValueError as error:
        raise ConfigError(f"invalid static_router config: {error}") from error


register_system("single_model", SingleModelConfig, _single_model)
register_system("majority_vote", MajorityVoteConfig, _majority_vote)
register_system("self_refine", SelfRefineConfig, _self_refine)
register_system("static_router", StaticRouterConfig, _static_router)

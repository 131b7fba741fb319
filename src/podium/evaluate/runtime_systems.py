"""Systems that run the orchestrator runtime (SPEC §8): a prompted orchestrator over the full pool, trained
orchestrator checkpoints, and a single model with basic tools. Each is a :class:`podium.solve.system.System`,
solving items as data collection, rollouts and serving do. Importing this module registers their config kinds
(``orchestrator``, ``tools_model``, ``router``) so ``podium eval --system`` accepts them.

Example (a trained checkpoint is an ``orchestrator`` whose orchestrator worker is a ``local`` worker with a
``path``; deny it as a tool so it does not call itself)::

    kind: orchestrator
    policy: serial
    max_turns: 8
    orchestrator: trained
    deny: [trained]
    pool:
      workers:
        - {name: trained, backend: local, model: my-orchestrator, path: runs/grpo/final,
           price: {input_per_mtok: 0, output_per_mtok: 0}}
        - {name: qwen, backend: http, model: Qwen/Qwen3-8B, base_url: http://127.0.0.1:8000/v1}
      tools: [python, symbolic_math]
"""

from typing import Literal

from podium.errors import ConfigError
from podium.evaluate.system_config import EvalSystemConfig, register_system
from podium.pool.config import BasicTool
from podium.solve.config import SystemConfig, orchestrator_model
from podium.solve.router import RouterSystemConfig
from podium.solve.system import System


class OrchestratorConfig(SystemConfig, EvalSystemConfig):
    """A prompted (or trained) orchestrator over the whole pool, under any policy: a system file of
    :class:`~podium.solve.config.SystemConfig` and how the run grades it."""


class ToolsModelConfig(OrchestratorConfig):
    """One model with the basic tools only: no roles, no other workers, not itself as a tool."""

    kind: Literal["tools_model"] = "tools_model"
    """Selects this system."""
    tools: list[BasicTool] | None = None
    """The basic tools it may call; default: those of the pool."""


def build_orchestrator(config: OrchestratorConfig) -> System:
    """The prompted orchestrator over the full pool (or a trained one: a ``local`` worker with a ``path``)."""
    return System.build(config)


def build_tools_model(config: ToolsModelConfig) -> System:
    """One worker of the pool as the orchestrator, with only the basic tools visible."""
    full = config.pool_config()
    settings = config.run_config()
    if config.own_orchestrator() is not None:
        raise ConfigError("orchestrator: a tools_model's orchestrator is the pool worker that calls the tools; name it")
    model = orchestrator_model(full, settings)
    kept = {settings.orchestrator or full.workers[0].name, config.user.worker}  # the user is no tool either
    workers = [worker for worker in full.workers if worker.name in kept]
    tools = list(config.tools if config.tools is not None else full.tools)
    restricted = full.model_copy(
        update={"workers": workers, "tools": tools, "roles": [], "role_worker": None, "workers_as_tools": False}
    )
    # The allow list hides the workers' rows in the pool table: they are the caller and the user, not tools.
    allow = tools if settings.allow is None else settings.allow
    name = config.name or f"tools_model:{model}"
    return System.build(config.model_copy(update={"pool": restricted, "replay": None, "name": name, "allow": allow}))


class RouterConfig(RouterSystemConfig, EvalSystemConfig):
    """A router fitted on a recording's train split (:mod:`podium.solve.router`) and how the run grades it."""


def build_router(config: RouterConfig) -> System:
    """The router system: the router fitted (or loaded) and playing the escalate policy over its pool."""
    return config.build()


register_system("orchestrator", OrchestratorConfig, build_orchestrator)
register_system("tools_model", ToolsModelConfig, build_tools_model)
register_system("router", RouterConfig, build_router)

"""Systems that run the orchestrator runtime (SPEC §8): a single model with basic tools, a prompted orchestrator
over the full pool, and trained orchestrator checkpoints. Importing this module registers their config kinds
(``tools_model``, ``orchestrator``) so ``podium eval --system`` accepts them.

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

Each item's question is sent with the answer-format instruction of its verifier appended (the model-only
baselines give the same text as their system prompt). It goes into the task rather than the system prompt
because the runtime hands the task, not the system prompt, to the roles and to the parallel policy's summarizer,
which write answers too. The final answer is then extracted for the verifier exactly as the baselines do (the
raw answer stays in ``metadata["raw_answer"]``). Tool-use (tau2) items run as a conversation with a simulated
user through :func:`podium.envs.conversation.run_task`; the environment verifier replays the recorded calls.
"""

from dataclasses import dataclass, field
from typing import Literal

from pydantic import Field

from podium.core.answers import ANSWER_INSTRUCTIONS, VerifierKind, extract_answer
from podium.core.budget import StopReason
from podium.core.preference import Preference
from podium.core.trajectory import Trajectory
from podium.datasets.items import BenchmarkItem
from podium.envs.conversation import CONVERSATION_POLICIES, UserSimulatorConfig, run_task
from podium.envs.domain import load_domain
from podium.errors import ConfigError, PodiumError
from podium.evaluate.system_config import SystemConfig, register_system
from podium.pool.config import BasicTool
from podium.pool.pool import Pool, build_pool
from podium.runtime import Executor, RunConfig
from podium.runtime.checks import require_runnable
from podium.runtime.system import SystemSpec, default_name, orchestrator_model


class SystemRunError(PodiumError):
    """The runtime could not finish an attempt for infrastructure reasons (the orchestrator's backend failed)."""


class RuntimeSystemConfig(SystemConfig, SystemSpec):
    """A system on the orchestrator runtime (:class:`~podium.runtime.system.SystemSpec`: a pool and every field
    of the run config, as ``podium serve`` reads it) and the simulated user."""

    user: UserSimulatorConfig = Field(default_factory=UserSimulatorConfig)
    """The simulated user of tool-use (tau2) items."""


class OrchestratorConfig(RuntimeSystemConfig):
    """A prompted (or trained) orchestrator over the whole pool, under any policy."""

    kind: Literal["orchestrator"] = "orchestrator"
    """Selects this system."""


class ToolsModelConfig(RuntimeSystemConfig):
    """One model with the basic tools only: no roles, no other workers, not itself as a tool."""

    kind: Literal["tools_model"] = "tools_model"
    """Selects this system."""
    tools: list[BasicTool] | None = None
    """The basic tools it may call; default: those of the pool."""


def question_with_format(item: BenchmarkItem) -> str:
    """The item's question followed by the answer format its verifier expects."""
    return f"{item.question}\n\n{ANSWER_INSTRUCTIONS[item.verifier]}"


@dataclass
class RuntimeSystem:
    """Solves items with :meth:`Executor.run` over a pool; tool-use items converse with a simulated user."""

    name: str
    pool: Pool
    config: RunConfig
    user: UserSimulatorConfig = field(default_factory=UserSimulatorConfig)

    def __post_init__(self) -> None:
        # A system that cannot produce an action fails now; allow/deny names are checked per episode, once the
        # episode's tools (a domain's functions) are known.
        require_runnable(self.pool, self.config, f"system '{self.name}'")
        if self.user.worker is not None and self.user.worker not in self.pool.backends:
            raise ConfigError(
                f"user.worker: '{self.user.worker}' is not a worker of the pool {sorted(self.pool.backends)}"
            )

    def executor(self) -> Executor:
        """A fresh executor over the pool (episodes never share state)."""
        return Executor(self.pool, self.config)

    def supports(self, verifier: VerifierKind) -> bool:
        return verifier != "environment" or self.config.policy in CONVERSATION_POLICIES

    def cost_bound(self, item: BenchmarkItem) -> float | None:
        """The episode's own USD cap (its ledger never crosses it); 0 over a pool where nothing has a price."""
        if self.config.max_usd is not None:
            return self.config.max_usd
        return 0.0 if self.pool.is_free() else None

    async def solve(self, item: BenchmarkItem) -> Trajectory:
        if item.verifier == "environment":
            trajectory = await self._converse(item)
        else:
            preference = item.metadata.get("preference")  # set by `podium eval --preferences`
            trajectory = await self.executor().run(
                question_with_format(item),
                preference=None if preference is None else Preference.model_validate(preference),
                metadata={"item_id": item.id},
            )
            raw = trajectory.answer
            trajectory.answer = None if raw is None else extract_answer(raw, item.verifier)
            trajectory.metadata["raw_answer"] = raw
        if trajectory.stop_reason is StopReason.ERROR:
            raise SystemRunError(f"item {item.id}: {trajectory.metadata.get('error', 'the orchestrator failed')}")
        return trajectory

    async def _converse(self, item: BenchmarkItem) -> Trajectory:
        domain = load_domain(item.metadata["domain"], item.metadata.get("tau2_dir"))
        episode = await run_task(
            self.pool,
            self.config,
            domain,
            domain.task(str(item.gold)),
            user=self.user,
            guidance=ANSWER_INSTRUCTIONS["environment"],
            metadata={"item_id": item.id},
        )
        return episode.trajectory


def build_orchestrator(config: OrchestratorConfig) -> RuntimeSystem:
    """The prompted orchestrator over the full pool (or a trained one: a ``local`` worker with a ``path``)."""
    chosen = config.pool_config()
    settings = config.run_config()
    return RuntimeSystem(config.name or default_name(chosen, settings), build_pool(chosen), settings, config.user)


def build_tools_model(config: ToolsModelConfig) -> RuntimeSystem:
    """One worker of the pool as the orchestrator, with only the basic tools visible."""
    full = config.pool_config()
    settings = config.run_config()
    model = orchestrator_model(full, settings)
    kept = {settings.orchestrator or full.workers[0].name, config.user.worker}  # the user is no tool either
    workers = [worker for worker in full.workers if worker.name in kept]
    tools = list(config.tools if config.tools is not None else full.tools)
    restricted = full.model_copy(
        update={"workers": workers, "tools": tools, "roles": [], "role_worker": None, "workers_as_tools": False}
    )
    # The allow list hides the workers' rows in the pool table: they are the caller and the user, not tools.
    settings = settings.model_copy(update={"allow": tools if settings.allow is None else settings.allow})
    return RuntimeSystem(config.name or f"tools_model:{model}", build_pool(restricted), settings, config.user)


register_system("orchestrator", OrchestratorConfig, build_orchestrator)
register_system("tools_model", ToolsModelConfig, build_tools_model)

"""A tau2 task through the orchestrator runtime: the domain's tools join the pool for the episode, its policy joins
the system prompt, and every final answer goes to a simulated user whose reply continues the episode (SPEC §6).

The conversation starts as tau2's does: a fixed greeting to the user, whose first message becomes the task. The
episode ends when the user says its stop token, the user's turn limit is reached, or the run's budget runs out.
Only a policy that converses fits (:attr:`~podium.policies.Policy.converses`: the serial policy): its answers go to
the user, and it can call any tool. The parallel policy's ``final_answer`` ends the episode without a reply, and the
DAG policy delegates only to workers, never to tools.
"""

from dataclasses import dataclass
from typing import Any

from pydantic import NonNegativeFloat, PositiveInt

from podium.backends.base import ChatBackend
from podium.config import Config
from podium.core.trajectory import Trajectory
from podium.envs.domain import Domain, Environment
from podium.envs.transcript import DIALOGUE_KEY, USER_STOPPED_KEY, now
from podium.envs.user_simulator import DEFAULT_GREETING, UserSimulator
from podium.errors import ConfigError
from podium.policies import conversing_policies
from podium.pool.pool import Pool
from podium.runtime import Executor, RunConfig

AGENT_GUIDE = """You are a customer-service agent of the {domain} domain. Your final answer is your message to the \
customer: it is sent to them, and their reply comes back as the next user message. Look up and change records only \
with the domain's tools, one call at a time, and follow the policy below.

# Policy
{policy}"""


class UserSimulatorConfig(Config):
    """The simulated user of tool-use tasks."""

    worker: str | None = None
    """Pool worker that plays the user; default: the orchestrator's own backend."""
    max_turns: PositiveInt = 30
    """Most user messages; the conversation ends after the last one."""
    max_tokens: PositiveInt = 256
    """Completion budget of one user message."""
    temperature: NonNegativeFloat = 0.0
    """Sampling temperature of the user."""


@dataclass
class TaskEpisode:
    """One task played to the end: the trajectory, the live environment it changed, and the user's side."""

    trajectory: Trajectory
    environment: Environment
    user: UserSimulator


def agent_instructions(domain: Domain, guidance: str | None = None) -> str:
    """What the orchestrator is told about its role in the domain: ``guidance``, then the conversation rules and
    the domain policy."""
    guide = AGENT_GUIDE.format(domain=domain.name, policy=domain.policy.strip())
    return f"{guidance}\n\n{guide}" if guidance else guide


def task_run_config(config: RunConfig, environment: Environment) -> RunConfig:
    """``config`` for an episode in ``environment``: an allow list, when there is one, also admits the domain's
    tools, and no summarizer writes an answer when the turns run out (the user would never read it, yet it would
    count as said to them). Refuses policies that cannot converse."""
    if not config.policy.policy_class.converses:
        raise ConfigError(
            f"policy '{config.policy.name}' cannot play tool-use tasks: only {sorted(conversing_policies())} sends "
            "each answer to the user and calls the domain's tools"
        )
    update: dict[str, object] = {"summarize_on_stop": False}
    if config.allow is not None:
        update["allow"] = [*config.allow, *(name for name in environment.kinds if name not in config.allow)]
    return config.model_copy(update=update)


def episode_record(simulator: UserSimulator, environment: Environment) -> dict[str, object]:
    """What a finished episode adds to its trajectory's metadata: the conversation as the user saw it (written
    from the agent's side: the simulator's chat has the agent as its "user"), whether the user stopped it, the
    user's turns and spend, and the live database."""
    dialogue = [
        {"role": "assistant" if message.role == "user" else "user", "content": message.content}
        for message in simulator.history[1:]
    ]
    return {
        DIALOGUE_KEY: dialogue,
        USER_STOPPED_KEY: simulator.stopped,
        "user_turns": simulator.turns,
        "user_done": simulator.done,
        "user_usage": simulator.usage.model_dump(),
        "env_db_hash": environment.db_hash(),
        "env_actions": len(environment.log),
    }


def user_backend(pool: Pool, executor: Executor, settings: UserSimulatorConfig) -> ChatBackend:
    """The backend that plays the user: a named pool worker, else the orchestrator's."""
    if settings.worker is None:
        return executor.orchestrator
    if settings.worker not in pool.backends:
        raise ConfigError(f"user.worker: '{settings.worker}' is not a worker of the pool ({sorted(pool.backends)})")
    return pool.backends[settings.worker]


async def run_task(
    pool: Pool,
    config: RunConfig,
    domain: Domain,
    task: Any,
    *,
    user: UserSimulatorConfig | None = None,
    orchestrator: ChatBackend | None = None,
    guidance: str | None = None,
    metadata: dict[str, object] | None = None,
    seed: int | None = None,
) -> TaskEpisode:
    """Play ``task`` (a tau2 task of ``domain``) with the orchestrator of ``pool`` against a simulated user, in a
    fresh environment; ``seed`` draws the episode's blind labels (:meth:`Executor.run`).

    The trajectory's calls include every domain call that ran (the environment verifier replays them); its
    metadata records the domain, the task, the conversation as the user saw it (``tau2_dialogue``), whether the
    user stopped it, the user's turns and spend, the start and end times, and the live database's hash.
    Raises :class:`~podium.backends.base.BackendError` when the user's model fails.
    """
    settings = user or UserSimulatorConfig()
    started = now()
    environment = domain.environment(task)
    executor = Executor(pool, task_run_config(config, environment), orchestrator=orchestrator)
    backend = user_backend(pool, executor, settings)
    simulator = UserSimulator(
        backend,
        task.user_scenario,
        max_turns=settings.max_turns,
        max_tokens=settings.max_tokens,
        temperature=settings.temperature,
    )
    opening = (await simulator.respond(DEFAULT_GREETING)).text

    async def respond(answer: str) -> str | None:
        if simulator.done:
            return None
        reply = await simulator.respond(answer)
        return None if reply.done else reply.text

    trajectory = await executor.run(
        opening,
        tools=[item.tool for item in environment.tools()],
        instructions=agent_instructions(domain, guidance),
        respond=respond,
        seed=seed,
        metadata={"domain": domain.name, "task_id": task.id, **(metadata or {})},
    )
    trajectory.metadata.update(
        episode_record(simulator, environment), user_model=backend.model, started_at=started, ended_at=now()
    )
    return TaskEpisode(trajectory, environment, simulator)

"""One way to solve an item: :meth:`System.solve`, which evaluation, data collection, GRPO rollouts and serving
all call.

A :class:`System` is an orchestrator over a pool, built once from a :class:`~podium.solve.config.SystemConfig`;
every episode gets a fresh :class:`~podium.runtime.Executor`, so episodes never share state. What it solves is
either a benchmark item or a question as written:

* a tool-use (tau2) item is a conversation with the simulated user (:func:`podium.envs.conversation.run_task`);
* any other item is sent with the answer-format instruction of its verifier appended, and its final answer is
  extracted for the verifier as the model-only baselines do (the raw answer stays in ``metadata["raw_answer"]``
  when extraction changed it).
  The instruction goes into the task rather than the system prompt because the runtime hands the task, not the
  system prompt, to the roles and to the parallel policy's summarizer, which write answers too;
* a question as written (a served chat, an RL task) is sent unchanged, and its answer kept as written.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from podium.backends.base import ChatBackend
from podium.backends.factory import build_backend
from podium.core.answers import ANSWER_INSTRUCTIONS, VerifierKind, extract_answer
from podium.core.messages import Message
from podium.core.preference import Preference
from podium.core.progress import OnEvent
from podium.core.trajectory import Trajectory
from podium.costs.ledger import RunCap
from podium.datasets.items import BenchmarkItem
from podium.envs.conversation import UserSimulatorConfig, run_task
from podium.envs.domain import load_domain
from podium.errors import ConfigError
from podium.pool.config import WorkerConfig
from podium.pool.pool import Pool, build_pool, pool_catalog
from podium.pool.tool import Tool
from podium.runtime import Executor, RunConfig
from podium.runtime.checks import Problem, require_runnable, worker_file_problems
from podium.runtime.episode import NextChoice
from podium.runtime.explore import explore
from podium.solve.config import SystemConfig, default_name
from podium.solve.version import system_version


@dataclass(frozen=True)
class Chat:
    """What a served conversation adds to its episode: the client's tools, the earlier turns, the text of its
    system messages, who follows the episode's steps, the API key's allowance its steps draw on, what each next
    action may be (the client's ``tool_choice``) and the JSON schema of the answer (its ``response_format``)."""

    tools: Sequence[Tool] = ()
    history: Sequence[Message] = ()
    instructions: str | None = None
    on_event: OnEvent | None = None
    allowance: RunCap | None = None
    tool_choice: NextChoice | None = None
    answer_schema: dict[str, Any] | None = None


def question_with_format(item: BenchmarkItem) -> str:
    """The item's question followed by the answer format its verifier expects."""
    return f"{item.question}\n\n{ANSWER_INSTRUCTIONS[item.verifier]}"


def sample_seed(base: int, item_id: str, sample: int) -> int:
    """A seed per (item, sample) that does not depend on Python's string hashing."""
    return (base * 1_000_003 + sum(ord(char) * 31**i for i, char in enumerate(item_id[:32])) + sample) % 2**31


def item_preference(item: BenchmarkItem) -> Preference | None:
    """An item's own preference (``podium eval --preferences``, RL tasks), when its metadata carries one."""
    raw = item.metadata.get("preference")
    return None if raw is None else Preference.model_validate(raw)


class System:
    """An orchestrator over a pool (built once), its run config, the simulated user of tool-use items and the
    text its system prompt adds."""

    def __init__(
        self,
        name: str,
        pool: Pool,
        config: RunConfig,
        *,
        user: UserSimulatorConfig | None = None,
        instructions: str | None = None,
        orchestrator: ChatBackend | None = None,
        version: str | None = None,
    ) -> None:
        self.name = name
        self.pool = pool
        self.config = config
        self.user = user or UserSimulatorConfig()
        self.instructions = instructions
        self.orchestrator = orchestrator
        """The orchestrator when it is not one of the pool's workers (a worker of its own, a fitted router)."""
        self.version = version or self.content_version()
        """A content hash of what decides its episodes (:mod:`podium.solve.version`): recorded with every episode
        it plays with its own orchestrator and pool, shown by ``podium serve``."""

    def content_version(self, orchestrator: WorkerConfig | None = None, extra: Sequence[Any] = ()) -> str:
        """The version of this system: its run settings, pool, prices, simulated user and instructions, the
        ``orchestrator`` worker of its own and ``extra`` parts (a fitted router's data)."""
        parts = [self.user.model_dump(mode="json"), self.instructions, *extra]
        return system_version(self.config, self.pool.config, self.pool.prices, orchestrator=orchestrator, extra=parts)

    @property
    def model(self) -> str:
        """The model of the worker that plays the orchestrator."""
        return self.executor().orchestrator.model

    @classmethod
    def build(
        cls,
        config: SystemConfig,
        *,
        pool: Pool | None = None,
        source: str | None = None,
        orchestrator: ChatBackend | None = None,
        version_parts: Sequence[Any] = (),
        orchestrator_per_episode: bool = False,
    ) -> "System":
        """The system ``config`` describes (over ``pool`` when it was built already from ``config``'s pool, which
        is then not resolved again; with ``orchestrator`` as its own when given: a fitted router, whose data
        ``version_parts`` add to the version), refused when it cannot produce an action
        (:func:`~podium.runtime.checks.require_runnable`, naming ``source``). With ``orchestrator_per_episode`` the
        orchestrator arrives with each episode (verl binds each rollout to its own server session): there is none to
        check yet (``podium train grpo`` checks a stand-in of the trained model before it starts)."""
        chosen = config.pool_config() if pool is None else pool.config
        name = config.name or default_name(chosen, config)
        built = pool or build_pool(chosen)
        own = config.own_orchestrator()
        if orchestrator is None and own is not None:
            orchestrator = build_backend(own.backend, pool_catalog(chosen))
        system = cls(name, built, config.run_config(), user=config.user, instructions=config.instructions,
                     orchestrator=orchestrator, version="unversioned")  # fmt: skip
        system.version = system.content_version(own, version_parts)
        if not orchestrator_per_episode:
            missing = worker_file_problems(own, "orchestrator") if own is not None else []
            system.check(source or f"system '{name}'", missing)
        return system

    def check(self, source: str, known: Sequence[Problem] = ()) -> None:
        """Refuse a system that cannot produce an action (the ``known`` problems first: files its own
        orchestrator loads), and a user simulator that is not in the pool. Allow and deny names are checked per
        episode, once its tools (a domain's functions) are known."""
        require_runnable(self.pool, self.config, source, self.orchestrator, known)
        if self.user.worker is not None and self.user.worker not in self.pool.backends:
            raise ConfigError(
                f"user.worker: '{self.user.worker}' is not a worker of the pool {sorted(self.pool.backends)}"
            )

    def executor(
        self, config: RunConfig | None = None, *, pool: Pool | None = None, orchestrator: ChatBackend | None = None
    ) -> Executor:
        """A fresh executor (episodes never share state) under ``config``, over ``pool``, with ``orchestrator``
        in place of the system's, each when given."""
        return Executor(pool or self.pool, config or self.config, orchestrator=orchestrator or self.orchestrator)

    def episode_seed(self, item_id: str, sample: int) -> int | None:
        """The seed of what sample ``sample`` of an item draws afresh (a blind pool's labels), from the pool's
        ``blind.seed``, so that a run is reproducible and a resumed one draws the same; ``None`` when the pool
        draws nothing per episode."""
        blind = self.pool.config.blind
        return sample_seed(blind.seed, item_id, sample) if blind.enabled else None

    def supports(self, verifier: VerifierKind) -> bool:
        """Whether items of ``verifier`` can be attempted: tool-use items need a policy that converses."""
        return verifier != "environment" or self.config.policy.policy_class.converses

    def cost_bound(self, item: BenchmarkItem | None = None) -> float | None:
        """The most one episode can cost, the same for every item: its own USD cap (its ledger never crosses
        it), 0 over a pool where nothing has a price, else unknown (``None``)."""
        if self.config.max_episode_usd is not None:
            return self.config.max_episode_usd
        return 0.0 if self.pool.is_free() else None

    async def solve(
        self,
        task: BenchmarkItem | str,
        *,
        seed: int | None = None,
        temperature: float | None = None,
        preference: Preference | None = None,
        settings: RunConfig | None = None,
        pool: Pool | None = None,
        orchestrator: ChatBackend | None = None,
        chat: Chat | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Trajectory:
        """One episode on ``task``: an item (its own preference applies unless ``preference`` is given) or a
        question as written. ``seed`` draws the episode's blind labels; ``temperature``, ``settings``,
        ``pool`` and ``orchestrator`` replace the system's own for this episode (a sampled attempt, a served
        request's limits, a rollout instance's prices, the policy being trained); ``chat`` is what a served
        conversation adds. A failing simulated user raises :class:`~podium.backends.base.BackendError`."""
        config = settings or self.config
        if temperature is not None:
            config = config.model_copy(update={"temperature": temperature})
        if pool is None and orchestrator is None:  # the system's own episode (a rollout's policy is another)
            metadata = {"system_version": self.version, **(metadata or {})}
        if isinstance(task, BenchmarkItem):
            metadata = {"item_id": task.id, **(metadata or {})}
            if task.verifier == "environment":
                if chat is not None:
                    raise ConfigError(f"item {task.id}: a tool-use item converses with the simulated user, not a chat")
                return await self._converse(
                    task, config, pool or self.pool, orchestrator or self.orchestrator, metadata, seed
                )
            preference = preference if preference is not None else item_preference(task)
        chat = chat or Chat()
        trajectory = await self.executor(config, pool=pool, orchestrator=orchestrator).run(
            task if isinstance(task, str) else question_with_format(task),
            preference=preference,
            seed=seed,
            tools=chat.tools,
            instructions="\n\n".join(filter(None, [self.instructions, chat.instructions])) or None,
            history=chat.history,
            metadata=metadata,
            on_event=chat.on_event,
            allowance=chat.allowance,
            tool_choice=chat.tool_choice,
            answer_schema=chat.answer_schema,
        )
        if isinstance(task, BenchmarkItem):
            raw = trajectory.answer
            trajectory.answer = None if raw is None else extract_answer(raw, task.verifier)
            if raw != trajectory.answer:  # each text once per record
                trajectory.metadata["raw_answer"] = raw
        return trajectory

    async def explore(
        self, task: BenchmarkItem | str, *, settings: RunConfig | None = None, scorer: ChatBackend | None = None,
        **episode: Any,
    ) -> list[Trajectory]:  # fmt: skip
        """Every path of the task's action tree, each played once through :meth:`solve` with the ``episode``
        arguments (:mod:`podium.runtime.explore`); with ``scorer`` each turn records its probability of every
        choice."""
        if isinstance(task, BenchmarkItem) and task.verifier == "environment":
            raise ConfigError(f"item {task.id}: tool-use episodes cannot be explored path by path")
        config = settings or self.config
        problem = config.policy.unexplorable()
        if problem is not None:
            raise ConfigError(problem)
        # a path follower offers the policy's choices, not free text
        constrained = config.model_copy(update={"constrained": "always"})

        async def play(backend: ChatBackend) -> Trajectory:
            return await self.solve(task, settings=constrained, orchestrator=backend, **episode)

        return await explore(play, scorer)

    async def _converse(
        self,
        item: BenchmarkItem,
        config: RunConfig,
        pool: Pool,
        orchestrator: ChatBackend | None,
        metadata: dict[str, Any],
        seed: int | None,
    ) -> Trajectory:
        """A tool-use item as a conversation with the simulated user, in a fresh environment of its domain."""
        domain = load_domain(item.metadata["domain"], item.metadata.get("tau2_dir"))
        episode = await run_task(
            pool,
            config,
            domain,
            domain.task(str(item.gold)),
            user=self.user,
            orchestrator=orchestrator,
            guidance="\n\n".join(filter(None, [ANSWER_INSTRUCTIONS["environment"], self.instructions])),
            metadata=metadata,
            seed=seed,
        )
        return episode.trajectory

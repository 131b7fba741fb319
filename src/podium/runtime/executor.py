"""The one executor: it runs an orchestrator over a pool under a policy and returns the trajectory. Inference
(``podium run``), evaluation and RL rollouts all call :meth:`Executor.run`."""

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from podium.backends.base import ChatBackend
from podium.backends.grammar import BudgetTooSmall
from podium.core.budget import Budget
from podium.core.messages import Message
from podium.core.preference import Preference
from podium.core.progress import OnEvent
from podium.core.trajectory import Trajectory
from podium.costs.ledger import RunCap
from podium.errors import ConfigError, MissingExtraError
from podium.policies import Policy, PolicySetup, PoolView, Toolset
from podium.pool.pool import Pool
from podium.pool.registry import ToolRegistry
from podium.pool.resources import Attachment, checked_attachments
from podium.pool.tool import Tool
from podium.runtime.config import RunConfig
from podium.runtime.episode import Episode, NextChoice, Respond


class Executor:
    """Runs episodes of one orchestrator over one pool."""

    def __init__(
        self,
        pool: Pool,
        config: RunConfig | None = None,
        *,
        orchestrator: ChatBackend | None = None,
        policy: Policy | None = None,
    ) -> None:
        self.pool = pool
        self.config = config or RunConfig()
        self.policy = policy or self.config.policy.build()
        problem = self.config.sampling_problem()
        if problem is not None:
            raise ConfigError(problem)
        names = [worker.name for worker in pool.config.workers]
        for field, value in (("orchestrator", self.config.orchestrator), ("summarizer", self.config.summarizer)):
            if value is not None and value not in names:
                raise ConfigError(f"{field}: '{value}' is not a worker of the pool (workers: {names})")
        self.orchestrator = orchestrator or pool.backends[self.config.orchestrator or names[0]]
        self._check_policy_settings(names)
        self.budget = Budget(
            max_turns=self.config.max_turns or self.policy.max_turns,
            max_calls_per_round=min(
                self.config.max_calls_per_round or self.policy.max_calls_per_round, self.policy.max_calls_per_round
            ),
            max_tokens=self.config.max_total_tokens,
            max_usd=self.config.max_episode_usd,
            max_seconds=self.config.max_seconds,
        )

    def _check_policy_settings(self, workers: list[str]) -> None:
        """The policy's own settings, checked against this pool and orchestrator."""
        mode = self.config.constrained
        setup = PolicySetup(
            tools=self.pool.registry.names(),
            workers=workers,
            blind=self.pool.config.blind.enabled,
            orchestrator=self.orchestrator.model,
            scores_choices=mode != "never" and self.orchestrator.supports_choices,
            constrained=mode,
        )
        try:
            self.config.policy.check(setup)
        except ValueError as error:  # a setting of the policy: its field is under policy
            raise ConfigError(f"policy.{error}") from error

    async def run(
        self,
        question: str,
        *,
        preference: Preference | None = None,
        seed: int | None = None,
        tools: Sequence[Tool] = (),
        instructions: str | None = None,
        respond: Respond | None = None,
        metadata: dict[str, Any] | None = None,
        on_event: OnEvent | None = None,
        attachments: Sequence[Attachment] = (),
        history: Sequence[Message] = (),
        allowance: RunCap | None = None,
        tool_choice: NextChoice | None = None,
        answer_schema: dict[str, Any] | None = None,
    ) -> Trajectory:
        """One episode on ``question``. ``seed`` resamples blind labels; ``tools`` adds episode tools (an
        environment's functions); ``instructions`` (a domain policy) joins the system prompt; with ``respond`` an
        answer goes to a conversation partner and the episode goes on until it ends the conversation; ``on_event``
        follows each step and the generation (live displays); ``attachments`` are files its primitives may read
        besides the pool's; ``history`` holds a conversation's earlier turns, shown before the question within
        ``max_history_tokens``, the newest first; ``allowance`` is a USD cap shared with other episodes (a served
        key's day) that each step draws on; ``tool_choice`` says before each turn what the next action may be (a
        policy that calls no tools by name cannot honour one); ``answer_schema`` is the answer's JSON schema, decoded
        under it where the orchestrator writes the answer under a grammar."""
        attached = checked_attachments(attachments, Path.cwd())
        pool = self.pool.relabelled(seed) if seed is not None else self.pool
        view, registry = self.view(pool, tools)
        view = self._shaped(view, answer_schema)
        system = self.policy.system_prompt(view)
        if instructions:
            system = f"{system}\n\n{instructions}"
        shown = fit_history(history, self.orchestrator, self.config.max_history_tokens)
        provenance = {
            **self._provenance(pool, seed, attached),
            **({"history": {"messages": len(history), "shown": len(shown)}} if history else {}),
            **(metadata or {}),
        }
        episode = Episode(
            question=question,
            preference=preference,
            orchestrator=self.orchestrator,
            policy=self.policy,
            view=view,
            toolsets=self._toolsets(pool, registry, answer_schema),
            attachments=attached,
            config=self.config,
            budget=self.budget,
            constrained=self._constrained(view),
            respond=respond,
            metadata=provenance,
            on_event=on_event,
            allowance=allowance,
            tool_choice=tool_choice,
        )
        return await episode.play(system, shown)

    def _shaped(self, view: PoolView, answer_schema: dict[str, Any] | None) -> PoolView:
        """``view`` with the answer's schema, where the policy's grammar can take it (a schema it cannot build, or
        one too large for the turn's budget, leaves the answer free: it is checked afterwards)."""
        shaped = replace(view, answer_schema=answer_schema)
        if answer_schema is None or not self.orchestrator.supports_regex or self.config.constrained == "never":
            return shaped
        try:
            self.policy.grammar(shaped, max_tokens=self.config.max_tokens)
        except (MissingExtraError, ValueError):
            return view
        return shaped

    def _provenance(self, pool: Pool, seed: int | None, attached: Sequence[Attachment]) -> dict[str, Any]:
        """What a trajectory records of how its episode was set up."""
        return {
            "policy": self.policy.name,
            "orchestrator": self.orchestrator.model,
            "labels": dict(pool.labels),
            **({"seed": seed} if seed is not None else {}),
            **self.config.policy.recorded(),
            **({"attachments": [a.name for a in attached]} if attached else {}),
        }

    def view(
        self, pool: Pool | None = None, tools: Sequence[Tool] = (), *, strict: bool = True
    ) -> tuple[PoolView, ToolRegistry]:
        """What the orchestrator sees of ``pool`` (default: this executor's) with ``tools`` added, after the
        allow/deny lists, and the registry of the tools it may call. ``strict``: a name on the lists that is not in
        the pool is an error (not strict: it is passed over, as an episode's own tools may be what it names)."""
        pool = pool or self.pool
        registry, workers = self._visible(pool, tools, strict=strict)
        view = PoolView(
            tools=registry.specs(),
            table=pool.table(registry, workers),
            workers=workers,
            admissible=frozenset(pair for pair in pool.admissible_pairs() if pair[0] in workers),
        )
        return view, registry

    def _visible(self, pool: Pool, extra: Sequence[Tool], *, strict: bool = True) -> tuple[ToolRegistry, list[str]]:
        """The registry and worker labels the allow/deny lists leave, with the episode's tools added."""
        registry = ToolRegistry(
            [*(pool.registry.get(name) for name in pool.registry.names()), *extra],
            prices=pool.prices,
            max_observation_chars=pool.registry.max_observation_chars,
        )
        by_name = dict(pool.labels)
        known = set(registry.names()) | set(by_name) | set(pool.labels.values())
        for field, names in (("allow", self.config.allow or []), ("deny", self.config.deny)):
            unknown = sorted(set(names) - known)
            if unknown and strict:
                raise ConfigError(f"{field}: unknown names {unknown}; the pool has {sorted(known)}")
        allow = None if self.config.allow is None else {by_name.get(n, n) for n in self.config.allow}
        deny = {by_name.get(name, name) for name in self.config.deny}

        def shown(name: str) -> bool:
            return (allow is None or name in allow) and name not in deny

        kept = registry.subset([name for name in registry.names() if shown(name)])
        return kept, [label for label in pool.labels.values() if shown(label)]

    def _toolsets(
        self, pool: Pool, registry: ToolRegistry, answer_schema: dict[str, Any] | None = None
    ) -> dict[Toolset, ToolRegistry]:
        """What an episode's calls run on: the tools it offers, the pool's summarizer (writing JSON of
        ``answer_schema`` when given), the primitive tools."""
        summarizer = pool.summarizer(self.config.summarizer, self.config.summarizer_max_tokens, answer_schema)
        return {"tools": registry, "summarizer": summarizer, "primitives": pool.primitives}

    def _constrained(self, view: PoolView) -> bool:
        """Whether the orchestrator decodes under the policy's grammar (checked buildable here)."""
        mode = self.config.constrained
        if mode == "never":
            return False
        if not self.orchestrator.supports_regex:
            if mode == "always":
                raise ConfigError(
                    f"constrained: 'always', but the orchestrator backend '{self.orchestrator.model}' cannot "
                    "constrain its output (use a local model, or a vLLM worker with structured_outputs: vllm)"
                )
            return False
        try:
            return self.policy.grammar(view, max_tokens=self.config.max_tokens) is not None
        except BudgetTooSmall as error:
            raise ConfigError(f"{self.policy.name} policy: {error}; raise max_tokens") from error
        except (MissingExtraError, ValueError) as error:
            if mode == "always":
                raise ConfigError(
                    f"constrained: 'always', but the policy's grammar cannot be built: {error}"
                ) from error
            return False


def fit_history(history: Sequence[Message], orchestrator: ChatBackend, max_tokens: int) -> list[Message]:
    """The newest messages of ``history`` whose prompt tokens (on ``orchestrator``, each message counted with its
    chat-template overhead) fit ``max_tokens``, in order."""
    kept: list[Message] = []
    used = 0
    for message in reversed(history):
        used += orchestrator.prompt_token_bound([message])
        if used > max_tokens:
            break
        kept.append(message)
    return kept[::-1]

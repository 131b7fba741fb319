"""Scoring tau2 conversations: the official tau2 reward, and Podium's stricter verdict beside it.

**The tau2 reward** (``tau2_reward``) is tau2's own: its environment, action and communicate evaluators
(``tau2.evaluator``) run on the conversation as tau2 messages and are combined over the task's reward basis exactly
as tau2's ``evaluate_simulation`` does with ``EvaluationType.ALL``: the database after replaying the conversation's
calls must hash like the database after the gold actions (DB), every ``communicate_info`` item must appear in a
message the agent sent with text (COMMUNICATE, case-insensitive, commas stripped), and, where the basis names
ACTION, every gold action must have a matching call. Episodes that did not end by a stop (``user_stop`` or
``agent_stop``) get 0. Gold actions that fail by design are replayed as tau2 replays them (the failure is logged
and the replay goes on). Each of DB, COMMUNICATE and ACTION is reported, whether or not the basis counts it.
No LLM is called: a task whose basis needs natural-language assertions is refused, as tau2 refuses it.

**Podium's strict verdict** (``strict_solved``, SPEC §6.3) holds when the tau2 reward is 1 and all three criteria
hold: (1) execution correctness, the DB check above; (2) process fidelity, every ``communicate_info`` item was told
to the user, whatever the basis; (3) operation completeness, every database entry the gold actions name (a key of
a top-level table found among their argument values) is named by one of the conversation's calls too. It is never
looser than the tau2 reward, and not comparable with published tau2 numbers; report the tau2 reward for that.
"""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from podium.core.trajectory import Trajectory
from podium.envs.domain import ActionOutcome, Domain, DomainData, communicate_info, golden_actions, tau2_module
from podium.envs.transcript import TranscriptError, tau2_messages, termination_reason

Entry = tuple[str, str]
"""A database entry: (table, key)."""

STOPS = ("user_stop", "agent_stop")
"""Termination reasons tau2 rewards."""


@dataclass(frozen=True)
class Replay:
    """The result of running a list of actions on a fresh database."""

    outcomes: list[ActionOutcome]
    db_hash: str
    initial_hash: str

    @property
    def ok(self) -> bool:
        """Whether every action succeeded."""
        return all(outcome.ok for outcome in self.outcomes)

    @property
    def changed(self) -> bool:
        """Whether the database differs from where it started."""
        return self.db_hash != self.initial_hash

    @property
    def errors(self) -> list[str]:
        return [f"{outcome.name}: {outcome.error}" for outcome in self.outcomes if not outcome.ok]


class ReplayConfig(DomainData):
    """Which tasks of a domain ``podium env replay`` replays."""

    task: str | None = None
    """Only this task id; default: every task."""


def replay(domain: Domain, task: Any, actions: Iterable[Any]) -> Replay:
    """Run ``actions`` (anything with ``name`` and ``arguments``) in order on a fresh environment, as tau2 runs
    them; failures are recorded and the replay goes on."""
    environment = domain.environment(task)
    outcomes = [environment.call(item.name, dict(item.arguments or {})) for item in actions]
    return Replay(outcomes, environment.db_hash(), domain.initial_hash)


def named_entries(calls: Iterable[tuple[str, Any]], tables: dict[str, frozenset[str]]) -> set[Entry]:
    """The database entries that calls ``(name, arguments)`` name: every string among the argument values (at any
    depth) that is a key of a top-level table."""
    found: set[Entry] = set()

    def walk(value: Any) -> None:
        if isinstance(value, str):
            found.update((table, value) for table, keys in tables.items() if value in keys)
        elif isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    for _, arguments in calls:
        walk(arguments)
    return found


@dataclass(frozen=True)
class StrictVerdict:
    """Podium's three criteria (SPEC §6.3) for one conversation."""

    execution_correct: bool
    process_fidelity: bool
    operation_complete: bool
    missing_info: list[str] = field(default_factory=list)
    """communicate_info items never told to the user."""
    missing_entries: list[Entry] = field(default_factory=list)
    """Entries the gold actions name and the conversation's calls do not."""


@dataclass(frozen=True)
class Tau2Grade:
    """The official tau2 reward of one conversation, its parts, and Podium's strict verdict."""

    reward: float
    """tau2's reward (``evaluate_simulation``, EvaluationType.ALL)."""
    reward_basis: list[str]
    """The parts the reward multiplies (the task's reward basis)."""
    termination: str
    """tau2's termination reason."""
    db: float | None
    """DB: 1.0 when the database matches the gold replay (None: not evaluated, the records were unusable)."""
    communicate: float | None
    """COMMUNICATE: 1.0 when every communicate_info item was said."""
    action: float | None
    """ACTION: 1.0 when every gold action has a matching call."""
    strict: StrictVerdict
    reward_info: Any = field(repr=False, compare=False)
    """tau2's ``RewardInfo``, filled as ``evaluate_simulation`` fills it (what a results file stores)."""
    missed_actions: list[str] = field(default_factory=list)
    """Gold actions without a matching call (``name(arguments)``)."""
    note: str | None = None
    """Why the reward is what it is, when a rule decided it alone (premature end, no criteria)."""

    @property
    def strict_solved(self) -> bool:
        """Podium's strict verdict: the tau2 reward is 1 and the three criteria hold."""
        s = self.strict
        return self.reward == 1.0 and s.execution_correct and s.process_fidelity and s.operation_complete

    def summary(self) -> dict[str, Any]:
        """A JSON-ready record of the grade."""
        return {
            "tau2_reward": self.reward,
            "db": self.db,
            "communicate": self.communicate,
            "action": self.action,
            "reward_basis": self.reward_basis,
            "termination": self.termination,
            "note": self.note,
            "missing_info": self.strict.missing_info,
            "missed_actions": self.missed_actions,
            "strict_solved": self.strict_solved,
            "execution_correct": self.strict.execution_correct,
            "process_fidelity": self.strict.process_fidelity,
            "operation_complete": self.strict.operation_complete,
            "missing_entries": [f"{table}/{key}" for table, key in self.strict.missing_entries],
        }


def _combined(task: Any, checks: "_Checks") -> tuple[float, dict[Any, float]]:
    """tau2's combination of the evaluators' rewards over the task's basis, and the breakdown it reports
    (``evaluate_simulation``)."""
    kinds = tau2_module("tau2.data_model.tasks").RewardType
    basis = set(task.evaluation_criteria.reward_basis)
    if kinds.NL_ASSERTION in basis:
        raise ValueError(f"task {task.id}: its reward needs natural-language assertions (an LLM judge)")
    reward, breakdown = 1.0, {}
    parts = (
        (checks.env, {kinds.DB, kinds.ENV_ASSERTION}),
        (checks.action, {kinds.ACTION}),
        (checks.communicate, {kinds.COMMUNICATE}),
    )
    for part, bases in parts:
        if basis & bases:
            breakdown.update(part.reward_breakdown or {})
            reward *= part.reward
    return reward, breakdown


def _reward_info(task: Any, checks: "_Checks", reward: float, breakdown: dict[Any, float]) -> Any:
    """tau2's ``RewardInfo`` for a conversation that stopped, as ``evaluate_simulation`` fills it."""
    return tau2_module("tau2.data_model.simulation").RewardInfo(
        reward=reward,
        db_check=checks.env.db_check,
        env_assertions=checks.env.env_assertions,
        action_checks=checks.action.action_checks,
        nl_assertions=None,
        communicate_checks=checks.communicate.communicate_checks,
        reward_basis=task.evaluation_criteria.reward_basis,
        reward_breakdown=breakdown,
        info={"env": checks.env.info, "nl": None, "communicate": checks.communicate.info, "action": checks.action.info},
    )


def _calls(messages: Sequence[Any]) -> list[tuple[str, Any]]:
    return [
        (call.name, call.arguments)
        for message in messages
        if getattr(message, "tool_calls", None) and message.role in ("assistant", "user")
        for call in message.tool_calls
    ]


@dataclass(frozen=True)
class _Checks:
    """tau2's three evaluators' results on one conversation."""

    env: Any
    action: Any
    communicate: Any


def _checks(domain: Domain, task: Any, history: list[Any]) -> _Checks:
    env = tau2_module("tau2.evaluator.evaluator_env").EnvironmentEvaluator
    action = tau2_module("tau2.evaluator.evaluator_action").ActionEvaluator
    communicate = tau2_module("tau2.evaluator.evaluator_communicate").CommunicateEvaluator
    return _Checks(
        env.calculate_reward(
            environment_constructor=domain.tau2_environment, task=task, full_trajectory=history, solo_mode=False
        ),
        action.calculate_reward(task=task, full_trajectory=history),
        communicate.calculate_reward(task=task, full_trajectory=history),
    )


def _strict(domain: Domain, task: Any, history: list[Any], checks: _Checks | None) -> StrictVerdict:
    if checks is None:
        return StrictVerdict(False, False, False)
    tables = domain.table_keys
    missing_entries = named_entries(_actions(task), tables) - named_entries(_calls(history), tables)
    missing_info = [check.info for check in checks.communicate.communicate_checks or [] if not check.met]
    return StrictVerdict(
        execution_correct=checks.env.db_check is None or checks.env.db_check.db_match,
        process_fidelity=not missing_info,
        operation_complete=not missing_entries,
        missing_info=missing_info,
        missing_entries=sorted(missing_entries),
    )


def grade_messages(domain: Domain, task: Any, messages: Sequence[Any], termination: Any) -> Tau2Grade:
    """Grade a tau2 conversation of ``task`` (tau2 messages, from the greeting on) that ended with ``termination``.

    Raises ``ValueError`` when the conversation's tool responses are not what tau2's environment answers to its
    calls (tau2's own check), unless tau2 decides without reading them: a conversation that ended prematurely
    gets 0, and a task without criteria 1, whatever the records hold.
    """
    history = list(messages)
    stop = str(getattr(termination, "value", termination))
    simulation = tau2_module("tau2.data_model.simulation")
    checks: _Checks | None
    if stop not in STOPS or task.evaluation_criteria is None:
        # tau2 decides these without looking at the conversation; the parts are reported when they can be read.
        reward, note = (0.0, f"Simulation terminated prematurely. Termination reason: {stop}")
        if stop in STOPS:
            reward, note = 1.0, "No evaluation criteria"
        info = simulation.RewardInfo(reward=reward, reward_basis=None, info={"note": note})
        try:
            checks = _checks(domain, task, history)
        except ValueError:
            checks = None
    else:
        checks = _checks(domain, task, history)
        info = _reward_info(task, checks, *_combined(task, checks))
    return Tau2Grade(
        reward=info.reward,
        reward_info=info,
        reward_basis=[str(getattr(kind, "value", kind)) for kind in _basis(task)],
        termination=stop,
        db=_db(checks),
        communicate=None if checks is None else checks.communicate.reward,
        action=None if checks is None else checks.action.reward,
        strict=_strict(domain, task, history, checks),
        missed_actions=_missed(checks),
        note=(info.info or {}).get("note"),
    )


def _db(checks: _Checks | None) -> float | None:
    if checks is None:
        return None
    return checks.env.db_check.db_reward if checks.env.db_check is not None else checks.env.reward


def _missed(checks: _Checks | None) -> list[str]:
    if checks is None:
        return []
    return [f"{c.action.name}({c.action.arguments})" for c in checks.action.action_checks or [] if not c.action_match]


def _actions(task: Any) -> list[tuple[str, Any]]:
    return [(action.name, action.arguments) for action in golden_actions(task)]


def _basis(task: Any) -> list[Any]:
    return list(task.evaluation_criteria.reward_basis) if task.evaluation_criteria is not None else []


def grade_trajectory(domain: Domain, task: Any, trajectory: Trajectory) -> Tau2Grade:
    """Grade a Podium trajectory of ``task``: its conversation as tau2 messages (what the user saw, the domain
    calls that ran) and its termination reason (:mod:`podium.envs.transcript`)."""
    messages = tau2_messages(trajectory, domain.tool_kinds)
    try:
        return grade_messages(domain, task, messages, termination_reason(trajectory))
    except ValueError as error:
        raise TranscriptError(f"trajectory {trajectory.id}: {error}") from error


def gold_grade(domain: Domain, task: Any) -> Tau2Grade:
    """The grade of the conversation that performs the gold actions and then tells every communicate_info item."""
    return performed_grade(domain, task, golden_actions(task))


def performed_grade(domain: Domain, task: Any, actions: Sequence[Any]) -> Tau2Grade:
    """The grade of the conversation that performs ``actions`` (anything with ``name`` and ``arguments``) and then
    tells every communicate_info item: with no actions, whether a task is solved by talking alone."""
    message = tau2_module("tau2.data_model.message")
    environment = domain.environment(task)
    history: list[Any] = [message.UserMessage(role="user", content="Hello.")]
    for number, action in enumerate(actions):
        call = message.ToolCall(id=str(number), name=action.name, arguments=dict(action.arguments))
        history.append(message.AssistantMessage(role="assistant", tool_calls=[call]))
        history.append(environment.tau2.get_response(call))
    history.append(message.AssistantMessage(role="assistant", content="Done. " + "; ".join(communicate_info(task))))
    return grade_messages(domain, task, history, "user_stop")

"""The four action spaces on one executor: serial (ToolOrchestra), parallel rounds (ParaManager), DAG selective
delegation (Uno-Orchestra) and escalate (one word a turn: a worker answers, then the orchestrator accepts its reply
or escalates to another)."""

from collections.abc import Mapping
from typing import Literal

from podium.policies.base import (
    Action,
    ActionParseError,
    Answer,
    Calls,
    Dispatcher,
    InvalidCall,
    Outcome,
    Policy,
    PoolView,
    ToolChoice,
    Toolset,
    refused,
)
from podium.policies.dag import DagPolicy, Plan, Route, Subtask
from podium.policies.escalate import EscalationPolicy
from podium.policies.parallel import ParallelPolicy, Summarize
from podium.policies.serial import SerialPolicy

PolicyName = Literal["serial", "parallel", "dag", "escalate"]


def build_policy(
    name: PolicyName,
    *,
    lazy: bool = True,
    verify: str | None = None,
    reply_chars: int | None = None,
    escalate_above: float | Mapping[str, float] | None = None,
    prices_at_decision: bool = False,
) -> Policy:
    """The policy called ``name`` with the papers' defaults; ``lazy=False`` forces the DAG policy to decompose
    (Uno's forced-decomposition ablation) and is an error for the others, which have no direct-answer branch to
    remove; ``verify`` (the tool that checks each reply), ``reply_chars`` (how much of a reply is shown),
    ``escalate_above`` (the threshold that decides after a reply) and ``prices_at_decision`` (prices named after
    each reply) are the escalation policy's and an error for the others."""
    policies: dict[str, type[Policy]] = {
        "serial": SerialPolicy,
        "parallel": ParallelPolicy,
        "dag": DagPolicy,
        "escalate": EscalationPolicy,
    }
    if name not in policies:
        raise ValueError(f"unknown policy '{name}'; choose from {sorted(policies)}")
    escalation_options = {
        "verify": verify,
        "reply_chars": reply_chars,
        "escalate_above": escalate_above,
        "prices_at_decision": prices_at_decision or None,
    }
    for option, value in escalation_options.items():
        if value is not None and name != "escalate":
            raise ValueError(f"{option} applies to the escalate policy, not to '{name}'")
    if name == "escalate":
        return EscalationPolicy(
            verify=verify, reply_chars=reply_chars, escalate_above=escalate_above, prices_at_decision=prices_at_decision
        )
    if name == "dag":
        return DagPolicy(lazy=lazy)
    if not lazy:
        raise ValueError(f"lazy: false (forced decomposition) applies to the dag policy, not to '{name}'")
    return policies[name]()


__all__ = [
    "Action",
    "ActionParseError",
    "Answer",
    "Calls",
    "DagPolicy",
    "Dispatcher",
    "EscalationPolicy",
    "InvalidCall",
    "Outcome",
    "ParallelPolicy",
    "Plan",
    "Policy",
    "PolicyName",
    "PoolView",
    "Route",
    "SerialPolicy",
    "Subtask",
    "Summarize",
    "ToolChoice",
    "Toolset",
    "build_policy",
    "refused",
]

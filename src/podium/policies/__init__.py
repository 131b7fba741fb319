"""The three action spaces on one executor: serial (ToolOrchestra), parallel rounds (ParaManager) and DAG
selective delegation (Uno-Orchestra)."""

from typing import Literal

from podium.policies.base import (
    Action,
    ActionParseError,
    Answer,
    Calls,
    Dispatcher,
    InvalidCall,
    Outcome,
    Plan,
    Policy,
    PoolView,
    Route,
    Subtask,
    Summarize,
    refused,
)
from podium.policies.dag import DagPolicy
from podium.policies.parallel import ParallelPolicy
from podium.policies.route import RoutePolicy
from podium.policies.serial import SerialPolicy

PolicyName = Literal["serial", "parallel", "dag", "route"]


def build_policy(name: PolicyName) -> Policy:
    """The policy called ``name`` with the papers' defaults."""
    policies: dict[str, type[Policy]] = {
        "serial": SerialPolicy,
        "parallel": ParallelPolicy,
        "dag": DagPolicy,
        "route": RoutePolicy,
    }
    if name not in policies:
        raise ValueError(f"unknown policy '{name}'; choose from {sorted(policies)}")
    return policies[name]()


__all__ = [
    "Action",
    "ActionParseError",
    "Answer",
    "Calls",
    "DagPolicy",
    "Dispatcher",
    "InvalidCall",
    "Outcome",
    "ParallelPolicy",
    "Plan",
    "Policy",
    "PolicyName",
    "PoolView",
    "Route",
    "RoutePolicy",
    "SerialPolicy",
    "Subtask",
    "Summarize",
    "build_policy",
    "refused",
]

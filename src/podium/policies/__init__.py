"""The four action spaces on one executor: serial (ToolOrchestra), parallel rounds (ParaManager), DAG selective
delegation (Uno-Orchestra) and escalate (one word a turn: a worker answers, then the orchestrator accepts its reply
or escalates to another)."""

from typing import Annotated, Literal, Union

from pydantic import BeforeValidator, Field, TypeAdapter

from podium.config import Flag
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
from podium.policies.config import PolicyConfig, PolicySetup, policy_by_name
from podium.policies.dag import DagConfig, DagPolicy, Plan, Route, Subtask
from podium.policies.escalate import EscalateConfig, EscalationPolicy
from podium.policies.parallel import ParallelConfig, ParallelPolicy, Summarize
from podium.policies.serial import SerialConfig, SerialPolicy

POLICIES: tuple[type[PolicyConfig], ...] = (
    SerialConfig,
    ParallelConfig,
    DagConfig,
    EscalateConfig,
)
"""Every policy, by its config (a policy registers here, one line: its config names it and builds it)."""
POLICY_NAMES: tuple[str, ...] = tuple(config.model_fields["name"].default for config in POLICIES)
PolicyName = Literal[POLICY_NAMES]  # type: ignore[valid-type]
"""A policy's name."""
PolicySettings = Annotated[
    Union[POLICIES],  # type: ignore[valid-type]  # noqa: UP007 (a union of the registered configs)
    Field(discriminator="name"),
    BeforeValidator(lambda value: policy_by_name(value, POLICIES)),
    Flag(PolicyName),
]
"""A policy and its settings in a config: its name alone (its defaults), or a mapping of its name and settings."""


def build_policy(policy: str | PolicyConfig) -> Policy:
    """The policy ``policy`` names (with its defaults) or configures."""
    if isinstance(policy, str):
        policy = TypeAdapter(PolicySettings).validate_python(policy)
    return policy.build()


def conversing_policies() -> list[str]:
    """The policies whose episodes can hold a conversation with a user (their answers go to it)."""
    return [config.model_fields["name"].default for config in POLICIES if config.policy_class.converses]


__all__ = [
    "POLICIES",
    "POLICY_NAMES",
    "Action",
    "ActionParseError",
    "Answer",
    "Calls",
    "DagConfig",
    "DagPolicy",
    "Dispatcher",
    "EscalateConfig",
    "EscalationPolicy",
    "InvalidCall",
    "Outcome",
    "ParallelConfig",
    "ParallelPolicy",
    "Plan",
    "Policy",
    "PolicyConfig",
    "PolicyName",
    "PolicySettings",
    "PolicySetup",
    "PoolView",
    "Route",
    "SerialConfig",
    "SerialPolicy",
    "Subtask",
    "Summarize",
    "ToolChoice",
    "Toolset",
    "build_policy",
    "conversing_policies",
    "refused",
]

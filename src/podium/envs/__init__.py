"""Tool-use environments in tau2 format: domains, episodes, golden replays, solved criteria, simulated users."""

from podium.envs.domain import (
    Action,
    Domain,
    DomainTool,
    Environment,
    Task,
    UserScenario,
    data_dir,
    known_domains,
    load_domain,
    register_domain,
)
from podium.envs.toolkit import ActionKind, Database, ToolError, Toolkit, action

__all__ = [
    "Action",
    "ActionKind",
    "Database",
    "Domain",
    "DomainTool",
    "Environment",
    "Task",
    "ToolError",
    "Toolkit",
    "UserScenario",
    "action",
    "data_dir",
    "known_domains",
    "load_domain",
    "register_domain",
]

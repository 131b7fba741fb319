"""Tool-use environments in tau2 format on the official tau2 package: domains, episodes, transcripts, rewards,
simulated users."""

from podium.envs.domain import (
    ActionKind,
    Domain,
    DomainKit,
    DomainTool,
    Environment,
    communicate_info,
    data_dir,
    golden_actions,
    known_domains,
    load_domain,
    register_domain,
)

__all__ = [
    "ActionKind",
    "Domain",
    "DomainKit",
    "DomainTool",
    "Environment",
    "communicate_info",
    "data_dir",
    "golden_actions",
    "known_domains",
    "load_domain",
    "register_domain",
]

"""Core data types shared by every part of Podium."""

from podium.core.budget import Budget, Spend
from podium.core.calls import CallUsage, Refusal, Status, ToolCall, ToolResult, ToolSpec
from podium.core.messages import Message, Role
from podium.core.preference import Preference
from podium.core.trajectory import StopReason, Trajectory, Turn, read_trajectories, write_trajectories

__all__ = [
    "Budget",
    "CallUsage",
    "Message",
    "Preference",
    "Refusal",
    "Role",
    "Spend",
    "Status",
    "StopReason",
    "ToolCall",
    "ToolResult",
    "ToolSpec",
    "Trajectory",
    "Turn",
    "read_trajectories",
    "write_trajectories",
]

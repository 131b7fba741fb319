"""The pool: tools, the registry that runs calls, workers, agent roles and primitives."""

from podium.pool.registry import ToolRegistry
from podium.pool.tool import Tool, ToolOutput, tool

__all__ = ["Tool", "ToolOutput", "ToolRegistry", "tool"]

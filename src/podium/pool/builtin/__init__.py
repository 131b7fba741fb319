"""Podium's basic tools."""

from podium.costs.prices import PriceCatalog
from podium.pool.builtin.python_tool import python_tool
from podium.pool.builtin.symbolic_math import symbolic_math_tool
from podium.pool.registry import ToolRegistry
from podium.sandbox import Sandbox


def basic_tools(sandbox: Sandbox, prices: PriceCatalog | None = None) -> ToolRegistry:
    """A registry with the basic tools that need nothing but this machine: python and symbolic_math."""
    return ToolRegistry([python_tool(sandbox), symbolic_math_tool(sandbox)], prices=prices)


__all__ = ["basic_tools", "python_tool", "symbolic_math_tool"]

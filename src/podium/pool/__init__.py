"""The unified tool space: tools, the registry that runs calls, prices."""

from podium.pool.pricing import ModelPrice, PriceCatalog, ToolPrice
from podium.pool.registry import ToolRegistry
from podium.pool.tool import Tool, ToolOutput, tool

__all__ = ["ModelPrice", "PriceCatalog", "Tool", "ToolOutput", "ToolPrice", "ToolRegistry", "tool"]

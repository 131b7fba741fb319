"""Podium's basic tools."""

from podium.pool.builtin.arithmetic import check_arithmetic_tool
from podium.pool.builtin.python_tool import python_tool
from podium.pool.builtin.symbolic_math import symbolic_math_tool

__all__ = ["check_arithmetic_tool", "python_tool", "symbolic_math_tool"]

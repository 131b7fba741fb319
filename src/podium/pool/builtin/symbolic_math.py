"""The ``symbolic_math`` tool: sympy simplify / expand / factor / solve / diff / integrate / evaluate.

sympy parses by evaluating Python, and simplification can run for minutes, so each request runs in the
sandbox under its time limit.
"""

import json
from importlib.resources import files
from typing import Literal

from podium.core.calls import Status
from podium.pool.tool import Tool, ToolOutput, tool
from podium.sandbox import Sandbox

Operation = Literal["simplify", "expand", "factor", "solve", "diff", "integrate", "evaluate"]
TIMEOUT_GRACE_S = 5.0


def symbolic_math_tool(sandbox: Sandbox) -> Tool:
    """The ``symbolic_math`` tool running each request in ``sandbox``."""
    runner = (files("podium.pool.builtin") / "sympy_runner.py").read_text(encoding="utf-8")

    async def symbolic_math(
        operation: Operation,
        expression: str,
        variables: list[str] | None = None,
        substitutions: dict[str, str] | None = None,
        digits: int = 15,
    ) -> ToolOutput:
        """Computer algebra with sympy. Write expressions in Python/sympy syntax (x**2, sqrt(2), pi, E, sin);
        `^` means power and `2x` means 2*x. Write `a = b` for an equation and separate the equations of a
        system with `;`.

        Args:
            operation: simplify, expand, factor, solve (for `variables`, default: all symbols), diff or
                integrate (with respect to `variables`), or evaluate (numerically, after `substitutions`).
            expression: the expression or equation(s).
            variables: symbols to solve for, differentiate or integrate with respect to.
            substitutions: symbol → value, applied before a numerical evaluation.
            digits: significant digits of a numerical evaluation.
        """
        request = {
            "operation": operation,
            "expression": expression,
            "variables": variables,
            "substitutions": substitutions,
            "digits": digits,
        }
        run = await sandbox.run_python(runner, files={"request.json": json.dumps(request)})
        if run.status is Status.TIMEOUT:
            return ToolOutput(None, run.status, run.reason)
        if run.status is not Status.OK:
            error_lines = run.stderr.strip().splitlines()
            return ToolOutput(None, run.status, error_lines[-1] if error_lines else run.reason)
        result = json.loads(run.stdout.strip().splitlines()[-1])["result"]
        return ToolOutput(result, observation=result if isinstance(result, str) else json.dumps(result))

    return tool(symbolic_math, timeout_s=sandbox.config.wall_time_s + TIMEOUT_GRACE_S)

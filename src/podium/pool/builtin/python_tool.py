"""The ``python`` tool: model-written code in the sandbox, stdout and stderr returned verbatim."""

from podium.pool.tool import Tool, ToolOutput
from podium.sandbox import Sandbox, SandboxRun

# The registry's limit only backs up the sandbox's own wall-clock kill, which reports TIMEOUT itself.
TIMEOUT_GRACE_S = 5.0


def python_tool(sandbox: Sandbox) -> Tool:
    """The ``python`` tool running in ``sandbox``."""

    async def python(code: str) -> ToolOutput:
        run = await sandbox.run_python(code)
        return ToolOutput(
            value={"stdout": run.stdout, "stderr": run.stderr, "exit_code": run.exit_code},
            status=run.status,
            reason=run.reason,
            observation=render_run(run),
        )

    limits = sandbox.config
    return Tool.from_schema(
        "python",
        "Run a Python 3 program in an isolated sandbox and return its stdout and stderr verbatim. Print what "
        "you need to see (a final bare expression is printed too, as in a REPL). No network; only the current "
        f"directory is writable; limits: {limits.cpu_time_s:g} s "
        f"CPU, {limits.wall_time_s:g} s wall clock, {limits.memory_mb} MiB memory. numpy and sympy may be "
        "imported when installed.",
        {
            "type": "object",
            "properties": {"code": {"type": "string", "description": "A complete Python program."}},
            "required": ["code"],
            "additionalProperties": False,
        },
        python,
        timeout_s=limits.wall_time_s + TIMEOUT_GRACE_S,
    )


def render_run(run: SandboxRun) -> str:
    """What the orchestrator sees: stdout, then stderr under a marker, then the reason for failure."""
    parts = [run.stdout] if run.stdout else []
    if run.stderr:
        parts.append(f"[stderr]\n{run.stderr}")
    if run.reason:
        parts.append(f"[{run.reason}]")
    return "\n".join(parts) if parts else "[no output]"

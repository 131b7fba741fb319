"""``execute_python``, ``execute_shell`` and ``symbolic_math``: the worker writes a program, a POSIX shell script or
a sympy request, and it runs in the pool's sandbox (no network, read-only system, scratch space, CPU, memory,
process and output limits). The task's attachments are visible to programs and scripts."""

import json
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

from podium.core.calls import Status, ToolCall
from podium.pool.builtin.python_tool import render_run
from podium.pool.primitives.files import sandbox_inputs
from podium.pool.primitives.job import Job, json_reply
from podium.pool.tool import ToolOutput

MAX_PROGRAM_CHARS = 8_000
SHELL_RUNNER = """import subprocess, sys
# The model's script runs under /bin/sh in this same sandbox; its output passes straight through.
code = subprocess.run(["/bin/sh", "script.sh"], stdin=subprocess.DEVNULL).returncode
sys.exit(code if code >= 0 else 128 - code)
"""


def _program_schema(key: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {key: {"type": "string", "minLength": 1, "maxLength": MAX_PROGRAM_CHARS}},
        "required": [key],
        "additionalProperties": False,
    }


async def execute_python(job: Job) -> ToolOutput:
    """A Python program from the worker, run in the sandbox; stdout, stderr and the exit code come back, and the
    status is the sandbox's (EXEC_ERR on a non-zero exit, TIMEOUT past the CPU or wall-clock limit)."""
    return await _run_program(job, "execute_python", "code")


async def execute_shell(job: Job) -> ToolOutput:
    """A POSIX shell script from the worker, run by /bin/sh in the same sandbox as Python code (no network)."""
    return await _run_program(job, "execute_shell", "script")


async def _run_program(job: Job, name: str, key: str) -> ToolOutput:
    inputs = sandbox_inputs(job.kit)
    reply = await job.generate(name, json_schema=_program_schema(key), files=inputs.listing)
    if reply.status is not Status.OK:
        return job.failed(reply.status, reply.reason or "the worker failed")
    program = _program(str(reply.value), key)
    if not program.strip():
        return job.failed(Status.PARSE_ERR, f"the worker's reply holds no {key}", {"reply": reply.value})
    if key == "script":
        run = await job.sandboxed(SHELL_RUNNER, files={**inputs.files, "script.sh": program})
    else:
        run = await job.sandboxed(program, files=inputs.files)
    value = {key: program, "stdout": run.stdout, "stderr": run.stderr, "exit_code": run.exit_code}
    observation = f"[{key}]\n{program}\n[output]\n{render_run(run)}"
    if run.status is not Status.OK:
        return job.failed(run.status, run.reason or "the program failed", value, observation)
    return job.done(value, observation)


def _program(reply: str, key: str) -> str:
    """The program in the worker's reply: the JSON field, else a fenced block, else the reply itself."""
    parsed = json_reply(reply)
    if isinstance(parsed, dict) and isinstance(parsed.get(key), str):
        return str(parsed[key])
    if "```" in reply:
        block = reply.split("```")[1]
        first, _, rest = block.partition("\n")
        return rest if first.strip().isalpha() else block
    return reply


async def symbolic_math(job: Job) -> ToolOutput:
    """A sympy request from the worker, checked against the symbolic_math tool's schema (PARSE_ERR when it does
    not match), run by that tool in the sandbox."""
    tool = job.kit.helpers.get("symbolic_math")
    schema = tool.spec.parameters
    reply = await job.generate("symbolic_math", json_schema=schema, max_tokens=512)
    if reply.status is not Status.OK:
        return job.failed(reply.status, reply.reason or "the worker failed")
    request = json_reply(str(reply.value))
    error = best_match(Draft202012Validator(schema).iter_errors(request)) if isinstance(request, dict) else None
    if not isinstance(request, dict) or error is not None:
        problem = error.message if error is not None else "it is not a JSON object"
        return job.failed(Status.PARSE_ERR, f"the worker's sympy request is invalid: {problem}", {"reply": reply.value})
    result = await job.kit.run_tool(ToolCall(name=tool.name, arguments=request))
    job.spent.add(result)
    if not result.ok:
        return job.failed(result.status, result.reason or "symbolic_math failed", {"request": request})
    return job.done({"request": request, "result": result.value}, f"{json.dumps(request)}\n= {result.observation}")

"""``database_query``: the worker writes one SQL statement over the schema of an attached SQLite database, and
the statement runs in the sandbox on a read-only database (``sql_runner.py``); the result is rows."""

import json
from importlib.resources import files
from typing import Any

from podium.core.calls import Status
from podium.pool.primitives.files import SandboxInputs, sandbox_inputs
from podium.pool.primitives.job import Job, clip, json_reply
from podium.pool.tool import ToolOutput

RUNNER = (files("podium.pool.primitives") / "sql_runner.py").read_text(encoding="utf-8")
MAX_SQL_CHARS = 4_000


async def database_query(job: Job) -> ToolOutput:
    """Schema → SQL from the worker → rows from the sandbox. Refused: no database attached (EXEC_ERR), a reply
    that names no attached database or holds no SQL (PARSE_ERR), a statement that writes, changes the schema,
    attaches or sets a pragma, or more than one statement (EXEC_ERR, nothing runs)."""
    inputs = sandbox_inputs(job.kit)
    databases = [a for a in job.kit.attachments("database") if a.name in inputs.paths]
    if not databases:
        why = f" ({inputs.listing})" if inputs.notes else ""
        return job.failed(Status.EXEC_ERR, f"no database is attached to this task or pool{why}")
    schemas = []
    for database in databases:
        described = await _run(job, inputs, {"op": "schema", "path": inputs.paths[database.name]})
        if "schema" not in described:
            return job.failed(Status.EXEC_ERR, f"database '{database.name}': {described.get('error')}")
        about = f" ({database.description})" if database.description else ""
        schemas.append(f'<database name="{database.name}"{about}>\n{described["schema"]}\n</database>')
    limits = job.kit.config.primitive_limits
    listing, _ = clip("\n".join(schemas), limits.max_context_chars)
    names = [database.name for database in databases]
    schema = {
        "type": "object",
        "properties": {
            "database": {"enum": names},
            "sql": {"type": "string", "minLength": 1, "maxLength": MAX_SQL_CHARS},
        },
        "required": ["database", "sql"],
        "additionalProperties": False,
    }
    reply = await job.generate("database_query", json_schema=schema, databases=listing, max_rows=limits.max_rows)
    if reply.status is not Status.OK:
        return job.failed(reply.status, reply.reason or "the worker failed")
    request = json_reply(str(reply.value))
    if not isinstance(request, dict) or not str(request.get("sql") or "").strip():
        return job.failed(Status.PARSE_ERR, "the worker's reply holds no SQL statement", {"reply": reply.value})
    name = request.get("database") or names[0]
    if name not in names:
        return job.failed(Status.PARSE_ERR, f"the worker named database '{name}'; attached: {names}")
    sql = str(request["sql"]).strip()
    answer = await _run(
        job, inputs, {"op": "query", "path": inputs.paths[name], "sql": sql, "max_rows": limits.max_rows}
    )
    if "columns" not in answer:
        reason = f"refused: {answer['refused']}" if "refused" in answer else str(answer.get("error"))
        return job.failed(Status.EXEC_ERR, reason, {"database": name, "sql": sql})
    value = {"database": name, "sql": sql, **answer}
    return job.done(value, render_rows(sql, answer))


async def _run(job: Job, inputs: SandboxInputs, request: dict[str, Any]) -> dict[str, Any]:
    """One request to the SQL runner in the sandbox; sandbox failures become ``{"error": …}``."""
    run = await job.sandboxed(RUNNER, files={**inputs.files, "request.json": json.dumps(request)})
    if run.status is not Status.OK:
        return {"error": f"the sandbox stopped the query: {run.reason}"}
    try:
        return dict(json.loads(run.stdout.strip().splitlines()[-1]))
    except (ValueError, IndexError) as error:
        return {"error": f"unreadable answer from the SQL runner: {error}"}


def render_rows(sql: str, answer: dict[str, Any]) -> str:
    """The rows as the orchestrator reads them: the SQL, a header line, one JSON array per row."""
    lines = [f"sql: {sql}", " | ".join(answer["columns"])]
    lines += [json.dumps(row, ensure_ascii=False) for row in answer["rows"]]
    more = " (more rows were left out)" if answer["truncated"] else ""
    lines.append(f"({len(answer['rows'])} rows{more})")
    return "\n".join(lines)

"""Skills over text: ``read_document`` and ``read_code`` answer from attached files; ``extract_field`` and
``parse_structured`` turn text into JSON that must match a schema (PARSE_ERR when the worker's JSON does not).

Which files: those of the right kind that the instruction names (as whole words), or all of them. Long files are
read up to ``max_file_bytes`` and shown up to ``max_context_chars``, as the chunks sharing most words with the
instruction, each with its line range.

Where the schema comes from (extract_field, parse_structured), in this order: ``schema: NAME`` naming one of the
pool's ``schemas``; a JSON schema written in the instruction; for extract_field, ``fields: a, b, c`` (names without
spaces, each field a string, number, boolean or null); for parse_structured, any JSON object.
"""

import json
import re
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError, best_match

from podium.core.calls import Status
from podium.pool.primitives.files import AttachmentError, excerpt, mentioned, named_in, numbered, read_text
from podium.pool.primitives.job import Job, json_reply
from podium.pool.resources import Attachment, AttachmentKind
from podium.pool.tool import ToolOutput

_SCHEMA_NAME = re.compile(r"\bschema\s*[:=]\s*([A-Za-z_][A-Za-z0-9_.\-]*)")
_FIELDS = re.compile(r"\bfields?\s*[:=]\s*([^\n]+)", re.IGNORECASE)
_FIELD_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]*$")
ANY_OBJECT: dict[str, Any] = {"type": "object"}
SCALAR = {"type": ["string", "number", "integer", "boolean", "null"]}


async def read_document(job: Job) -> ToolOutput:
    """An answer from the attached documents (or a refusal naming what is missing)."""
    return await _read(job, "document", "read_document", "documents")


async def read_code(job: Job) -> ToolOutput:
    """An answer about the attached code, whose lines are numbered for citing."""
    return await _read(job, "code", "read_code", "files")


async def _read(job: Job, kind: AttachmentKind, name: str, placeholder: str) -> ToolOutput:
    chosen = named_in(job.kit.attachments(kind), job.instruction)
    if not chosen:
        return job.failed(Status.EXEC_ERR, f"no {kind} is attached to this task or pool")
    shown = _texts(job, kind, chosen)
    if isinstance(shown, ToolOutput):
        return shown
    text, truncated = shown
    reply = await job.generate(name, **{placeholder: text})
    if reply.status is not Status.OK:
        return job.failed(reply.status, reply.reason or "the worker failed")
    answer = str(reply.value).strip()
    value = {"answer": answer, kind + "s": [a.name for a in chosen], "excerpted": truncated}
    return job.done(value, answer)


def _texts(job: Job, kind: AttachmentKind, chosen: list[Attachment]) -> tuple[str, bool] | ToolOutput:
    """The chosen files as one block (each excerpted to its share of the context), and whether any was cut."""
    limits = job.kit.config.primitive_limits
    share = limits.max_context_chars // len(chosen)
    blocks, cut = [], False
    for attachment in chosen:
        try:
            text, truncated = read_text(attachment, limits.max_file_bytes)
        except AttachmentError as error:
            return job.failed(Status.EXEC_ERR, str(error))
        shown = excerpt(numbered(text) if kind == "code" else text, job.instruction, share)
        cut = cut or truncated or len(shown) < len(text)
        note = (
            f"\n[… the file is longer than {limits.max_file_bytes} bytes; the rest was not read]" if truncated else ""
        )
        about = f" ({attachment.description})" if attachment.description else ""
        blocks.append(f'<file name="{attachment.name}"{about}>\n{shown}{note}\n</file>')
    return "\n".join(blocks), cut


async def extract_field(job: Job) -> ToolOutput:
    """Named fields from the text, as a JSON object validated against the schema."""
    return await _structured(job, "extract_field")


async def parse_structured(job: Job) -> ToolOutput:
    """The text as JSON validated against the schema (any JSON object when none is given)."""
    return await _structured(job, "parse_structured")


async def _structured(job: Job, name: str) -> ToolOutput:
    schema = resolve_schema(job.instruction, job.kit.config.schemas, fields_allowed=name == "extract_field")
    if isinstance(schema, str):
        return job.failed(Status.PARSE_ERR, schema)
    if schema is None:
        if name == "extract_field":
            return job.failed(
                Status.PARSE_ERR,
                "extract_field needs the fields to extract: write 'fields: a, b' or a JSON schema in the "
                "instruction, or 'schema: NAME' naming one of the pool's schemas",
            )
        schema = ANY_OBJECT
    source = await _source_text(job)
    if isinstance(source, ToolOutput):
        return source
    reply = await job.generate(name, json_schema=schema, schema=json.dumps(schema), text=source)
    if reply.status is not Status.OK:
        return job.failed(reply.status, reply.reason or "the worker failed")
    data = json_reply(str(reply.value))
    if data is None:
        return job.failed(Status.PARSE_ERR, "the worker's reply is not JSON", {"reply": reply.value})
    error = best_match(Draft202012Validator(schema).iter_errors(data))
    if error is not None:
        where = "/".join(str(part) for part in error.absolute_path) or "(top level)"
        reason = f"the worker's JSON fails the schema at {where}: {error.message}"
        return job.failed(Status.PARSE_ERR, reason, {"reply": reply.value, "schema": schema})
    return job.done({"data": data, "schema": schema}, json.dumps(data, ensure_ascii=False))


async def _source_text(job: Job) -> str | ToolOutput:
    """What to extract from: the inputs and the attached documents the instruction names (only named ones:
    extraction is about a specific text); the instruction itself when there is nothing else."""
    named = mentioned(job.kit.attachments("document") + job.kit.attachments("code"), job.instruction)
    parts = [job.inputs] if job.inputs.strip() else []
    if named:
        shown = _texts(job, "document", named)
        if isinstance(shown, ToolOutput):
            return shown
        parts.append(shown[0])
    return "\n\n".join(parts) or job.instruction


def resolve_schema(
    instruction: str, named: dict[str, dict[str, Any]], *, fields_allowed: bool
) -> dict[str, Any] | str | None:
    """The schema the instruction asks for, None when it asks for none, or a string saying what is wrong."""
    match = _SCHEMA_NAME.search(instruction)
    if match:
        if match.group(1) not in named:
            return f"no schema named '{match.group(1)}' in the pool (schemas: {sorted(named) or 'none'})"
        return named[match.group(1)]
    inline = _inline_schema(instruction)
    if inline is not None:
        return inline
    fields = _FIELDS.search(instruction) if fields_allowed else None
    if fields is None:
        return None
    names = [part.strip() for part in fields.group(1).split(",") if part.strip()]
    bad = [part for part in names if not _FIELD_NAME.match(part)]
    if not names or bad:
        return f"cannot read the field list {fields.group(1)!r}: write 'fields: a, b, c'"
    return {
        "type": "object",
        "properties": {field: SCALAR for field in names},
        "required": names,
        "additionalProperties": False,
    }


def _inline_schema(instruction: str) -> dict[str, Any] | None:
    """A JSON schema written in the instruction: a JSON object with ``type`` or ``properties`` that is valid."""
    start = instruction.find("{")
    while start >= 0:
        try:
            candidate, _ = json.JSONDecoder().raw_decode(instruction[start:])
        except json.JSONDecodeError:
            candidate = None
        if isinstance(candidate, dict) and ({"type", "properties"} & set(candidate)):
            try:
                Draft202012Validator.check_schema(candidate)
            except SchemaError:
                return None
            return candidate
        start = instruction.find("{", start + 1)
    return None

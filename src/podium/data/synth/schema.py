"""The synthesized database: the schema the LLM writes (tables, a string key each, typed fields, references),
the JSON schema a table's records must match, and the rule checks of records (conformance, unique keys, references
that resolve)."""

import re
from typing import Any, Literal

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match
from pydantic import Field

from podium.core.record import Record

IDENTIFIER = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
FieldType = Literal["string", "integer", "number", "boolean", "string_list"]
JSON_TYPES: dict[str, dict[str, Any]] = {
    "string": {"type": "string"},
    "integer": {"type": "integer"},
    "number": {"type": "number"},
    "boolean": {"type": "boolean"},
    "string_list": {"type": "array", "items": {"type": "string"}},
}


class FieldSpec(Record):
    """One field of a table."""

    name: str
    type: FieldType
    description: str = ""
    references: str | None = None
    """The table whose key this field holds."""


class TableSpec(Record):
    """One table: its name, key field and fields."""

    name: str
    key: str
    fields: list[FieldSpec] = Field(min_length=1)

    def record_schema(self) -> dict[str, Any]:
        """The JSON schema one record of the table must match."""
        return {
            "type": "object",
            "properties": {field.name: JSON_TYPES[field.type] for field in self.fields},
            "required": [field.name for field in self.fields],
            "additionalProperties": False,
        }


def schema_reply_schema() -> dict[str, Any]:
    """The JSON schema of the schema step's reply (how many tables are kept is the pipeline's business)."""
    field = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 40},
            "type": {"enum": list(JSON_TYPES)},
            "description": {"type": "string", "maxLength": 160},
            "references": {"type": ["string", "null"], "maxLength": 40},
        },
        "required": ["name", "type", "description"],
    }
    table = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 40},
            "key": {"type": "string", "maxLength": 40},
            "fields": {"type": "array", "items": field, "minItems": 1, "maxItems": 12},
        },
        "required": ["name", "key", "fields"],
    }
    return {
        "type": "object",
        "properties": {"tables": {"type": "array", "items": table, "minItems": 1, "maxItems": 16}},
        "required": ["tables"],
    }


def table_problem(table: TableSpec, names: set[str]) -> str | None:
    """Why a table definition is unusable (``names``: every table of the schema)."""
    if not IDENTIFIER.match(table.name):
        return "table name is not an identifier"
    fields = [field.name for field in table.fields]
    if any(not IDENTIFIER.match(name) for name in fields) or len(set(fields)) != len(fields):
        return "field names repeat or are not identifiers"
    key = next((field for field in table.fields if field.name == table.key), None)
    if key is None or key.type != "string":
        return "the key is not a string field of the table"
    if any(field.references is not None and field.references not in names for field in table.fields):
        return "a field references a table the schema lacks"
    return None


def render_schema(tables: list[TableSpec]) -> str:
    """The schema as compact JSON for prompts."""
    return "\n".join(table.model_dump_json(exclude_none=True) for table in tables)


def record_problem(table: TableSpec, record: Any, keys: set[str]) -> str | None:
    """Why a record fails the rules of its table (``keys``: keys already taken in it)."""
    error = best_match(Draft202012Validator(table.record_schema()).iter_errors(record))
    if error is not None:
        return "does not match the table schema"
    key = record[table.key]
    if not key.strip():
        return "empty key"
    if key in keys:
        return "repeats a key"
    return None


def reference_problem(table: TableSpec, record: dict[str, Any], database: dict[str, dict[str, Any]]) -> str | None:
    """Why a record's references do not resolve in ``database`` (table → key → record)."""
    for field in table.fields:
        if field.references is not None and record[field.name] not in database.get(field.references, {}):
            return f"{field.name} names no {field.references} record"
    return None

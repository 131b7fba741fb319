"""The LLM steps of ToolScale synthesis, each a versioned prompt and a JSON reply checked against a schema:
subjects, schema, records, record validation, functions, policy, intents, tasks and their evolution."""

import json
from typing import Any

from podium.backends.base import ChatBackend
from podium.data.llm import Prompt, StepModel, ask_json, load_prompt
from podium.data.pools import PoolCache
from podium.data.synth.config import StepResult, SynthConfig
from podium.data.synth.schema import TableSpec, render_schema, schema_reply_schema

STEP_PROMPTS = ("subjects", "schema", "records", "validate_record", "functions", "policy", "intents", "task", "evolve")
CONDITIONS = ("condition_1", "condition_2", "condition_3")
DATABASE_CHARS = 6_000
"""Most characters of the database shown in a task prompt."""


def string_list(key: str, longest: int = 200) -> dict[str, Any]:
    """``{key: [strings]}``. How many are kept is the pipeline's business (the extras are counted as beyond the
    limit), so a reply with one too many is not thrown away whole."""
    items = {"type": "string", "minLength": 1, "maxLength": longest}
    array = {"type": "array", "items": items, "minItems": 1}
    return {"type": "object", "properties": {key: array}, "required": [key]}


def task_schema(functions: list[str]) -> dict[str, Any]:
    """The JSON schema of a task reply: the user's side, golden calls by function name, information to say."""
    action = {
        "type": "object",
        "properties": {"name": {"enum": functions or ["none"]}, "arguments": {"type": "object"}},
        "required": ["name", "arguments"],
    }
    text = {"type": "string", "maxLength": 600}
    return {
        "type": "object",
        "properties": {
            "reason_for_call": {"type": "string", "minLength": 10, "maxLength": 600},
            "known_info": text,
            "unknown_info": text,
            "actions": {"type": "array", "items": action, "minItems": 1, "maxItems": 8},
            "communicate_info": {"type": "array", "items": {"type": "string", "maxLength": 120}, "maxItems": 6},
        },
        "required": ["reason_for_call", "known_info", "unknown_info", "actions", "communicate_info"],
    }


def database_excerpt(database: dict[str, dict[str, Any]]) -> str:
    """The database as JSON for prompts, cut table by table to fit :data:`DATABASE_CHARS`."""
    per_table = max(1, DATABASE_CHARS // max(1, len(database)))
    parts = []
    for table, records in database.items():
        text = json.dumps({table: records}, ensure_ascii=False)
        parts.append(text if len(text) <= per_table else text[:per_table] + " …(more records)")
    return "\n".join(parts)


class Generator:
    """Runs the LLM steps with the configured writer and validator models."""

    def __init__(
        self, config: SynthConfig, *, backend: ChatBackend | None = None, pools: PoolCache | None = None
    ) -> None:
        self.config = config
        self.writer = StepModel.from_pool(config.pool, config.worker, pools)
        self.validator = StepModel.from_pool(config.pool, config.validator or config.worker, pools)
        if backend is not None:
            self.writer = StepModel(backend, self.writer.pool_hash, self.writer.prices_hash)
            self.validator = StepModel(backend, self.validator.pool_hash, self.validator.prices_hash)
        self.prompts: dict[str, Prompt] = {
            name: load_prompt(f"toolscale/{name}", config.prompts_dir) for name in STEP_PROMPTS
        }

    async def step(
        self, key: str, prompt: str, fields: dict[str, Any], schema: dict[str, Any], *, validator: bool = False
    ) -> StepResult:
        """One step: the prompt rendered with ``fields``, the reply checked against ``schema``."""
        model = self.validator if validator else self.writer
        reply = await ask_json(
            model.backend,
            self.prompts[prompt].render(**fields),
            schema,
            max_tokens=self.config.max_tokens,
            temperature=0.0 if validator else self.config.temperature,
            attempts=self.config.attempts,
        )
        return StepResult(
            key=key, value=reply.value, reason=reply.reason or "", usd=reply.usage.usd, prompt=self.prompts[prompt].id
        )

    async def subjects(self) -> StepResult:
        fields = {"domain": self.config.domain, "count": self.config.subjects}
        return await self.step("subjects", "subjects", fields, string_list("subjects", 40))

    async def schema(self, subjects: list[str]) -> StepResult:
        fields = {"domain": self.config.domain, "subjects": ", ".join(subjects)}
        return await self.step("schema", "schema", fields, schema_reply_schema())

    async def records(self, table: TableSpec, tables: list[TableSpec], existing: dict[str, list[str]]) -> StepResult:
        fields = {
            "domain": self.config.domain,
            "schema": render_schema(tables),
            "existing_keys": json.dumps(existing) if existing else "(none yet)",
            "count": self.config.records,
            "table": table.name,
            "key": table.key,
        }
        items = {**table.record_schema(), "additionalProperties": False}
        schema = {
            "type": "object",
            "properties": {"records": {"type": "array", "items": items, "minItems": 1}},
            "required": ["records"],
        }
        return await self.step(f"records:{table.name}", "records", fields, schema)

    async def validate(self, key: str, table: TableSpec, tables: list[TableSpec], record: dict[str, Any]) -> StepResult:
        fields = {
            "schema": render_schema(tables),
            "table": table.name,
            "record": json.dumps(record, ensure_ascii=False),
        }
        verdict = {"enum": ["satisfied", "not satisfied"]}
        schema = {
            "type": "object",
            "properties": {name: verdict for name in CONDITIONS},
            "required": list(CONDITIONS),
        }
        return await self.step(key, "validate_record", fields, schema, validator=True)

    async def functions(self, table: TableSpec, tables: list[TableSpec], existing: list[str]) -> StepResult:
        fields = {
            "domain": self.config.domain,
            "schema": render_schema(tables),
            "existing": ", ".join(existing) or "(none)",
            "count": self.config.functions,
            "table": table.name,
        }
        function = {
            "type": "object",
            "properties": {"kind": {"enum": ["read", "write"]}, "code": {"type": "string", "minLength": 20}},
            "required": ["kind", "code"],
        }
        schema = {
            "type": "object",
            "properties": {"functions": {"type": "array", "items": function, "minItems": 1}},
            "required": ["functions"],
        }
        return await self.step(f"functions:{table.name}", "functions", fields, schema)

    async def policy(self, functions: str) -> StepResult:
        fields = {"domain": self.config.domain, "functions": functions, "title": self.config.name.replace("_", " ")}
        schema = {
            "type": "object",
            "properties": {"policy": {"type": "string", "minLength": 40}},
            "required": ["policy"],
        }
        return await self.step("policy", "policy", fields, schema)

    async def intents(self, functions: str) -> StepResult:
        fields = {"domain": self.config.domain, "functions": functions, "count": self.config.intents}
        return await self.step("intents", "intents", fields, string_list("intents"))

    async def task(self, key: str, intent: str, functions: str, database: str, names: list[str]) -> StepResult:
        fields = {"functions": functions, "database": database, "intent": intent}
        return await self.step(key, "task", fields, task_schema(names))

    async def evolve(
        self, key: str, task: dict[str, Any], functions: str, database: str, names: list[str]
    ) -> StepResult:
        fields = {"functions": functions, "database": database, "task": json.dumps(task, ensure_ascii=False)}
        return await self.step(key, "evolve", fields, task_schema(names))

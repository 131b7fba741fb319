"""A request's ``response_format``: the JSON an answer must be, the instruction that asks the orchestrator for it,
and the check of the answer it gave.

``json_object`` asks for one JSON object, ``json_schema`` for one JSON value matching the schema given (checked
with JSON Schema draft 2020-12; ``strict`` changes nothing, every answer is checked). Where the orchestrator
writes the answer under a grammar (the serial policy on a local model) the answer is decoded under the schema;
every other answer (a prompted orchestrator's, a summarizer's, one recovered from observations) is checked, and
one that is not such JSON is an error, never returned as if it were. An answer wrapped in a Markdown code fence
is taken from inside it.
"""

import json
from typing import Any, Literal

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from podium.pool.tool import schema_problem

ANY_OBJECT: dict[str, Any] = {"type": "object"}
_FENCE = "```"


class JsonSchemaFormat(BaseModel):
    """The ``json_schema`` of a ``response_format``."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    name: str = Field(pattern=r"^[A-Za-z0-9_.\-]{1,64}$")
    description: str | None = None
    json_schema: dict[str, Any] = Field(default_factory=dict, alias="schema")
    strict: bool | None = None

    @field_validator("json_schema")
    @classmethod
    def _valid_schema(cls, schema: dict[str, Any]) -> dict[str, Any]:
        problem = schema_problem(schema)
        if problem is not None:
            raise ValueError(f"not a JSON schema: {problem}")
        return schema


class ResponseFormat(BaseModel):
    """OpenAI's ``response_format``: ``text`` (any answer), ``json_object`` or ``json_schema``."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["text", "json_object", "json_schema"]
    json_schema: JsonSchemaFormat | None = None

    @model_validator(mode="after")
    def _schema_with_its_type(self) -> "ResponseFormat":
        if (self.type == "json_schema") != (self.json_schema is not None):
            raise ValueError("json_schema is given with type json_schema, and only then")
        return self

    def answer_schema(self) -> dict[str, Any] | None:
        """The JSON schema of the answer (``None``: free text)."""
        if self.json_schema is not None:
            return self.json_schema.json_schema
        return ANY_OBJECT if self.type == "json_object" else None

    def instruction(self) -> str | None:
        """What the task adds so that the orchestrator (and a summarizer) answer in this format."""
        if self.json_schema is not None:
            about = f" ({self.json_schema.description})" if self.json_schema.description else ""
            schema = json.dumps(self.json_schema.json_schema, ensure_ascii=False)
            return (
                f"Answer with one JSON value, nothing else, matching the JSON schema '{self.json_schema.name}'"
                f"{about}: {schema}"
            )
        if self.type == "json_object":
            return "Answer with one JSON object, nothing else."
        return None

    def checked(self, answer: str) -> str:
        """``answer`` as the JSON text the client gets; raises ValueError saying how it breaks this format."""
        schema = self.answer_schema()
        if schema is None:
            return answer
        text = unfenced(answer)
        try:
            value = json.loads(text)
        except ValueError as error:
            raise ValueError(f"the answer is not JSON ({error})") from error
        problem = best_match(Draft202012Validator(schema).iter_errors(value))
        if problem is not None:
            where = "/".join(str(part) for part in problem.absolute_path) or "the answer"
            raise ValueError(f"{where}: {problem.message}")
        return text


def unfenced(answer: str) -> str:
    """``answer`` without a Markdown code fence around it (```json … ```)."""
    text = answer.strip()
    if not (text.startswith(_FENCE) and text.endswith(_FENCE) and len(text) > 2 * len(_FENCE)):
        return text
    _, _, inner = text[: -len(_FENCE)].partition("\n")
    return inner.strip()

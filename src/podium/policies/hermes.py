"""The Hermes / Qwen3 tool-call format shared by the serial and parallel policies:
``<tool_call>{"name": …, "arguments": {…}}</tool_call>`` in, ``<tool_response …>…</tool_response>`` out."""

import json
import re
from collections.abc import Sequence
from html import escape
from typing import Any

from podium.backends.grammar import WHITESPACE, Grammar, Limits, bounded_schema, literal, sequence
from podium.core.calls import ToolCall, ToolResult, ToolSpec
from podium.extras import require_extra
from podium.policies.base import InvalidCall

OPEN, CLOSE = "<tool_call>", "</tool_call>"
_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
_THINK = re.compile(r"<think>.*?(</think>|$)", re.DOTALL)


def read_tool_calls(text: str) -> tuple[list[ToolCall], list[InvalidCall]]:
    """Every ``<tool_call>`` block in ``text``: the readable ones as calls, the rest with the reason."""
    calls: list[ToolCall] = []
    invalid: list[InvalidCall] = []
    for match in _CALL.finditer(text):
        block = match.group(1).strip()
        call_or_reason = _read_call(block, f"call_{len(calls) + len(invalid)}")
        if isinstance(call_or_reason, ToolCall):
            calls.append(call_or_reason)
        else:
            invalid.append(InvalidCall(block, call_or_reason))
    unclosed = text.count(OPEN) - len(calls) - len(invalid)
    if unclosed > 0:
        tail = text[text.rfind(OPEN) :]
        invalid.append(InvalidCall(tail, f"{OPEN} without a closing {CLOSE}"))
    return calls, invalid


def _read_call(block: str, call_id: str) -> ToolCall | str:
    try:
        data = json.loads(block)
    except (ValueError, RecursionError) as error:
        return f"the call is not valid JSON: {error}"
    if not isinstance(data, dict):
        return 'the call must be a JSON object {"name": …, "arguments": {…}}'
    name = data.get("name")
    if not isinstance(name, str) or not name:
        return 'the call has no "name" string'
    arguments = data.get("arguments", {})
    if isinstance(arguments, str):  # some models write the arguments object as a JSON string
        try:
            arguments = json.loads(arguments)
        except (ValueError, RecursionError):
            return f'the "arguments" of {name} must be a JSON object'
    return ToolCall(name=name, arguments=arguments, id=call_id)


def strip_thinking(text: str) -> str:
    """``text`` without ``<think>`` blocks (an unclosed one runs to the end)."""
    return _THINK.sub("", text)


def render_results(results: Sequence[ToolResult]) -> str:
    """One ``<tool_response>`` block per result, with its explicit status."""
    blocks = []
    for result in results:
        body = result.observation or result.reason or ""
        attributes = f'name="{escape(result.call.name)}" id="{escape(result.call.id)}" status="{result.status.value}"'
        blocks.append(f"<tool_response {attributes}>\n{body}\n</tool_response>")
    return "\n".join(blocks)


def render_tools(tools: Sequence[ToolSpec]) -> str:
    """The tool signatures in the Hermes ``<tools>`` block."""
    lines = [json.dumps({"name": t.name, "description": t.description, "parameters": t.parameters}) for t in tools]
    return "<tools>\n" + "\n".join(lines) + "\n</tools>"


def call_grammar(tools: Sequence[ToolSpec], limits: Limits) -> Grammar:
    """One well-formed call block to any of ``tools``, arguments per its schema with every length bounded
    (:func:`~podium.backends.grammar.bounded_schema`), and the most tokens such a block can take.

    Each tool's ``$defs`` move to the root, where its ``#/$defs/…`` references point once it is nested; two
    tools defining one name differently raise ValueError."""
    definitions: dict[str, Any] = {}
    options = []
    bounds: list[int | None] = []
    for tool in tools:
        parameters, bound = bounded_schema(dict(tool.parameters), limits)
        for name, definition in parameters.pop("$defs", {}).items():
            if definitions.setdefault(name, definition) != definition:
                raise ValueError(f"tools define '$defs/{name}' differently; their calls cannot share one grammar")
        options.append(
            {
                "type": "object",
                "properties": {"name": {"const": tool.name}, "arguments": parameters},
                "required": ["name", "arguments"],
                "additionalProperties": False,
            }
        )
        # {"name": "TOOL", "arguments": ARGUMENTS} with at most one space around each separator
        bounds.append(None if bound is None else len(json.dumps(tool.name).encode()) + 32 + bound)
    schema: dict[str, Any] = {"oneOf": options, **({"$defs": definitions} if definitions else {})}
    build = require_extra("local", "outlines_core.json_schema").build_regex_from_schema
    body = Grammar(build(json.dumps(schema), WHITESPACE), None if None in bounds else max(bounds, default=0))
    return sequence(literal(OPEN), body, literal(CLOSE))

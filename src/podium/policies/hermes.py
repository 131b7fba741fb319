"""The Hermes / Qwen3 tool-call format shared by the serial and parallel policies:
``<tool_call>{"name": …, "arguments": {…}}</tool_call>`` in, ``<tool_response …>…</tool_response>`` out.

Reading is linear in the output's length whatever it holds (blocks are found with ``str.find``, never with a
backtracking pattern), and arguments nested deeper than :data:`~podium.core.jsonsafe.MAX_DEPTH` levels are a
PARSE_ERR. Text that tools produce is shown to the orchestrator through :func:`escape_protocol_tags`: a ``<``
that would open or close one of the runtime's blocks (``<tool_response>``, ``<obs>``, ``<budget>``…) is written
``&lt;``, so tool output cannot forge a block the runtime writes, and reads as before otherwise.
"""

import json
import re
import sys
from collections.abc import Sequence
from html import escape
from typing import Any

from podium.backends.grammar import WHITESPACE, Grammar, Limits, bounded_schema, literal, sequence
from podium.core.calls import ToolCall, ToolResult, ToolSpec
from podium.core.jsonsafe import MAX_DEPTH, nesting_depth
from podium.extras import require_extra
from podium.policies.base import InvalidCall

OPEN, CLOSE = "<tool_call>", "</tool_call>"
PROTOCOL_TAGS = (
    "tool_call", "tool_response", "tools", "think", "answer", "reasoning", "budget", "error", "plan", "subtask",
    "route", "obs", "verify", "final_answer", "replan", "user_query", "conversation_history",
)  # fmt: skip
"""Tag names of every block the policies, the runtime and the agent roles write or read."""
# The first lookahead (a tag's possible first letter) fails fast on the many ``<`` of code and markup, so the
# alternation of names runs only where a tag could start.
_PROTOCOL_TAG = re.compile(
    r"<(?=\s*+/?\s*+[" + "".join(sorted({name[0] for name in PROTOCOL_TAGS})) + "])"
    r"(?=\s*+/?\s*+(?:" + "|".join(PROTOCOL_TAGS) + r")\b)",
    re.IGNORECASE,
)


MAX_CALL_BLOCKS = 32
"""Most ``<tool_call>`` blocks read from one output (a round makes at most a few calls); further blocks are
reported as one PARSE_ERR instead of being read one by one."""


def tagged_blocks(
    text: str, opening: str, closing: str, limit: int = sys.maxsize, json_bodies: bool = False
) -> tuple[list[str], str | None, int]:
    """The bodies of the first ``limit`` ``opening…closing`` blocks of ``text``, left to right (a block ends at
    the first ``closing`` after its ``opening``); the unclosed tail from an ``opening`` that has no ``closing``;
    and how many openings follow the ``limit``-th block. With ``json_bodies``, a body that is a JSON value
    followed by ``closing`` ends there, even when one of its strings holds ``closing`` (a program that prints the
    tag). Linear time: each character is scanned once, or for JSON bodies at most :data:`MAX_CALL_CHARS` more."""
    bodies: list[str] = []
    position = 0
    while (start := text.find(opening, position)) >= 0:
        if len(bodies) == limit:
            return bodies, None, text.count(opening, start)
        begin = start + len(opening)
        end = text.find(closing, begin)
        if end < 0:
            return bodies, text[start:], 0
        if json_bodies:
            end = _json_block_end(text, begin, end, closing)
        bodies.append(text[begin:end])
        position = end + len(closing)
    return bodies, None, 0


MAX_CALL_CHARS = 65_536
"""Longest call body read as JSON past a closing tag inside one of its strings."""
_DECODER = json.JSONDecoder()


def _json_block_end(text: str, begin: int, first_close: int, closing: str) -> int:
    """Where the block opened at ``begin`` ends: after the JSON value starting there when ``closing`` follows it
    (a ``closing`` inside one of its strings is then part of the value), else at ``first_close``."""
    window = text[begin : begin + MAX_CALL_CHARS]
    start = len(window) - len(window.lstrip())
    try:
        _, end = _DECODER.raw_decode(window, start)
    except (ValueError, RecursionError):
        return first_close
    after = len(window) - len(window[end:].lstrip())
    return begin + after if window.startswith(closing, after) else first_close


def read_tool_calls(text: str) -> tuple[list[ToolCall], list[InvalidCall]]:
    """Every ``<tool_call>`` block in ``text``, up to :data:`MAX_CALL_BLOCKS`: the readable ones as calls, the
    rest with the reason."""
    calls: list[ToolCall] = []
    invalid: list[InvalidCall] = []
    bodies, unclosed, unread = tagged_blocks(text, OPEN, CLOSE, MAX_CALL_BLOCKS, json_bodies=True)
    for body in bodies:
        block = body.strip()
        call_or_reason = _read_call(block, f"call_{len(calls) + len(invalid)}")
        if isinstance(call_or_reason, ToolCall):
            calls.append(call_or_reason)
        else:
            invalid.append(InvalidCall(block, call_or_reason))
    if unclosed is not None:
        invalid.append(InvalidCall(unclosed, f"{OPEN} without a closing {CLOSE}"))
    if unread:
        reason = f"{unread} more {OPEN} blocks not read: at most {MAX_CALL_BLOCKS} per output"
        invalid.append(InvalidCall(f"({unread} blocks)", reason))
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
    if nesting_depth(arguments) > MAX_DEPTH:
        return f'the "arguments" of {name} are nested deeper than {MAX_DEPTH} levels'
    return ToolCall(name=name, arguments=arguments, id=call_id)


def strip_thinking(text: str) -> str:
    """``text`` without ``<think>`` blocks (an unclosed one runs to the end)."""
    kept: list[str] = []
    position = 0
    while (start := text.find("<think>", position)) >= 0:
        kept.append(text[position:start])
        end = text.find("</think>", start)
        if end < 0:
            return "".join(kept)
        position = end + len("</think>")
    kept.append(text[position:])
    return "".join(kept)


def escape_protocol_tags(text: str) -> str:
    """``text`` with the ``<`` of anything that reads as a protocol tag (:data:`PROTOCOL_TAGS`, any case, opening
    or closing) written ``&lt;``: tool output cannot open or close a block the runtime writes."""
    return _PROTOCOL_TAG.sub("&lt;", text) if "<" in text else text


def render_results(results: Sequence[ToolResult]) -> str:
    """One ``<tool_response>`` block per result, with its explicit status; bodies are escaped."""
    blocks = []
    for result in results:
        body = escape_protocol_tags(result.observation or result.reason or "")
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

"""Values any JSON line can hold: bounded nesting and no lone UTF-16 surrogates.

Models and tools can produce values JSON cannot store or read back safely. Two rules make every record
writable and readable, with visible replacements:

- **Nesting** deeper than :data:`MAX_DEPTH` levels is refused where model output is parsed (a PARSE_ERR call)
  and, for values that reach a record by another way (a tool's return value), each container below that depth
  is replaced by :data:`DEPTH_MARKER`. Records themselves add a few levels, and readers refuse JSON nested
  beyond 200 levels.
- **Surrogates** (U+D800–U+DFFF, which arrive through JSON escapes such as ``"\\ud800"`` but are not Unicode
  characters and cannot be encoded in UTF-8) are written as U+FFFD, the replacement character, which readers
  show as such. A pair of surrogates cannot be kept apart from the character it encodes in any JSON text, so
  no escape scheme could round-trip them all; replacing them is the documented behaviour.
"""

import math
import re
from typing import Any

MAX_DEPTH = 64
"""Most nesting levels of a tool call's arguments or a tool's value (far above any real schema)."""
DEPTH_MARKER = f"[podium: nested deeper than {MAX_DEPTH} levels; not stored]"
"""What replaces a container nested too deep."""
REPLACEMENT = "\ufffd"
"""What replaces a surrogate code point."""
_SURROGATE = re.compile("[\ud800-\udfff]")


def nesting_depth(value: Any, stop_above: int = MAX_DEPTH) -> int:
    """Levels of nested lists and dicts in ``value`` (a scalar is 0), counted without recursion; the count stops
    once it passes ``stop_above`` (so a self-referencing value ends too)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        deepest = max(deepest, depth)
        if deepest > stop_above:
            return deepest
        stack.extend((child, depth + 1) for child in children)
    return deepest


def cap_depth(value: Any, limit: int = MAX_DEPTH) -> Any:
    """``value`` itself when it nests at most ``limit`` levels, else a copy whose deeper containers are
    :data:`DEPTH_MARKER`."""
    if nesting_depth(value, limit) <= limit:
        return value
    return _capped(value, limit)


def _capped(value: Any, left: int) -> Any:
    # Recursion is bounded by ``left`` (at most MAX_DEPTH frames).
    if not isinstance(value, dict | list | tuple):
        return value
    if left == 0:
        return DEPTH_MARKER
    if isinstance(value, dict):
        return {key: _capped(item, left - 1) for key, item in value.items()}
    return [_capped(item, left - 1) for item in value]


def replace_surrogates(text: str) -> str:
    """``text`` with every surrogate code point replaced by U+FFFD."""
    return _SURROGATE.sub(REPLACEMENT, text)


def json_ready(value: Any) -> Any:
    """``value`` with surrogates replaced in every string and key, and NaN and infinities as ``None`` (what the
    JSON writer makes of them); recursion follows the value's depth, which records bound."""
    if isinstance(value, str):
        return replace_surrogates(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {json_ready(key): json_ready(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [json_ready(item) for item in value]
    return value

"""Decoding grammars that fit a token budget by construction.

A grammar is a regular expression together with the most tokens any output matching it can take: every token
is at least one byte, so the most UTF-8 bytes of a match bound its tokens. Free text (reasoning, answers, string
arguments) is a bounded repetition whose characters count 4 bytes each (the longest UTF-8 character); the
skeleton counts its literal bytes. A policy builds its grammar from :class:`Limits` and shrinks the limits until
the bound fits the turn's ``max_tokens``, so an action always closes before the budget runs out: a call is never
cut inside its arguments. Agent roles fit their JSON replies the same way (:func:`fit_schema`).

JSON arguments get bounds too (:func:`bounded_schema`): strings a ``maxLength``, arrays a ``maxItems``, integers
a ``maxDigits`` (outlines-core's keyword), objects no properties beyond those listed; an ``anyOf`` / ``oneOf``
branch that cannot be bounded (a free-form object) is left out of the grammar when another branch can be. A
schema with no boundable form (a ``pattern``, a free-form object alone) gives an unbounded grammar
(``max_tokens`` ``None``): it still constrains the form, but the budget cannot be guaranteed.
"""

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from podium.extras import require_extra

UTF8_MAX = 4
"""Most bytes of one character in UTF-8 (and of one character of a JSON string: an escape is two)."""
SCHEMA_STRING_CHARS = 4000
"""Longest string :func:`fit_schema` allows where the schema and the budget allow more."""
WHITESPACE = r"[ ]?"
"""Whitespace between JSON tokens: at most one space (one byte)."""


@dataclass(frozen=True)
class Limits:
    """How much free text a grammar allows, in characters (numbers and list lengths are not scaled)."""

    thinking: int = 120
    """Free reasoning before the action (``<think>``, ``<reasoning>``, ``<verify>``)."""
    answer: int = 120
    """A final answer."""
    argument: int = 400
    """A string argument of a call, where its schema sets no smaller ``maxLength``."""
    text: int = 80
    """A DAG subtask description or route instruction."""
    items: int = 4
    """Items of an array argument, where its schema sets no smaller ``maxItems``."""
    digits: int = 12
    """Digits of an integer argument."""

    def scaled(self, permille: int) -> "Limits":
        """The character limits times ``permille`` / 1000 (at least one answer character)."""

        def scale(value: int) -> int:
            return value * permille // 1000

        return replace(
            self,
            thinking=scale(self.thinking),
            answer=max(1, scale(self.answer)),
            argument=scale(self.argument),
            text=max(1, scale(self.text)),
        )


@dataclass(frozen=True)
class Grammar:
    """A regular expression and the most tokens a match can take (``None``: unbounded)."""

    regex: str
    max_tokens: int | None


class BudgetTooSmall(ValueError):
    """Even the fixed parts of a grammar need more tokens than the turn's budget."""


def literal(text: str) -> Grammar:
    """Exactly ``text``."""
    return Grammar(re.escape(text), len(text.encode()))


def free_text(characters: str, low: int, high: int) -> Grammar:
    """``low`` to ``high`` characters of the class ``characters`` (e.g. ``[^<]``)."""
    return Grammar(f"(?:{characters}){{{low},{high}}}", UTF8_MAX * high)


def sequence(*parts: Grammar) -> Grammar:
    """The parts one after the other."""
    return Grammar("".join(part.regex for part in parts), _total(part.max_tokens for part in parts))


def choice(*options: Grammar) -> Grammar:
    """Any one of the options."""
    bounds = [option.max_tokens for option in options]
    bound = None if None in bounds else max(bound for bound in bounds if bound is not None)
    return Grammar("(?:" + "|".join(option.regex for option in options) + ")", bound)


def optional(part: Grammar) -> Grammar:
    """``part`` or nothing."""
    return Grammar(f"(?:{part.regex})?", part.max_tokens)


def repeated(part: Grammar, low: int, high: int) -> Grammar:
    """``part`` ``low`` to ``high`` times."""
    bound = None if part.max_tokens is None else part.max_tokens * high
    return Grammar(f"(?:{part.regex}){{{low},{high}}}", bound)


def json_value(schema: dict[str, Any], limits: Limits) -> Grammar:
    """A JSON value matching ``schema`` with the bounds of :func:`bounded_schema`, as outlines-core writes it."""
    bounded, bound = bounded_schema(schema, limits)
    build = require_extra("local", "outlines_core.json_schema").build_regex_from_schema
    return Grammar(build(json.dumps(bounded), WHITESPACE), bound)


def fit(build: Callable[[Limits], Grammar], max_tokens: int, limits: Limits | None = None) -> Grammar:
    """The grammar ``build`` makes from the largest scaling of ``limits`` whose bound fits ``max_tokens``.

    An unbounded grammar is returned as built. Raises :class:`BudgetTooSmall` when even the smallest limits
    do not fit."""
    limits = limits or Limits()
    full = build(limits)
    if full.max_tokens is None or full.max_tokens <= max_tokens:
        return full
    smallest = build(limits.scaled(0))
    if smallest.max_tokens is not None and smallest.max_tokens > max_tokens:
        raise BudgetTooSmall(
            f"max_tokens={max_tokens} cannot hold one action: its fixed parts alone may take "
            f"{smallest.max_tokens} tokens"
        )
    low, high = 0, 1000  # build(low) fits, build(high) does not
    while high - low > 1:
        middle = (low + high) // 2
        bound = build(limits.scaled(middle)).max_tokens
        if bound is not None and bound <= max_tokens:
            low = middle
        else:
            high = middle
    return build(limits.scaled(low))


def bounded_schema(schema: dict[str, Any], limits: Limits) -> tuple[dict[str, Any], int | None]:
    """``schema`` with a bound on every length (``maxLength``, ``maxItems``, ``maxDigits``, no extra
    properties), and the most bytes an instance can take as outlines-core writes it (``None``: unbounded).
    ``$defs`` stay where they are; references into them are followed (a recursive one is unbounded)."""
    definitions = schema.get("$defs", {})
    bounded, bound = _bounded(schema, limits, definitions, ())
    if definitions:
        bounded["$defs"] = {
            name: _bounded(definition, limits, definitions, (name,))[0] for name, definition in definitions.items()
        }
    return bounded, bound


def _total(bounds: Any) -> int | None:
    values = list(bounds)
    return None if None in values else sum(values)


def _bounded(
    schema: dict[str, Any], limits: Limits, definitions: dict[str, Any], seen: tuple[str, ...]
) -> tuple[dict[str, Any], int | None]:
    schema = {key: value for key, value in schema.items() if key != "$defs"}
    if "$ref" in schema:
        name = str(schema["$ref"]).removeprefix("#/$defs/")
        if name in seen or name not in definitions:
            return schema, None
        return schema, _bounded(definitions[name], limits, definitions, (*seen, name))[1]
    if "const" in schema or "enum" in schema:
        values = [schema["const"]] if "const" in schema else schema["enum"]
        return schema, max((_json_bytes(value) for value in values), default=0)
    kinds = schema.get("type")
    for key in ("oneOf", "anyOf"):
        if key in schema and not (kinds == "object" and "properties" in schema):
            # A branch that cannot be bounded (a free-form object) is left out when another one can be.
            branches = [_bounded(branch, limits, definitions, seen) for branch in schema[key]]
            bounded = [(branch, bound) for branch, bound in branches if bound is not None]
            if not bounded:
                return schema, None
            schema[key] = [branch for branch, _ in bounded]
            return schema, _largest([bound for _, bound in bounded])
    if isinstance(kinds, list):
        bounds = [_bounded({**schema, "type": kind}, limits, definitions, seen) for kind in kinds]
        merged: dict[str, Any] = {}
        for bounded, _ in bounds:
            merged.update(bounded)
        return {**merged, "type": kinds}, _largest([bound for _, bound in bounds])
    bound_of = _BOUNDS.get(str(kinds))
    if bound_of is None:
        return schema, None
    return bound_of(schema, limits, definitions, seen)


def _largest(bounds: Sequence[int | None]) -> int | None:
    return None if not bounds or None in bounds else max(b for b in bounds if b is not None)


def _json_bytes(value: Any) -> int:
    return max(len(json.dumps(value).encode()), len(json.dumps(value, ensure_ascii=False).encode()))


def _string(schema: dict[str, Any], limits: Limits, *_: Any) -> tuple[dict[str, Any], int | None]:
    if "pattern" in schema or "format" in schema:
        return schema, None
    length = min(int(schema.get("maxLength", limits.argument)), limits.argument)
    length = max(length, int(schema.get("minLength", 0)))
    return {**schema, "maxLength": length}, 2 + UTF8_MAX * length


def _integer(schema: dict[str, Any], limits: Limits, *_: Any) -> tuple[dict[str, Any], int | None]:
    digits = min(int(schema.get("maxDigits", limits.digits)), limits.digits)
    return {**schema, "maxDigits": digits}, 1 + digits


def _number(schema: dict[str, Any], limits: Limits, *_: Any) -> tuple[dict[str, Any], int | None]:
    bounded = {
        **schema,
        "maxDigitsInteger": limits.digits,
        "maxDigitsFraction": limits.digits,
        "maxDigitsExponent": 3,
    }
    return bounded, 1 + limits.digits + 1 + limits.digits + 2 + 3


def _fixed(size: int) -> Callable[..., tuple[dict[str, Any], int | None]]:
    return lambda schema, *_: (schema, size)


def _array(
    schema: dict[str, Any], limits: Limits, definitions: dict[str, Any], seen: tuple[str, ...]
) -> tuple[dict[str, Any], int | None]:
    if "prefixItems" in schema or not isinstance(schema.get("items"), dict):
        return schema, None
    items, item_bound = _bounded(schema["items"], limits, definitions, seen)
    count = min(int(schema.get("maxItems", limits.items)), limits.items)
    count = max(count, int(schema.get("minItems", 0)))
    bound = None if item_bound is None else 4 + count * (item_bound + 2)
    return {**schema, "items": items, "maxItems": count}, bound


def _object(
    schema: dict[str, Any], limits: Limits, definitions: dict[str, Any], seen: tuple[str, ...]
) -> tuple[dict[str, Any], int | None]:
    properties = schema.get("properties") or {}
    if schema.get("additionalProperties", not properties) is not False:
        return schema, None  # a free-form object
    bounded: dict[str, Any] = {}
    total: int | None = 4  # braces and the whitespace inside them
    for name, child in properties.items():
        bounded[name], child_bound = _bounded(child, limits, definitions, seen)
        # the quoted key, whitespace around the colon and the comma, the colon, the comma
        overhead = _json_bytes(name) + 4 + 2
        total = None if total is None or child_bound is None else total + overhead + child_bound
    return {**schema, "properties": bounded, "additionalProperties": False}, total


_BOUNDS: dict[str, Callable[..., tuple[dict[str, Any], int | None]]] = {
    "string": _string,
    "integer": _integer,
    "number": _number,
    "boolean": _fixed(5),
    "null": _fixed(4),
    "array": _array,
    "object": _object,
}


def fit_schema(schema: dict[str, Any], max_tokens: int) -> dict[str, Any]:
    """``schema`` with its lengths bounded so that any instance fits ``max_tokens`` (for a JSON reply that must
    not be cut off); a schema that cannot be bounded is returned as given. Raises :class:`BudgetTooSmall`."""
    fitted: dict[str, dict[str, Any]] = {}

    def build(limits: Limits) -> Grammar:
        fitted["schema"], bound = bounded_schema(schema, limits)
        return Grammar("", bound)

    grammar = fit(build, max_tokens, Limits(argument=SCHEMA_STRING_CHARS))
    return fitted["schema"] if grammar.max_tokens is not None else schema

"""Answers held by the calls' observations are never lost or retyped wrong.

Two failures of small models led here: a summarizer that read ``121932631112635269`` in a program's output and
wrote ``12193263111126311111111`` (long numbers retyped from memory drift after a dozen digits), and an episode
that stopped at its turn limit with no answer although its ``python`` call had printed ``391``.

* :func:`ground` checks an answer's long integers (:data:`MIN_DIGITS` digits or more) against the numbers the
  question and the successful calls hold: an integer found in neither that starts like an observed one (the same
  first :data:`MIN_DIGITS` digits) is a miscopy, and the observed number, copied, takes its place. (A decimal
  that starts like an observed one is left alone: it may be that number rounded.)
* :func:`recover` finds the answer an episode that stopped at a limit leaves in its observations: the final
  value the newest successful call printed.
"""

import re
from collections.abc import Sequence
from dataclasses import dataclass

from podium.core.calls import ToolResult

MIN_DIGITS = 5
"""Numbers with at least this many digits are checked: shorter ones are copied (and computed) reliably."""
MAX_VALUE_CHARS = 100
"""Longest final line of an observation that counts as a value (longer lines are prose or data, not answers)."""
_NUMBER = re.compile(r"(?<![\w.])-?\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\w])|(?<![\w.])-?\d+(?:\.\d+)?(?![\w])")
_MARKER = re.compile(r"^\[[^\]\n]*\]$")
"""A line the runtime's tools write around output (``[stderr]``, ``[output]``, ``[no output]``…)."""


@dataclass(frozen=True)
class Correction:
    """A number of an answer replaced by the observed number it miscopied."""

    written: str
    """The number as the answer had it."""
    observed: str
    """The number the observation holds."""
    call: str
    """The call whose observation holds it."""


def _digits(number: str) -> str:
    return number.replace(",", "")


def long_numbers(text: str) -> list[re.Match[str]]:
    """The numbers of ``text`` with at least :data:`MIN_DIGITS` digits (thousands separators allowed)."""
    return [match for match in _NUMBER.finditer(text) if sum(c.isdigit() for c in match.group()) >= MIN_DIGITS]


def successful(results: Sequence[ToolResult]) -> list[ToolResult]:
    """The results of calls that ran and succeeded, newest first."""
    return [result for result in reversed(results) if result.ok and result.executed]


def observed_numbers(results: Sequence[ToolResult]) -> dict[str, str]:
    """Each long number the successful calls' observations hold → the id of the newest call holding it."""
    found: dict[str, str] = {}
    for result in successful(results):
        for match in long_numbers(result.observation):
            found.setdefault(_digits(match.group()), result.call.id or result.call.name)
    return found


def ground(answer: str, question: str, results: Sequence[ToolResult]) -> tuple[str, list[Correction]]:
    """``answer`` with each long number that is a miscopy of an observed one replaced by the observed number."""
    observed = observed_numbers(results)
    known = set(observed) | {_digits(match.group()) for match in long_numbers(question)}
    corrections: list[Correction] = []
    pieces: list[str] = []
    position = 0
    for match in long_numbers(answer):
        written = _digits(match.group())
        if written in known or "." in written:
            continue
        nearest = max(observed, key=lambda number: shared_digits(number, written), default=None)
        if nearest is None or shared_digits(nearest, written) < MIN_DIGITS:
            continue
        corrections.append(Correction(match.group(), nearest, observed[nearest]))
        pieces.extend([answer[position : match.start()], nearest])
        position = match.end()
    return "".join([*pieces, answer[position:]]), corrections


def shared_digits(first: str, second: str) -> int:
    """How many leading digits two numbers share (signs must agree)."""
    if first.startswith("-") != second.startswith("-"):
        return 0
    first, second = first.lstrip("-"), second.lstrip("-")
    shared = 0
    while shared < min(len(first), len(second)) and first[shared] == second[shared]:
        shared += 1
    return sum(character.isdigit() for character in first[:shared])


def final_value(observation: str) -> str | None:
    """The last value a call printed: the final line of its output (after an ``[output]`` marker, before a
    ``[stderr]`` one), when it is short enough to be a value."""
    lines = observation.splitlines()
    if "[output]" in lines:
        lines = lines[len(lines) - lines[::-1].index("[output]") :]
    if "[stderr]" in lines:
        lines = lines[: lines.index("[stderr]")]
    values = [line.strip() for line in lines if line.strip() and not _MARKER.match(line.strip())]
    if not values or len(values[-1]) > MAX_VALUE_CHARS:
        return None
    return values[-1]


def recover(results: Sequence[ToolResult]) -> tuple[str, ToolResult] | None:
    """The answer an episode without one leaves in its observations: the final value of the newest successful
    call that printed one, and that call."""
    for result in successful(results):
        value = final_value(result.observation)
        if value is not None:
            return value, result
    return None

"""Reading the tags of the DAG grammar (:mod:`podium.policies.dag`): the elements of an output with their
attributes and bodies, nesting checked.

Linear in the output's length: tags are found by one pass of a pattern that cannot backtrack across a ``<``, and
attributes by a possessive pattern. Parsing never raises anything but
:class:`~podium.policies.base.ActionParseError`.
"""

import re
from dataclasses import dataclass, field

from podium.policies.base import ActionParseError

_TAG = re.compile(r"<(/?)(plan|subtask|route|obs|verify|final_answer|replan)\b([^<>]*+)>")
MAX_TAGS = 256
"""Most grammar tags read from one output: a plan's 16 subtasks and routes with their checks need far fewer."""
MAX_TAG_CHARS = 1024
"""Longest attribute text of one tag (ids, worker labels and primitives are short)."""
# Possessive and anchored after a non-name character, so a long run of letters is scanned once, not once per
# starting position.
_ATTRIBUTE = re.compile(r'(?<![A-Za-z_])([A-Za-z_]++)\s*+=\s*+"([^"]*+)"')


@dataclass
class Element:
    """One element of the DAG grammar as written: its tag, attributes, body and (for ``<plan>`` and ``<verify>``)
    the elements inside it."""

    name: str
    attributes: dict[str, str]
    start: int
    body_start: int
    children: list["Element"] = field(default_factory=list)
    body: str = ""


def read_elements(text: str) -> list[Element]:
    """The top-level grammar elements of ``text`` (free text between them is ignored), checking nesting."""
    top: list[Element] = []
    stack: list[Element] = []
    for count, match in enumerate(_TAG.finditer(text)):
        closing, name, raw_attributes = match.groups()
        if count == MAX_TAGS or len(raw_attributes) > MAX_TAG_CHARS:
            raise ActionParseError(f"too many or too long tags: at most {MAX_TAGS} tags of {MAX_TAG_CHARS} characters")
        self_closing = raw_attributes.endswith("/")
        if name == "obs":
            raise ActionParseError("<obs> blocks are written by the runtime, not by the orchestrator")
        if name == "replan":
            if not stack or stack[-1].name != "verify" or closing:
                raise ActionParseError("<replan/> belongs inside <verify>")
            stack[-1].children.append(Element(name, {}, match.start(), match.end()))
            continue
        if closing:
            if not stack or stack[-1].name != name:
                raise ActionParseError(f"unexpected </{name}>: no open <{name}> to close")
            element = stack.pop()
            element.body = text[element.body_start : match.start()]
            continue
        if self_closing:
            raise ActionParseError(f"<{name}/> cannot be empty: write <{name}>…</{name}>")
        element = Element(name, dict(_ATTRIBUTE.findall(raw_attributes)), match.start(), match.end())
        parent = stack[-1].name if stack else None
        if name == "route" and parent == "route":
            raise ActionParseError("nested <route>: routes are top-level, one per subtask")
        if name == "subtask" and parent != "plan":
            raise ActionParseError("<subtask> must be inside <plan>")
        if name != "subtask" and parent is not None:
            raise ActionParseError(f"<{name}> cannot be inside <{parent}>")
        (stack[-1].children if stack else top).append(element)
        stack.append(element)
    if stack:
        raise ActionParseError(f"<{stack[-1].name}> is not closed")
    return top

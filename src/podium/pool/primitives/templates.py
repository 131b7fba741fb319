"""Prompt templates of the primitives: one versioned file per primitive in ``podium/pool/prompts/primitives``.

A template file starts with a header, then a system and a user section::

    ---
    primitive: reason
    version: 1
    ---
    ## system
    You are …
    ## user
    $instruction
    $inputs

Placeholders are ``$name`` (``string.Template``; ``$$`` is a dollar sign). Every template receives
``instruction`` (the route's instruction) and ``inputs`` (the results of the subtasks it depends on, or nothing);
some receive more (the evidence, the schema, the files…). The version travels with every result
(``template: reason@1``), so a trajectory says which wording produced it.
"""

import re
from dataclasses import dataclass
from functools import cache
from importlib.resources import files
from string import Template

from podium.core.messages import Message
from podium.errors import ConfigError

_HEADER = re.compile(r"\A---\n(?P<header>.*?)\n---\n", re.DOTALL)
_SECTION = re.compile(r"^## (system|user)\s*$", re.MULTILINE)


@dataclass(frozen=True)
class PromptTemplate:
    """A primitive's wording: the system prompt and the user message, with placeholders."""

    primitive: str
    version: int
    system: str
    user: str

    @property
    def tag(self) -> str:
        """``primitive@version``, recorded with each result."""
        return f"{self.primitive}@{self.version}"

    def messages(self, **fields: object) -> list[Message]:
        """The worker's messages with ``fields`` filled in (a missing field is a KeyError: a template bug)."""
        values = {name: str(value) for name, value in fields.items()}
        return [
            Message(role="system", content=Template(self.system).substitute(values).strip()),
            Message(role="user", content=Template(self.user).substitute(values).strip()),
        ]


def parse_template(text: str, source: str) -> PromptTemplate:
    """A template from its file text; ConfigError naming ``source`` when the header or a section is missing."""
    header = _HEADER.match(text)
    if header is None:
        raise ConfigError(f"{source}: a template starts with a '---' header holding primitive and version")
    fields = dict(
        (key.strip(), value.strip())
        for key, _, value in (line.partition(":") for line in header.group("header").splitlines())
    )
    if not fields.get("primitive") or not fields.get("version", "").isdigit():
        raise ConfigError(f"{source}: the header needs 'primitive: NAME' and 'version: N' (an integer)")
    parts = _SECTION.split(text[header.end() :])
    sections = dict(zip(parts[1::2], parts[2::2], strict=True))
    if set(sections) != {"system", "user"}:
        raise ConfigError(f"{source}: a template has exactly one '## system' and one '## user' section")
    return PromptTemplate(fields["primitive"], int(fields["version"]), sections["system"], sections["user"])


@cache
def template(name: str) -> PromptTemplate:
    """The packaged template called ``name`` (a primitive)."""
    resource = files("podium.pool") / "prompts" / "primitives" / f"{name}.md"
    return parse_template(resource.read_text(encoding="utf-8"), f"prompts/primitives/{name}.md")


def inputs_block(inputs: str) -> str:
    """The results of earlier subtasks as a block of the user message, or nothing."""
    return f"\n<inputs>\n{inputs}\n</inputs>" if inputs.strip() else ""

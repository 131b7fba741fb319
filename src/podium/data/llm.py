"""LLM steps of the data stages: versioned prompt files and structured (JSON) requests to a pool worker.

Every prompt is a file ``prompts/<group>/<name>.v<N>.txt`` (the highest N is used; a directory given with
``prompts_dir`` is searched first, so a user can edit a copy). Placeholders are ``{{field}}``; rendering fails
when one is left unfilled. A structured request asks for JSON under a JSON schema (constrained decoding where the
backend can, upper size bounds left to the check), parses it out of the reply, validates it against the whole schema and
the step's own checks, and on a bad reply asks again with the problem stated, a bounded number of times; what is
still wrong becomes the reason.
"""

import hashlib
import json
import re
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

from podium.backends.base import BackendError, ChatBackend
from podium.core.calls import CallUsage
from podium.core.messages import Message
from podium.costs.bounds import generation_bound
from podium.data.pools import PoolCache, shared_pool
from podium.data.provenance import pool_hash, prices_hash
from podium.data.store import DataError
from podium.pool.config import PoolConfig
from podium.pool.pool import resolve_pool_config

_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
_VERSIONED = re.compile(r"^(?P<name>[a-z0-9_]+)\.v(?P<version>\d+)\.txt$")


@dataclass(frozen=True)
class Prompt:
    """One versioned prompt."""

    name: str
    """``group/name``, e.g. ``toolscale/subjects``."""
    version: int
    text: str

    @property
    def id(self) -> str:
        """``group/name@vN#<sha256 prefix>``: what provenance records."""
        digest = hashlib.sha256(self.text.encode("utf-8")).hexdigest()[:8]
        return f"{self.name}@v{self.version}#{digest}"

    def render(self, **fields: Any) -> str:
        """The text with every ``{{field}}`` replaced; a missing field is an error."""
        missing = sorted({match.group(1) for match in _PLACEHOLDER.finditer(self.text)} - set(fields))
        if missing:
            raise DataError(f"prompt {self.name}: no value for {missing}")
        return _PLACEHOLDER.sub(lambda match: str(fields[match.group(1)]), self.text)


def _versions(directory: Path, name: str) -> list[tuple[int, Path]]:
    if not directory.is_dir():
        return []
    found = []
    for path in directory.iterdir():
        match = _VERSIONED.match(path.name)
        if match and match.group("name") == name:
            found.append((int(match.group("version")), path))
    return sorted(found)


def load_prompt(name: str, prompts_dir: str | Path | None = None) -> Prompt:
    """The highest version of prompt ``group/name``, from ``prompts_dir`` first, else Podium's own."""
    group, _, base = name.rpartition("/")
    roots = [Path(prompts_dir)] if prompts_dir else []
    roots.append(Path(str(files("podium.data") / "prompts")))
    for root in roots:
        versions = _versions(root / group, base)
        if versions:
            version, path = versions[-1]
            return Prompt(name, version, path.read_text(encoding="utf-8"))
    raise DataError(f"no prompt file {group}/{base}.v<N>.txt in {', '.join(str(root) for root in roots)}")


@dataclass
class JsonReply:
    """The outcome of a structured request."""

    value: Any
    """The validated JSON value; ``None`` when every attempt failed."""
    reason: str | None
    """Why the last attempt failed (``None`` on success)."""
    usage: CallUsage
    """Tokens and USD of every attempt."""
    text: str = ""
    """The last reply's text."""


def extract_json(text: str) -> Any:
    """The JSON object in a reply: the whole text, a fenced block, or the first balanced ``{…}``."""
    stripped = text.strip()
    fenced = re.search(r"```(?:json)?\s*(.*?)```", stripped, re.DOTALL)
    candidates = [stripped, fenced.group(1) if fenced else None]
    start = stripped.find("{")
    if start >= 0:
        candidates.append(stripped[start : stripped.rfind("}") + 1])
    for candidate in candidates:
        if candidate:
            try:
                return json.loads(candidate)
            except ValueError:
                continue
    raise ValueError("the reply holds no JSON object")


SIZE_KEYWORDS = frozenset({"maxLength", "maxItems"})
"""Upper bounds left out of the schema a backend decodes under: in a grammar each one repeats a pattern up to its
bound (nested bounded arrays of bounded strings ran a local model out of memory), while checking them after decoding
costs nothing. Lower bounds stay: they keep a weak model from answering with nothing. The reply is still validated
against the full schema."""


def decoding_schema(schema: Any) -> Any:
    """``schema`` without upper size bounds, for constrained decoding."""
    if isinstance(schema, dict):
        return {key: decoding_schema(value) for key, value in schema.items() if key not in SIZE_KEYWORDS}
    if isinstance(schema, list):
        return [decoding_schema(value) for value in schema]
    return schema


def request_bound(backend: ChatBackend, prompt: str, max_tokens: int, attempts: int) -> float:
    """The most a structured request can cost in USD (every attempt at full length)."""
    return generation_bound(backend.price, prompt, max_tokens).usd * attempts


async def ask_json(
    backend: ChatBackend,
    prompt: str,
    schema: dict[str, Any],
    *,
    check: Any = None,
    max_tokens: int = 512,
    temperature: float = 0.0,
    attempts: int = 2,
) -> JsonReply:
    """Ask ``backend`` for a JSON value matching ``schema`` (and ``check(value) -> reason | None``)."""
    validator = Draft202012Validator(schema)
    constraint = decoding_schema(schema)
    messages = [Message(role="user", content=prompt)]
    usage, reason, text = CallUsage(), None, ""
    for _ in range(attempts):
        try:
            generation = await backend.generate(
                messages, max_tokens=max_tokens, temperature=temperature, json_schema=constraint
            )
        except BackendError as error:
            return JsonReply(None, f"backend failed: {error}", usage, text)
        text = generation.text
        usage = usage + CallUsage(
            input_tokens=generation.input_tokens, output_tokens=generation.output_tokens, usd=generation.usd
        )
        reason, value = _check_reply(text, validator, check)
        if reason is None:
            return JsonReply(value, None, usage, text)
        messages = [
            *messages,
            Message(role="assistant", content=text),
            Message(role="user", content=f"That reply is not usable: {reason}. Reply again with only the JSON."),
        ]
    return JsonReply(None, reason, usage, text)


def _check_reply(text: str, validator: Draft202012Validator, check: Any) -> tuple[str | None, Any]:
    try:
        value = extract_json(text)
    except ValueError as error:
        return f"not JSON ({error}; cut off at the token limit?)", None
    error = best_match(validator.iter_errors(value))
    if error is not None:
        where = "/".join(str(part) for part in error.absolute_path) or "(root)"
        message = error.message if len(error.message) <= 160 else error.message[:160] + "…"
        return f"does not match the schema at {where}: {message}", None
    reason = check(value) if check is not None else None
    return reason, value


@dataclass
class StepModel:
    """The pool worker that performs a stage's LLM steps, with the hashes its provenance records."""

    backend: ChatBackend
    pool_hash: str
    prices_hash: str

    @classmethod
    def from_pool(
        cls, pool: str | PoolConfig | None, worker: str | None, pools: PoolCache | None = None
    ) -> "StepModel":
        """Worker ``worker`` (default: the first) of the pool file, inline pool, or the embedded pool."""
        config = resolve_pool_config(pool)
        built = shared_pool(config, pools)
        name = worker or config.workers[0].name
        if name not in built.backends:
            raise DataError(f"worker '{name}' is not in the pool (workers: {sorted(built.backends)})")
        return cls(built.backends[name], pool_hash(config), prices_hash(built.prices))

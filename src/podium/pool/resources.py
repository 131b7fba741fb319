"""What primitives work on besides the worker: files and databases attached to a pool or an episode, the HTTP
endpoints ``call_api`` may reach, named JSON schemas for extraction, and the size limits of all of them.

An attachment is a file the orchestrator refers to by name (``orders``, ``report``); its kind says which
primitives read it: ``database`` (SQLite, for ``database_query``), ``document`` (text, for ``read_document``)
or ``code`` (source files, for ``read_code``). Attach files to every episode of a pool with ``attachments:`` in
the pool file, or to one episode with ``Executor.run(..., attachments=[...])``.
"""

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from pydantic import Field, PositiveFloat, PositiveInt, field_validator

from podium.config import Config
from podium.costs.prices import ToolPrice
from podium.errors import ConfigError

AttachmentKind = Literal["database", "document", "code"]
NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_.\-]*$"
DATABASE_SUFFIXES = (".db", ".sqlite", ".sqlite3")
CODE_SUFFIXES = (
    ".py", ".js", ".ts", ".java", ".c", ".h", ".cc", ".cpp", ".hpp", ".rs", ".go", ".rb", ".sh", ".sql",
    ".kt", ".swift", ".scala", ".php", ".cs", ".m", ".r", ".jl", ".lua", ".pl", ".toml", ".yaml", ".yml",
)  # fmt: skip
HTTP_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")


class Attachment(Config):
    """A file given to the primitives of a pool or of one episode."""

    name: str = Field(pattern=NAME_PATTERN)
    """How instructions refer to it (e.g. ``orders``); unique among the attachments an episode sees."""
    path: str
    """The file; in a pool file, relative to the pool file."""
    kind: AttachmentKind | None = None
    """``database`` (SQLite), ``document`` (text) or ``code``; default: from the suffix (.db/.sqlite/.sqlite3 are
    databases, source suffixes code, anything else a document)."""
    description: str = ""
    """What it holds, shown to the worker beside its name."""

    @property
    def resolved_kind(self) -> AttachmentKind:
        """The kind given, or the one its suffix implies."""
        if self.kind is not None:
            return self.kind
        suffix = Path(self.path).suffix.lower()
        if suffix in DATABASE_SUFFIXES:
            return "database"
        return "code" if suffix in CODE_SUFFIXES else "document"

    def resolved(self, base: Path) -> "Attachment":
        """The same attachment with its path made absolute relative to ``base``."""
        return self.model_copy(update={"path": str((base / self.path).resolve())})


def checked_attachments(attachments: Sequence[Attachment], base: Path) -> tuple[Attachment, ...]:
    """``attachments`` with their paths made absolute from ``base``, each checked to be a file with a name of its
    own; a ConfigError names the field at fault."""
    resolved = tuple(attachment.resolved(base) for attachment in attachments)
    names = [attachment.name for attachment in resolved]
    for index, attachment in enumerate(resolved):
        if attachment.name in names[:index]:
            raise ConfigError(f"attachments.{index}.name: '{attachment.name}' is attached twice")
        if not Path(attachment.path).is_file():
            raise ConfigError(f"attachments.{index}.path: {attachment.path} is not a file")
    return resolved


class ApiEndpoint(Config):
    """One HTTP endpoint ``call_api`` may call: the allowlist is the list of these, nothing else is reached."""

    name: str = Field(pattern=NAME_PATTERN)
    """The endpoint's name in prompts and results."""
    url: str
    """The exact URL (http or https, no credentials, no query string: GET parameters come from the body)."""
    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE"] = "POST"
    """The one method allowed."""
    body_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object"})
    """JSON schema of the request body (for GET: of the query parameters); a body that fails it is refused."""
    description: str = ""
    """What the endpoint does, shown to the worker."""
    timeout_s: PositiveFloat = 10.0
    """Time limit of one request; exceeding it is a TIMEOUT."""
    price: ToolPrice = Field(default_factory=ToolPrice)
    """What one request costs (per call, charged when answered; per second)."""
    headers: dict[str, str] = Field(default_factory=dict)
    """Extra request headers (e.g. a content type)."""
    api_key_env: str | None = None
    """Environment variable whose value is sent as ``Authorization: Bearer …``."""

    @field_validator("url")
    @classmethod
    def _plain_http_url(cls, url: str) -> str:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"'{url}' is not an http(s) URL with a host")
        if parts.username or parts.password:
            raise ValueError("credentials do not belong in the URL: use api_key_env")
        if parts.query or parts.fragment:
            raise ValueError("no query string or fragment: GET parameters come from the body")
        return url

    @field_validator("body_schema")
    @classmethod
    def _valid_schema(cls, schema: dict[str, Any]) -> dict[str, Any]:
        return checked_schema(schema)


class PrimitiveLimits(Config):
    """Size limits of what primitives read and return."""

    max_file_bytes: PositiveInt = 1 << 20
    """Most bytes read from one attached document or code file (the rest is left out, and the worker told)."""
    max_context_chars: PositiveInt = 24_000
    """Most characters of attached text shown to a worker in one call."""
    max_database_bytes: PositiveInt = 32 << 20
    """Largest SQLite file attached to a single episode (it is copied into the sandbox; pool databases are
    bound read-only instead)."""
    max_rows: PositiveInt = 200
    """Most rows ``database_query`` returns."""
    max_response_bytes: PositiveInt = 65_536
    """Most bytes of an HTTP response ``call_api`` reads."""
    max_passages: PositiveInt = 8
    """Most retrieved passages ``web_search`` and ``fact_check`` keep."""


def checked_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` if it is a valid JSON schema (draft 2020-12); ValueError naming the problem otherwise."""
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as error:
        raise ValueError(f"not a valid JSON schema: {error.message}") from error
    return schema

"""The base of a synthesized domain's ``tools.py``: a tau2 database of id-keyed tables and a tau2 toolkit over it.

ToolScale synthesis (``podium synth domain``) writes a domain's functions as methods of a :class:`SynthesizedTools`
subclass, each tagged with tau2's ``@is_tool(ToolType.READ)`` or ``@is_tool(ToolType.WRITE)``, and declares a
:class:`TablesDB` subclass beside it, so the module defines one toolkit and one database model, as the domain loader
(:func:`podium.envs.domain.kit_from_file`) expects. The methods reach records through the database's helpers
(:meth:`TablesDB.get`, :meth:`~TablesDB.table`, :meth:`~TablesDB.insert`) and refuse a request by raising
:class:`ToolError`, which tau2 answers as an ``"Error: …"`` tool message (Podium's EXEC_ERR). A call that raises
leaves the database as it found it; new ids come from a per-episode counter and the clock is fixed, so replaying
the same calls gives the same database (tau2 compares database hashes).

Importing this module needs the ``tau2`` extra.
"""

import copy
import hashlib
from collections.abc import Container, Iterator
from contextlib import contextmanager
from typing import Any

from pydantic import ConfigDict

from podium.envs.domain import tau2_module
from podium.errors import PodiumError

_TOOLKIT = tau2_module("tau2.environment.toolkit")
# tau2's own tag and tool types, served from here so that a generated ``tools.py`` reaches tau2 only through
# tau2_module, which silences tau2's import-time logging first.
is_tool = _TOOLKIT.is_tool
ToolType = _TOOLKIT.ToolType

Record = dict[str, Any]
Table = dict[str, Record]

FIXED_NOW = "2024-01-01T00:00:00"
"""The clock of every synthesized domain, ISO 8601."""
ID_TRIES = 10_000
"""Most candidates :meth:`SynthesizedTools.new_id` draws before it gives up (the id space may be full)."""


class ToolError(PodiumError, ValueError):
    """A request the domain refuses (unknown id, wrong status, nothing left…): tau2's error response."""


class TablesDB(tau2_module("tau2.environment.db").DB):  # type: ignore[misc]
    """A database of id-keyed tables: every top-level entry of ``db.json`` is a table (key → record, a JSON
    object). The tables are the model's extra fields, so any layout loads and tau2's hash of ``model_dump()``
    sees every change to a record."""

    model_config = ConfigDict(extra="allow")
    __pydantic_extra__: dict[str, Table]

    @property
    def tables(self) -> dict[str, Table]:
        """Table name → table."""
        return self.__pydantic_extra__

    def table(self, name: str) -> Table:
        """A whole table (key → record), for scans; records to change should come from :meth:`get`."""
        if name not in self.tables:
            raise ToolError(f"no table {name!r}")
        return self.tables[name]

    def get(self, table: str, key: str, what: str | None = None) -> Record:
        """The record ``key`` of ``table`` (change it in place to update it), or a :class:`ToolError` that names
        it as ``what``."""
        record = self.table(table).get(key)
        if record is None:
            raise ToolError(f"{what or table} {key!r} not found")
        return record

    def insert(self, table: str, key: str, record: Record) -> None:
        """Add a new record under ``key``."""
        rows = self.table(table)
        if key in rows:
            raise ToolError(f"{table} {key!r} already exists")
        rows[key] = record

    @contextmanager
    def atomic(self) -> Iterator[None]:
        """All or nothing: when the body raises, every table is put back as it was. tau2's own tools check before
        they write; generated ones may write and then refuse, and a refused call must change nothing."""
        saved = copy.deepcopy(self.tables)
        try:
            yield
        except BaseException:
            self.tables.clear()
            self.tables.update(saved)
            raise


class SynthesizedTools(_TOOLKIT.ToolKitBase):  # type: ignore[misc]
    """Base of a synthesized domain's toolkit: atomic calls, deterministic ids, a fixed clock."""

    domain: str = ""
    """The domain's name (it seeds the ids)."""
    now: str = FIXED_NOW
    """The fixed clock, ISO 8601."""

    def __init__(self, db: TablesDB | None = None) -> None:
        super().__init__(db)
        self._ids_made = 0

    def use_tool(self, tool_name: str, **kwargs: Any) -> Any:
        """tau2's way of calling a tool (every environment call comes here), made atomic: a call that raises
        leaves the tables and the id counter as they were, so a refused call does not shift the ids that later
        calls draw (tau2 compares the agent's database with the gold replay's)."""
        ids_made = self._ids_made
        try:
            if self.db is None:
                return super().use_tool(tool_name, **kwargs)
            with self.db.atomic():
                return super().use_tool(tool_name, **kwargs)
        except BaseException:
            self._ids_made = ids_made
            raise

    def new_id(self, alphabet: str, length: int, taken: Container[str], prefix: str = "") -> str:
        """A fresh id not in ``taken``: a hash of the domain and a per-episode counter, so replays agree."""
        if not alphabet or length < 1:
            raise ToolError("new_id needs a non-empty alphabet and a length of at least 1")
        for _ in range(ID_TRIES):
            self._ids_made += 1
            digest = int(hashlib.sha256(f"{self.domain}:{self._ids_made}".encode()).hexdigest(), 16)
            chars = []
            for _ in range(length):
                digest, index = divmod(digest, len(alphabet))
                chars.append(alphabet[index])
            key = prefix + "".join(chars)
            if key not in taken:
                return key
        raise ToolError(f"no free id of {length} characters from {alphabet!r} after {ID_TRIES} tries")


def reserved_names() -> frozenset[str]:
    """Names a generated method may not take: every public attribute of the base toolkit (tau2's ``tools``,
    ``use_tool``… and ours), and ``db``."""
    return frozenset(name for name in dir(SynthesizedTools) if not name.startswith("_")) | {"db"}

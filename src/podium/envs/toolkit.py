"""The engine side of a domain's tool functions: a tracked database, tagged actions and deterministic state.

A domain subclasses :class:`Toolkit` and writes its functions as methods marked ``@action("read")`` or
``@action("write")`` (or ``"generic"`` for tools that touch no data). Methods reach records only through
:class:`Database`, which remembers every entry an action touched (for operation completeness, SPEC §6.3).
Time is a fixed clock and new ids come from a counter, so replaying the same calls gives the same database.
"""

import ast
import copy
import hashlib
import json
import operator
from collections.abc import Callable, Container, Iterator
from contextlib import contextmanager
from enum import StrEnum
from typing import Any, TypeVar

from podium.errors import PodiumError

Entry = tuple[str, str]
"""A database entry: (table, key)."""


class ToolError(PodiumError, ValueError):
    """An action refused or failed (unknown id, wrong status, insufficient balance…): the caller's EXEC_ERR."""


class ActionKind(StrEnum):
    """What a tool does to the database."""

    READ = "read"
    WRITE = "write"
    GENERIC = "generic"
    """Touches no data (calculator, transfer to a human)."""


class Database:
    """A domain's JSON database (id-keyed tables) that records which entries were touched."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data
        self.touched: set[Entry] = set()
        self._saved: dict[Entry, Any] | None = None
        self._inserted: list[Entry] = []

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Run one action atomically: if it raises, every entry it reached through :meth:`get` or
        :meth:`insert` is put back as it was, so a refused action leaves the database unchanged."""
        self._saved, self._inserted = {}, []
        try:
            yield
        except Exception:
            for (table, key), record in self._saved.items():
                self.data[table][key] = record
            for table, key in self._inserted:
                del self.data[table][key]
            raise
        finally:
            self._saved, self._inserted = None, []

    def table(self, name: str) -> dict[str, Any]:
        """A whole table, for read-only scans; mark what the scan returns with :meth:`touch`. Records to be
        changed must come from :meth:`get`, which makes them part of the action's transaction."""
        return self.data[name]

    def touch(self, table: str, key: str) -> None:
        """Record that an action operated on an entry."""
        self.touched.add((table, key))

    def get(self, table: str, key: str, what: str | None = None) -> dict[str, Any]:
        """The entry ``key`` of ``table`` (touched), or a :class:`ToolError` naming it as ``what``."""
        record = self.data[table].get(key)
        if record is None:
            raise ToolError(f"{what or table} {key!r} not found")
        if self._saved is not None and (table, key) not in self._saved:
            self._saved[(table, key)] = copy.deepcopy(record)
        self.touch(table, key)
        return record

    def insert(self, table: str, key: str, record: dict[str, Any]) -> None:
        """Add a new entry (touched)."""
        if key in self.data[table]:
            raise ToolError(f"{table} {key!r} already exists")
        self.data[table][key] = record
        if self._saved is not None:
            self._inserted.append((table, key))
        self.touch(table, key)

    def dump(self) -> str:
        """The canonical text of the state: ``json.dumps(db, sort_keys=True)`` as tau2 hashes it."""
        return json.dumps(self.data, sort_keys=True)

    def state_hash(self) -> str:
        """SHA-256 of :meth:`dump`."""
        return hashlib.sha256(self.dump().encode()).hexdigest()


F = TypeVar("F", bound=Callable[..., Any])


def action(kind: ActionKind | str) -> Callable[[F], F]:
    """Mark a :class:`Toolkit` method as a tool of the given kind."""

    def mark(method: F) -> F:
        method.__podium_action__ = ActionKind(kind)  # type: ignore[attr-defined]
        return method

    return mark


class Toolkit:
    """Base of a domain's tool functions, bound to one episode's database."""

    domain: str = ""
    """The domain's name (also seeds the deterministic ids)."""
    now: str = "2024-01-01T00:00:00"
    """The fixed clock, ISO 8601."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._ids_made = 0

    @classmethod
    def actions(cls) -> dict[str, ActionKind]:
        """Tool name → kind, for every method marked with :func:`action`."""
        return {
            name: member.__podium_action__
            for name in dir(cls)
            if callable(member := getattr(cls, name)) and hasattr(member, "__podium_action__")
        }

    def new_id(self, alphabet: str, length: int, taken: Container[str], prefix: str = "") -> str:
        """A fresh id not in ``taken``: a hash of the domain and a per-episode counter, so replays agree."""
        while True:
            self._ids_made += 1
            digest = int(hashlib.sha256(f"{self.domain}:{self._ids_made}".encode()).hexdigest(), 16)
            chars = []
            for _ in range(length):
                digest, index = divmod(digest, len(alphabet))
                chars.append(alphabet[index])
            key = prefix + "".join(chars)
            if key not in taken:
                return key


_OPERATORS: dict[type, Callable[..., float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}


class CustomerServiceTools(Toolkit):
    """The generic actions every customer-service domain of tau2 offers."""

    @action(ActionKind.GENERIC)
    def calculate(self, expression: str) -> float:
        """Calculate an arithmetic expression of numbers, + - * / and parentheses; rounded to 2 decimals.

        Args:
            expression: The expression, such as '2 * (350 - 122)'.
        """
        return round(evaluate_arithmetic(expression), 2)

    @action(ActionKind.GENERIC)
    def transfer_to_human_agents(self, summary: str) -> str:
        """Transfer the user to a human agent, with a summary of their issue.

        Args:
            summary: A summary of the user's issue.
        """
        return "Transfer successful"


def evaluate_arithmetic(expression: str) -> float:
    """+, −, ×, ÷ and parentheses over numbers, without ``eval``; raises :class:`ToolError` otherwise."""

    def walk(node: ast.AST) -> float:
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool):
            return float(node.value)
        if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
            return _OPERATORS[type(node.op)](walk(node.left), walk(node.right))
        if isinstance(node, ast.UnaryOp) and type(node.op) in _OPERATORS:
            return _OPERATORS[type(node.op)](walk(node.operand))
        raise ToolError(f"unsupported expression: {expression!r}")

    try:
        return walk(ast.parse(expression, mode="eval"))
    except SyntaxError as error:
        raise ToolError(f"cannot parse expression {expression!r}") from error
    except ZeroDivisionError as error:
        raise ToolError("division by zero") from error

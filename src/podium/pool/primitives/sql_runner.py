"""Runs inside the sandbox as main.py: one read-only SQLite request from request.json, the answer as one JSON line.

The database is opened read-only (a ``mode=ro`` URI, on a read-only bind or a private copy) and an authorizer
allows reading only: any write, schema change, ATTACH, PRAGMA or transaction is refused before it runs, with the
action named. ``op`` is ``schema`` (the CREATE statements) or ``query`` (one statement, at most ``max_rows`` rows).
"""

import json
import sqlite3
import sys
from urllib.parse import quote

ACTIONS = (
    "CREATE_INDEX",
    "CREATE_TABLE",
    "CREATE_TEMP_INDEX",
    "CREATE_TEMP_TABLE",
    "CREATE_TEMP_TRIGGER",
    "CREATE_TEMP_VIEW",
    "CREATE_TRIGGER",
    "CREATE_VIEW",
    "DELETE",
    "DROP_INDEX",
    "DROP_TABLE",
    "DROP_TEMP_INDEX",
    "DROP_TEMP_TABLE",
    "DROP_TEMP_TRIGGER",
    "DROP_TEMP_VIEW",
    "DROP_TRIGGER",
    "DROP_VIEW",
    "INSERT",
    "PRAGMA",
    "READ",
    "SELECT",
    "TRANSACTION",
    "UPDATE",
    "ATTACH",
    "DETACH",
    "ALTER_TABLE",
    "REINDEX",
    "ANALYZE",
    "CREATE_VTABLE",
    "DROP_VTABLE",
    "FUNCTION",
    "SAVEPOINT",
    "RECURSIVE",
)  # the authorizer's action codes are 1..33 in this order (sqlite3.h)
ALLOWED = {"READ", "SELECT", "FUNCTION", "RECURSIVE"}


def emit(payload):
    print(json.dumps(payload))
    sys.exit(0)


def connect(path):
    # A database in WAL mode cannot be opened read-only without its -shm file: it is then read as immutable,
    # from its last checkpoint.
    for uri in (f"file:{quote(path)}?mode=ro", f"file:{quote(path)}?mode=ro&immutable=1"):
        try:
            connection = sqlite3.connect(uri, uri=True)
            connection.execute("SELECT count(*) FROM sqlite_master").fetchone()
            return connection
        except sqlite3.DatabaseError as error:
            problem = error
    emit({"error": f"cannot open the database: {problem}"})


def cell(value):
    if isinstance(value, bytes):
        return f"<{len(value)} bytes>"
    return value


def main():
    with open("request.json", encoding="utf-8") as handle:
        request = json.load(handle)
    connection = connect(request["path"])
    if request["op"] == "schema":
        rows = connection.execute("SELECT sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY rowid").fetchall()
        emit({"schema": ";\n".join(row[0] for row in rows)})
    denied = []

    def authorize(action, *details):
        name = ACTIONS[action - 1] if 1 <= action <= len(ACTIONS) else str(action)
        if name in ALLOWED:
            return sqlite3.SQLITE_OK
        target = " ".join(d for d in details[:2] if d)
        schema = target in ("sqlite_master", "sqlite_schema", "sqlite_temp_master")
        denied.append(f"a schema change (it would {name} {target})" if schema else f"{name} {target}".strip())
        return sqlite3.SQLITE_DENY

    connection.set_authorizer(authorize)
    try:
        cursor = connection.execute(request["sql"])
        rows = cursor.fetchmany(request["max_rows"] + 1)
    except (sqlite3.ProgrammingError, sqlite3.Warning) as error:
        emit({"refused": f"one statement at a time ({error})"})
    except sqlite3.DatabaseError as error:
        if denied:
            asked = ", ".join(dict.fromkeys(denied))
            emit({"refused": f"database_query only reads; the statement asks for {asked}"})
        emit({"error": f"SQL error: {error}"})
    columns = [column[0] for column in cursor.description or ()]
    truncated = len(rows) > request["max_rows"]
    emit(
        {
            "columns": columns,
            "rows": [[cell(v) for v in row] for row in rows[: request["max_rows"]]],
            "truncated": truncated,
        }
    )


main()

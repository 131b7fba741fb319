"""Primitives that run in the sandbox: read-only SQL, Python, a POSIX shell and sympy, with their refusals and
limits. Everything here runs real processes in the real sandbox."""

import hashlib
import json
import sqlite3
import sys

import pytest

from podium.core.calls import Status
from podium.pool.resources import Attachment
from tests.primitive_fixtures import SANDBOX, Recorder, perform, pool_with, requests_of


@pytest.fixture
def shop(tmp_path):
    path = tmp_path / "shop.sqlite"
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, customer TEXT, total REAL)")
        connection.executemany(
            "INSERT INTO orders (customer, total) VALUES (?, ?)",
            [("ada", 12.5), ("bob", 3.0), ("cy", 40.0), ("ada", 7.5)],
        )
    connection.close()
    return path


def digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def sql(statement, database="shop"):
    return json.dumps({"database": database, "sql": statement})


def test_database_query_returns_rows_from_the_schema_the_worker_was_shown(shop):
    query = sql("SELECT customer, SUM(total) AS spent FROM orders GROUP BY customer ORDER BY spent DESC")
    pool = pool_with([query], ["database_query"], attachments=[{"name": "shop", "path": str(shop)}])
    result = perform(pool, "database_query", "Who spent the most?")
    assert result.status is Status.OK, result.reason
    assert result.value["columns"] == ["customer", "spent"]
    assert result.value["rows"] == [["cy", 40.0], ["ada", 20.0], ["bob", 3.0]]
    assert "CREATE TABLE orders" in requests_of(pool)[0][1].content
    assert str(shop) in pool.sandbox.config.read_only_paths, "a pool database is bound read-only into the sandbox"
    assert result.usage.usd > 0, "sandbox time is charged at the python tool's price"


@pytest.mark.parametrize(
    ("statement", "reason"),
    [
        ("INSERT INTO orders (customer, total) VALUES ('eve', 1)", "only reads; the statement asks for INSERT orders"),
        ("DELETE FROM orders", "asks for DELETE orders"),
        ("DROP TABLE orders", "asks for a schema change"),
        ("ATTACH DATABASE '/tmp/other.db' AS other", "asks for ATTACH"),
        ("PRAGMA journal_mode=WAL", "asks for PRAGMA journal_mode"),
        ("SELECT 1; DELETE FROM orders", "one statement at a time"),
    ],
)
def test_database_query_refuses_anything_but_reading(shop, statement, reason):
    before = digest(shop)
    pool = pool_with([sql(statement)], ["database_query"], attachments=[{"name": "shop", "path": str(shop)}])
    result = perform(pool, "database_query", "Change the data")
    assert result.status is Status.EXEC_ERR and result.reason.startswith("refused:") and reason in result.reason
    assert digest(shop) == before


def test_database_query_reports_sql_errors_and_unknown_databases(shop):
    attached = [{"name": "shop", "path": str(shop)}]
    pool = pool_with(
        [sql("SELECT * FROM customers"), sql("SELECT 1", "warehouse"), "no json"],
        ["database_query"],
        attachments=attached,
    )
    error = perform(pool, "database_query", "List customers")
    assert error.status is Status.EXEC_ERR and "no such table: customers" in error.reason
    unknown = perform(pool, "database_query", "Count stock")
    assert unknown.status is Status.PARSE_ERR and "warehouse" in unknown.reason
    assert perform(pool, "database_query", "x").status is Status.PARSE_ERR


def test_a_database_attached_to_one_episode_is_copied_in_and_rows_are_capped(shop):
    pool = pool_with(
        [sql("SELECT id FROM orders ORDER BY id", "orders_db")], ["database_query"], primitive_limits={"max_rows": 2}
    )
    episode = Attachment(name="orders_db", path=str(shop))
    result = perform(pool, "database_query", "List order ids", attachments=(episode,))
    assert result.status is Status.OK, result.reason
    assert result.value["rows"] == [[1], [2]] and result.value["truncated"] is True
    assert "more rows were left out" in result.observation
    nothing = perform(pool_with(["x"], ["database_query"]), "database_query", "List order ids")
    assert nothing.status is Status.EXEC_ERR and "no database is attached" in nothing.reason


def test_a_bound_database_cannot_be_written_even_by_code(shop):
    shop.chmod(0o666)  # only the read-only bind stands in the way
    code = json.dumps({"code": f"open({str(shop)!r}, 'ab').write(b'x')"})
    pool = pool_with([code], ["execute_python"], attachments=[{"name": "shop", "path": str(shop)}])
    before = digest(shop)
    result = perform(pool, "execute_python", "Append a byte to the shop database")
    assert result.status is Status.EXEC_ERR and "Read-only file system" in result.value["stderr"]
    assert digest(shop) == before


def test_execute_python_runs_the_workers_program_with_the_attachments(tmp_path):
    data = tmp_path / "numbers.csv"
    data.write_text("3\n4\n5\n")
    program = json.dumps({"code": "print(sum(int(x) for x in open('numbers.csv')))"})
    pool = pool_with([program], ["execute_python"])
    result = perform(
        pool, "execute_python", "Add up the numbers", attachments=(Attachment(name="numbers", path=str(data)),)
    )
    assert result.status is Status.OK, result.reason
    assert result.value["stdout"].strip() == "12" and "[output]\n12" in result.observation
    assert "numbers.csv (document 'numbers')" in requests_of(pool)[0][0].content


def test_execute_python_failures_and_limits_are_statuses():
    crash = json.dumps({"code": "raise SystemExit('no luck')"})
    spin = json.dumps({"code": "while True:\n    pass"})
    fenced = "Here you go:\n```python\nprint(2 ** 10)\n```"
    pool = pool_with([crash, spin, fenced], ["execute_python"])
    failed = perform(pool, "execute_python", "Fail")
    assert failed.status is Status.EXEC_ERR and "no luck" in failed.value["stderr"]
    spun = perform(pool, "execute_python", "Spin")
    assert spun.status is Status.TIMEOUT and "time limit" in spun.reason
    assert perform(pool, "execute_python", "Powers").value["stdout"].strip() == "1024"


def test_execute_shell_runs_posix_sh_in_the_sandbox():
    script = json.dumps({"script": "printf 'b\\na\\nb\\n' | sort | uniq -c | tr -s ' '\nreadlink /proc/$$/exe"})
    fail = json.dumps({"script": "echo partial; exit 3"})
    write = json.dumps({"script": "touch /usr/podium-test && echo wrote"})
    pool = pool_with([script, fail, write], ["execute_shell"])
    result = perform(pool, "execute_shell", "Count the letters")
    assert result.status is Status.OK, result.reason
    assert result.value["stdout"].split("\n")[:2] == [" 1 a", " 2 b"] and "sh\n" in result.value["stdout"]
    failed = perform(pool, "execute_shell", "Fail")
    assert failed.status is Status.EXEC_ERR and failed.reason == "exit code 3" and failed.value["stdout"] == "partial\n"
    denied = perform(pool, "execute_shell", "Write outside")
    assert denied.status is Status.EXEC_ERR and "wrote" not in denied.value["stdout"]


def test_execute_shell_has_no_network():
    server = Recorder(lambda method, path, body: (200, {"reached": True}, {}))
    with server.running() as url:
        port = url.rsplit(":", 1)[1]
        probe = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=2)"
        script = json.dumps({"script": f'cat /proc/net/dev\n{sys.executable} -c "{probe}" && echo connected'})
        pool = pool_with([script], ["execute_shell"])
        result = perform(pool, "execute_shell", "Reach the server")
    interfaces = [line.split(":")[0].strip() for line in result.value["stdout"].splitlines() if ":" in line]
    assert interfaces == ["lo"], "the sandbox's network namespace has only its own loopback"
    assert "connected" not in result.value["stdout"] and "ConnectionRefusedError" in result.value["stderr"]
    assert server.seen == [], "the host's server was never reached"


def test_symbolic_math_runs_the_workers_sympy_request():
    solve = json.dumps({"operation": "solve", "expression": "x**2 = 9", "variables": ["x"]})
    bad = json.dumps({"operation": "guess", "expression": "x"})
    pool = pool_with([solve, bad], ["symbolic_math"])
    result = perform(pool, "symbolic_math", "Solve x squared equals nine")
    assert result.status is Status.OK, result.reason
    assert result.value["result"] == [{"x": "-3"}, {"x": "3"}]
    refused = perform(pool, "symbolic_math", "Guess")
    assert refused.status is Status.PARSE_ERR and "sympy request is invalid" in refused.reason


def test_sandbox_limits_of_the_pool_apply_to_primitives():
    assert SANDBOX.cpu_time_s == 2
    pool = pool_with([json.dumps({"code": "print(len(bytearray(900 * 2**20)))"})], ["execute_python"])
    result = perform(pool, "execute_python", "Allocate 900 MiB")
    assert result.status is Status.EXEC_ERR and "MemoryError" in result.value["stderr"]

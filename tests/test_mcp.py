"""MCP both ways, on the official SDK: servers in a pool's `mcp_servers` (stdio and streamable HTTP) become tools with
statuses, time limits and prices, a crashing server is EXEC_ERR and comes back; `podium mcp serve` gives the pool's
tools to MCP clients. Every server is one the test starts; each is ended by the test (or by closing the pool)."""

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

mcp = pytest.importorskip("mcp")

from podium.core.calls import MAX_STORED_REASON_CHARS, MAX_STORED_VALUE_CHARS, ToolCall  # noqa: E402
from podium.errors import ConfigError  # noqa: E402
from podium.pool.config import PoolConfig  # noqa: E402
from podium.pool.pool import Pool  # noqa: E402
from podium.runtime import Executor, RunConfig  # noqa: E402
from support.mcp_pool import SCRIPT, pool_with  # noqa: E402
from support.runtime_fixtures import orchestrator  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
PODIUM = str(Path(sys.executable).with_name("podium"))


def call(pool: Pool, name: str, **arguments: object):
    return asyncio.run(pool.registry.call(ToolCall(name=name, arguments=arguments)))


def children(pattern: str) -> list[int]:
    """Pids of this process's children whose command line holds ``pattern``."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            status = (entry / "status").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, ValueError):
            continue
        if f"PPid:\t{os.getpid()}\n" in status and pattern in cmdline:
            found.append(int(entry.name))
    return found


def test_stdio_server_tools_join_the_pool_with_statuses_and_prices() -> None:
    calc = {"name": "calc", "command": SCRIPT, "cwd": str(REPO), "timeout_s": 30, "price": {"per_call_usd": 0.01}}
    slow = {"name": "slow", "command": SCRIPT, "cwd": str(REPO), "timeout_s": 1, "tools": ["sleep"]}
    pool = pool_with(calc, slow)
    try:
        assert set(pool.registry.names()) >= {"calc__add", "calc__fail", "calc__crash", "slow__sleep"}
        assert "slow__add" not in pool.registry.names()
        add = pool.registry.get("calc__add").spec
        assert add.parameters["required"] == ["a", "b"] and add.description == "Add two integers."
        added = call(pool, "calc__add", a=2, b=3)
        assert added.status == "OK" and "5" in added.observation and added.usage.usd == pytest.approx(0.01)
        assert call(pool, "calc__add", a="two", b=3).status == "PARSE_ERR"  # the MCP schema is enforced here
        failed = call(pool, "calc__fail", reason="nope")
        assert failed.status == "EXEC_ERR" and failed.usage.usd == 0.0  # a per-call price is paid when served
        assert call(pool, "slow__sleep", seconds=20).status == "TIMEOUT"
        assert len(children("support.mcp_server_script")) == 2
    finally:
        pool.close()
    assert children("support.mcp_server_script") == []


def test_a_crashing_server_is_exec_err_at_once_and_the_next_call_restarts_it() -> None:
    pool = pool_with({"name": "calc", "command": SCRIPT, "cwd": str(REPO), "timeout_s": 30})
    try:
        [first] = children("support.mcp_server_script")
        started = time.perf_counter()
        crashed = call(pool, "calc__crash")
        assert crashed.status == "EXEC_ERR" and "Connection closed" in (crashed.reason or "")
        assert time.perf_counter() - started < 10  # not a hang until the 30 s limit
        again = call(pool, "calc__shout", text="back")
        assert again.status == "OK" and again.observation == "BACK"
        assert children("support.mcp_server_script") != [first]
    finally:
        pool.close()


def test_what_a_server_returns_is_stored_within_limits_and_deep_replies_fail_at_once() -> None:
    pool = pool_with({"name": "t", "command": SCRIPT, "cwd": str(REPO), "timeout_s": 60})
    try:
        text = call(pool, "t__big", megabytes=2)
        assert text.status == "OK" and text.value_chars > 2_000_000 and len(text.value) == MAX_STORED_VALUE_CHARS
        error = call(pool, "t__big", megabytes=2, error=True)
        assert error.status == "EXEC_ERR" and error.reason_chars > 2_000_000
        assert len(error.reason) == MAX_STORED_REASON_CHARS and len(error.observation) == 16_384
        # Deeper than records keep, but readable: refused as a status. Too deep for the SDK to read the reply
        # (it names no call then): the call in flight fails at once instead of waiting out its 60 s limit.
        nested = call(pool, "t__deep", levels=100)
        assert nested.status == "EXEC_ERR" and "nested more than 64 levels deep" in (nested.reason or "")
        unreadable = call(pool, "t__deep", levels=200)
        assert unreadable.status == "EXEC_ERR", unreadable.reason
        assert "sent a reply the client cannot read" in (unreadable.reason or "")
        assert call(pool, "t__add", a=1, b=2).observation == "3"  # the session goes on
    finally:
        pool.close()


@pytest.mark.parametrize(
    ("megabytes", "limits", "reason"),
    [(40, {}, "ValidationError"), (3, {"max_reply_mb": 1}, "a line longer than 1048576 bytes")],
    ids=["40MB-not-json", "over-max_reply_mb"],
)
def test_a_huge_line_that_is_no_reply_fails_its_call_alone(megabytes, limits, reason) -> None:
    # Megabytes of non-JSON in place of a reply: that call fails at once, and the next ones are served normally
    # (the SDK's stdio reader took about 19 s over a 40 MB line, and the calls behind it timed out).
    pool = pool_with({"name": "t", "command": SCRIPT, "cwd": str(REPO), "timeout_s": 8, **limits})
    try:
        garbled = call(pool, "t__garble", megabytes=megabytes)
        assert garbled.status == "EXEC_ERR", garbled.reason
        assert "sent a reply the client cannot read" in (garbled.reason or "") and reason in (garbled.reason or "")
        after = [call(pool, "t__add", a=1, b=n) for n in range(3)]
        assert [(a.status, a.observation) for a in after] == [("OK", "1"), ("OK", "2"), ("OK", "3")], after
    finally:
        pool.close()


def test_stdio_lines_are_split_across_chunks_and_bounded() -> None:
    from podium.pool.builtin.mcp_stdio import LineSplitter, LineTooLong

    splitter = LineSplitter(limit=5)
    assert splitter.feed(b"ab") == [] and splitter.feed(b"c\nde") == [b"abc"]
    assert splitter.feed(b"f\n\n12345\n") == [b"def", b"", b"12345"]
    [too_long] = splitter.feed(b"123456")
    assert isinstance(too_long, LineTooLong) and "longer than 5 bytes" in str(too_long)
    assert splitter.feed(b"789" * 1000) == [] and splitter.feed(b"0\nok\n") == [b"ok"]  # skipped to its end


def test_mcp_tools_serve_an_episode() -> None:
    pool = pool_with({"name": "calc", "command": SCRIPT, "cwd": str(REPO)})
    try:
        backend = orchestrator(
            '<tool_call>{"name": "calc__add", "arguments": {"a": 40, "b": 2}}</tool_call>', "<answer>42</answer>"
        )
        executor = Executor(pool, RunConfig(deny=["w"]), orchestrator=backend)
        trajectory = asyncio.run(executor.run("What is 40 + 2?"))
    finally:
        pool.close()
    assert trajectory.answer == "42" and trajectory.results[0].status == "OK"
    assert "calc__add" in trajectory.messages[0].content  # listed in the system prompt like any tool


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_listening(port: int, process: subprocess.Popen) -> None:
    for _ in range(300):  # bounded: 60 s
        assert process.poll() is None, "the server exited"
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise AssertionError("the server did not listen")


def test_streamable_http_server_and_its_death() -> None:
    port = free_port()
    server = subprocess.Popen([*SCRIPT, "--http", str(port)], cwd=REPO, stderr=subprocess.DEVNULL)
    pool = None
    try:
        wait_listening(port, server)
        pool = pool_with({"name": "remote", "url": f"http://127.0.0.1:{port}/mcp", "timeout_s": 20})
        assert call(pool, "remote__add", a=1, b=2).observation == "3"
        server.send_signal(signal.SIGKILL)
        server.wait(timeout=30)
        started = time.perf_counter()
        gone = call(pool, "remote__add", a=1, b=2)
        assert gone.status == "EXEC_ERR" and time.perf_counter() - started < 15
    finally:
        if pool is not None:
            pool.close()
        if server.poll() is None:
            server.kill()
            server.wait(timeout=30)


def test_unreachable_or_misconfigured_servers_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="exactly one of command"):
        PoolConfig.from_dict({"workers": [{"name": "w", "backend": "scripted", "model": "w", "replies": ["x"]}],
                              "mcp_servers": [{"name": "x"}]})  # fmt: skip
    with pytest.raises(ConfigError, match="cannot connect"):
        pool_with({"name": "nothing", "url": f"http://127.0.0.1:{free_port()}/mcp", "connect_timeout_s": 5})
    with pytest.raises(ConfigError, match="cannot connect"):
        pool_with({"name": "dies", "command": [sys.executable, "-c", "raise SystemExit(1)"], "connect_timeout_s": 10})


def write_pool(path: Path) -> Path:
    path.write_text(
        "workers: [{name: w, backend: scripted, model: w, replies: [unused]}]\n"
        "tools: [python, symbolic_math]\nworkers_as_tools: false\n"
    )
    return path


def test_podium_mcp_serve_over_stdio_to_the_official_client(tmp_path) -> None:
    command = [PODIUM, "mcp", "serve", "--pool", str(write_pool(tmp_path / "pool.yaml")), "--allow-unisolated"]

    async def use() -> tuple[list[str], object, object]:
        parameters = mcp.StdioServerParameters(command=command[0], args=command[1:], cwd=str(REPO))
        async with mcp.Client(parameters, cache=None) as client:
            listed = await client.list_tools()
            ran = await client.call_tool("python", {"code": "print(6 * 7)"})
            wrong = await client.call_tool("python", {"source": "print(1)"})
            return [tool.name for tool in listed.tools], ran, wrong

    names, ran, wrong = asyncio.run(use())
    assert names == ["python", "symbolic_math"]
    assert not ran.is_error and ran.content[0].text.strip().startswith("42")
    assert ran.structured_content["status"] == "OK"
    assert wrong.is_error and wrong.structured_content["status"] == "PARSE_ERR"
    assert children("mcp serve") == []


def test_a_pool_uses_podium_mcp_serve_over_http(tmp_path) -> None:
    port = free_port()
    pool_file = write_pool(tmp_path / "pool.yaml")
    command = [PODIUM, "mcp", "serve", "--pool", str(pool_file), "--tool", "symbolic_math", "--allow-unisolated",
               "--transport", "http", "--port", str(port)]  # fmt: skip
    server = subprocess.Popen(command, cwd=REPO, stderr=subprocess.DEVNULL)
    try:
        wait_listening(port, server)
        pool = pool_with({"name": "podium", "url": f"http://127.0.0.1:{port}/mcp", "prefix": ""})
        try:
            assert pool.registry.names()[0] == "symbolic_math"  # a bare name: prefix ""
            solved = call(pool, "symbolic_math", operation="solve", expression="x**2 - 4")
            assert solved.status == "OK" and "-2" in solved.observation and "2" in solved.observation
        finally:
            pool.close()
    finally:
        server.terminate()
        server.wait(timeout=30)

"""Attack programs against the sandbox (issue 15): each must be contained, the host unharmed, the status clear.

Heavier loops of the same attacks (kill -9 of the parent in many rounds) are in benchmarks/bench_sandbox.py.
"""

import asyncio
import contextlib
import errno
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from podium.core import Status
from podium.sandbox import seccomp, tagged_processes
from support.host_kill import DETACHING_PROGRAMS

from .test_sandbox_support import own_sandbox, run, runs, unique_tag, wait_until_gone

ARCHITECTURE = seccomp.host_architecture()
CALL_SYSCALL = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
def call(nr, *args):
    result = libc.syscall(nr, *(ctypes.c_long(a) for a in args))
    if result == 0 and nr == {clone}:
        os._exit(0)  # a child the filter should not have let be born
    return ctypes.get_errno() if result == -1 else "allowed"
"""


@pytest.fixture(params=[True, False], ids=["cgroup", "no-cgroup"])
def sandbox(request):
    """A sandbox of this test's own, with and without a cgroup; none of its processes may be left."""
    with own_sandbox(use_cgroups=request.param) as sandbox:
        if request.param and sandbox.memory_scope() != "sandbox":
            pytest.skip(f"no cgroup here: {sandbox.cgroup_problem}")
        yield sandbox


@pytest.mark.skipif(ARCHITECTURE is None, reason="no seccomp filter for this architecture")
def test_every_denied_system_call_fails_with_eperm(sandbox):
    assert ARCHITECTURE is not None
    numbers = {name: ARCHITECTURE.numbers[name] for name in seccomp.denied_names(ARCHITECTURE)}
    program = CALL_SYSCALL.format(clone=ARCHITECTURE.numbers["clone"]) + textwrap.dedent(
        f"""
        numbers = {numbers!r}
        results = {{name: call(nr, 0, 0, 0, 0, 0, 0) for name, nr in numbers.items()}}
        results["clone(CLONE_NEWUSER)"] = call({ARCHITECTURE.numbers["clone"]}, 0x10000000 | 17, 0, 0, 0, 0)
        results["clone3"] = call({ARCHITECTURE.numbers["clone3"]}, 0, 0)
        results["socket(AF_VSOCK)"] = call({ARCHITECTURE.numbers["socket"]}, 40, 1, 0)
        results["socket(AF_PACKET)"] = call({ARCHITECTURE.numbers["socket"]}, 17, 3, 0)
        print(results)
        """
    )
    result = run(sandbox, program)
    assert result.status is Status.OK, result.stderr
    results = eval(result.stdout)
    expected = {name: errno.EPERM for name in results} | {"clone3": errno.ENOSYS}
    assert results == expected


def test_a_user_namespace_cannot_be_made_by_any_route(sandbox):
    result = run(
        sandbox,
        """
        import os, subprocess
        for command in (["unshare", "--user", "--map-root-user", "id"], ["unshare", "--user", "--net", "true"]):
            completed = subprocess.run(command, capture_output=True, text=True)
            print(completed.returncode != 0, "Operation not permitted" in completed.stderr)
        print(open("/proc/self/status").read().count("CapEff:\\t0000000000000000"))
        """,
    )
    assert result.stdout.split() == ["True", "True", "True", "True", "1"], result.stdout + result.stderr


def test_threads_and_processes_still_work_under_the_filter(sandbox):
    result = run(
        sandbox,
        """
        import concurrent.futures, multiprocessing, socket, subprocess, threading
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            print(sum(pool.map(lambda x: x * x, range(10))))
        with multiprocessing.Pool(2) as pool:
            print(sum(pool.map(abs, range(-5, 5))))
        left, right = socket.socketpair()
        left.sendall(b"pair"); print(right.recv(4).decode())
        print(subprocess.run(["echo", "child"], capture_output=True, text=True).stdout.strip())
        """,
    )
    assert result.stdout.split() == ["285", "25", "pair", "child"], result.stderr


MEMORY_BOMBS = {
    "memfd": "import os\nfd = os.memfd_create('bomb')\nwhile True:\n    os.write(fd, b'x' * (1 << 20))\n",
    "System V shared memory": (
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\nwhile True:\n"
        "    segment = libc.shmget(0, 1 << 28, 0o1600)\n"
        "    if segment < 0:\n        raise OSError(ctypes.get_errno(), 'shmget')\n"
        "    address = ctypes.c_void_p(libc.shmat(segment, None, 0))\n"
        "    ctypes.memset(address, 1, 1 << 28)\n"
    ),
    "System V message queues": (
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\nwhile True:\n"
        "    if libc.msgget(0, 0o1600) < 0:\n        raise OSError(ctypes.get_errno(), 'msgget')\n"
    ),
}


@pytest.mark.parametrize("bomb", MEMORY_BOMBS)
def test_memory_outside_the_address_space_limit_is_refused(sandbox, bomb):
    result = run(sandbox, MEMORY_BOMBS[bomb])
    assert result.status is Status.EXEC_ERR
    assert "PermissionError" in result.stderr, result.stderr  # EPERM from the seccomp filter


@pytest.mark.parametrize("directory", ["/dev/shm", "/tmp", "/scratch"])
def test_posix_shared_memory_and_tmpfs_are_capped(sandbox, directory):
    result = run(
        sandbox,
        f"""
        import sys
        with open("{directory}/bomb", "wb") as handle:
            while True:
                handle.write(b"x" * (1 << 20))
                handle.flush()
                print("#", end="", file=sys.stderr, flush=True)
        """,
    )
    assert result.status is Status.EXEC_ERR
    assert "No space left on device" in result.stderr or "File too large" in result.stderr
    assert 0 < result.stderr.count("#") <= sandbox.config.scratch_mb


def test_children_allocating_together_stay_within_the_bound(sandbox):
    limits = {"memory_mb": 250, "max_processes": 6}
    with own_sandbox(use_cgroups=sandbox.config.use_cgroups, **limits) as small:
        result = run(
            small,
            """
            import os, sys, time
            children, failed = [], 0
            for _ in range(10):
                ready, signal_ready = os.pipe()
                try:
                    pid = os.fork()
                except OSError:
                    failed += 1
                    continue
                if pid == 0:
                    hoard = bytearray(100 << 20)
                    for page in range(0, len(hoard), 4096):
                        hoard[page] = 1  # touched, not just reserved
                    os.write(signal_ready, b"1")
                    time.sleep(60)  # hold it until the sandbox ends
                    os._exit(0)
                os.close(signal_ready)
                children.append(pid)
                failed += os.read(ready, 1) != b"1"  # the child died before it held its memory
            alive = sum(os.waitpid(pid, os.WNOHANG) == (0, 0) for pid in children)
            print(alive, failed)
            sys.exit(1 if failed else 0)
            """,
        )
        alive, failed = (int(n) for n in result.stdout.split())
        assert result.status is Status.EXEC_ERR and failed > 0
        if small.memory_scope() == "sandbox":
            assert alive * 100 < limits["memory_mb"] and result.memory_exceeded
        else:  # each process under memory_mb, at most max_processes of them
            assert alive < limits["max_processes"]


def test_concurrent_calls_have_their_own_uid_and_process_limit(sandbox):
    code = """
        import os, time
        children = []
        try:
            for _ in range(40):
                pid = os.fork()
                if pid == 0:
                    time.sleep(1.5)
                    os._exit(0)
                children.append(pid)
        except OSError:
            pass
        print(os.getuid(), len(children))
        """

    async def both():
        return await asyncio.gather(*(sandbox.run_python(textwrap.dedent(code)) for _ in range(2)))

    results = asyncio.run(both())
    (uid_a, forked_a), (uid_b, forked_b) = (map(int, r.stdout.split()) for r in results)
    limit = sandbox.config.max_processes
    assert limit - 4 <= forked_a < limit and limit - 4 <= forked_b < limit
    if os.geteuid() == 0:
        assert uid_a != uid_b and uid_a >= sandbox.config.first_uid


def test_no_keyring_to_leave_anything_in(sandbox):
    code = """
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        added = libc.syscall({add_key}, b"user", b"left-behind", b"secret", 6, -4)  # the user keyring
        error = ctypes.get_errno()
        found = libc.syscall({request_key}, b"user", b"left-behind", None, 0)
        print(added, error, found, ctypes.get_errno())
        """
    assert ARCHITECTURE is not None
    code = code.format(add_key=ARCHITECTURE.numbers["add_key"], request_key=ARCHITECTURE.numbers["request_key"])
    assert [run(sandbox, code).stdout.split() for _ in range(2)] == [["-1", "1", "-1", "1"]] * 2


def test_sockets_and_fifos_under_read_only_paths_are_unreachable(tmp_path):
    exposed = tmp_path / "data"
    exposed.mkdir()
    (exposed / "regular.txt").write_text("visible")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(exposed / "service.sock"))
    server.listen()
    server.settimeout(0.2)
    os.mkfifo(exposed / "pipe")
    for special in ("service.sock", "pipe"):
        os.chmod(exposed / special, 0o777)  # reachable by anyone, were it exposed
    accepted: list[object] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                accepted.append(server.accept())
            except OSError:
                continue

    listener = threading.Thread(target=accept)
    listener.start()
    probe = f"""
        import os, socket, stat
        os.chdir({str(exposed)!r})
        print({{stat.S_IFMT(os.stat(name).st_mode) for name in os.listdir()}} == {{stat.S_IFREG}})
        client = socket.socket(socket.AF_UNIX)
        try:
            client.connect({str(exposed / "service.sock")!r}); print("connected")
        except OSError as error:
            print("socket", type(error).__name__)
        try:
            os.open({str(exposed / "pipe")!r}, os.O_WRONLY | os.O_NONBLOCK); print("fifo opened")
        except OSError as error:
            print("fifo", type(error).__name__)
        print(sorted(os.listdir({str(exposed)!r})), open({str(exposed / "regular.txt")!r}).read())
        """
    try:
        with own_sandbox(read_only_paths=[str(exposed)]) as sandbox:
            first = run(sandbox, probe)
            (exposed / "late.sock").unlink(missing_ok=True)
            late = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            late.bind(str(exposed / "late.sock"))
            late.listen()
            os.chmod(exposed / "late.sock", 0o777)
            second = run(sandbox, probe.replace("service.sock", "late.sock"))
            late.close()
    finally:
        stop.set()
        listener.join()
        server.close()
    for result in (first, second):
        lines = result.stdout.splitlines()
        assert lines[0] == "True", result.stdout  # every entry is a plain file inside
        assert lines[1].startswith("socket ") and lines[2].startswith("fifo "), result.stdout
        assert lines[3].endswith("visible")
    assert accepted == []


def test_ptrace_is_refused(sandbox):
    result = run(
        sandbox,
        """
        import ctypes, os, time
        child = os.fork()
        if child == 0:
            time.sleep(30)
            os._exit(0)
        libc = ctypes.CDLL(None, use_errno=True)
        print(libc.ptrace(16, child, None, None), ctypes.get_errno())  # PTRACE_ATTACH
        print(libc.ptrace(0, 0, None, None), ctypes.get_errno())  # PTRACE_TRACEME
        os.kill(child, 9)
        """,
    )
    assert result.stdout.splitlines() == ["-1 1", "-1 1"], result.stderr


def _start_parent(tag: str, code: str, warm: int, wall_s: float = 120) -> subprocess.Popen[bytes]:
    """A separate Python process, started by this test, running a sandbox until it is killed."""
    script = textwrap.dedent(
        f"""
        import asyncio
        from podium.sandbox import Sandbox, SandboxConfig
        sandbox = Sandbox(SandboxConfig(tag={tag!r}, wall_time_s={wall_s}, warm_sandboxes={warm}))
        asyncio.run(sandbox.run_python({code!r}))
        """
    )
    return subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _wait_for_program(tag: str, parent: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and parent.poll() is None:
        if runs(tag, "sleep"):
            return
        time.sleep(0.02)
    raise AssertionError(f"the sandboxed program never started: {parent.stderr.read() if parent.stderr else ''}")


@pytest.mark.parametrize("warm", [0, 2], ids=["cold", "warm-pool"])
def test_nothing_outlives_a_kill_9_of_its_parent(warm):
    code = "import os\nos.execv('/bin/sleep', ['sleep', '3600'])"
    for _ in range(2):
        tag = unique_tag()
        parent = _start_parent(tag, code, warm)
        try:
            _wait_for_program(tag, parent)
        finally:
            os.kill(parent.pid, signal.SIGKILL)  # the parent is this test's own process
            parent.wait()
            if parent.stderr:
                parent.stderr.close()
        assert wait_until_gone(tag) == []


@pytest.mark.parametrize("program", DETACHING_PROGRAMS)
def test_no_detached_program_outlives_a_kill_9_of_its_parent(program):
    # Nothing the program does may keep its sandbox alive once the host is gone: no process of it is left
    # within the wall-clock limit plus 2 s of the kill.
    tag, wall_s = unique_tag(), 4.0
    parent = _start_parent(tag, DETACHING_PROGRAMS[program], warm=1, wall_s=wall_s)
    try:
        _wait_for_program(tag, parent)
        time.sleep(0.2)  # the program has detached or disarmed by now
    finally:
        os.kill(parent.pid, signal.SIGKILL)  # the parent is this test's own process
        parent.wait()
        if parent.stderr:
            parent.stderr.close()
    killed = time.monotonic()
    while (left := tagged_processes(tag)) and time.monotonic() - killed < wall_s + 2:
        time.sleep(0.02)
    for pid in left:  # this test's own leftovers: end them so that a failure leaves nothing behind
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    assert left == []

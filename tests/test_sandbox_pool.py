"""The warm pool: sandboxes started ahead, each serving exactly one call, none outliving its Sandbox or Podium."""

import asyncio
import gc
import marshal
import os
import random
import signal
import subprocess
import sys
import time
from importlib.resources import files

from podium.core import Status
from podium.sandbox import Sandbox, SandboxConfig, tagged_processes
from podium.sandbox.factory import LAUNCHER
from support.host_kill import kill_busy_host

from .test_sandbox_support import SHORT_LIMITS, own_sandbox, run, runs, unique_tag, wait_until_gone

WAIT_S = 30.0
LAUNCHER_ARGUMENTS = [b"-I", b"-B", LAUNCHER.encode()]
"""What follows the interpreter on a launcher's command line (factory.py)."""
KILL_ROUNDS = 6


def waiting_launchers(tag: str) -> list[int]:
    """This test's warm sandboxes: their main launcher processes (the monitor, not the child it forked to become
    the program) while they have no program yet. A launcher is the interpreter running launcher.py, not the
    bubblewrap processes whose arguments name it: killing the outer bubblewrap leaves its sandbox to the pool's
    clean-up, so a test that picked one would wait for a sandbox nothing had killed."""
    launchers = {}
    for pid in tagged_processes(tag):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as cmdline, open(f"/proc/{pid}/environ", "rb") as environ:
                if cmdline.read().split(b"\0")[1:4] == LAUNCHER_ARGUMENTS and environ.read():
                    launchers[pid] = parent_of(pid)
        except (OSError, ValueError):
            continue
    return [
        pid
        for pid, parent in launchers.items()
        if parent not in launchers and not os.path.exists(f"/proc/{pid}/cwd/main.py")
    ]


def parent_of(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as stat:
        return int(stat.read().rpartition(")")[2].split()[1])


def eventually(condition, timeout_s: float = WAIT_S) -> bool:
    """Whether ``condition()`` becomes true within the timeout (background starts take a moment)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def test_each_call_gets_a_fresh_sandbox():
    with own_sandbox(warm_sandboxes=2) as sandbox:
        first = run(
            sandbox,
            """
            import os, subprocess
            open("/tmp/left", "w").write("x")
            subprocess.Popen(["sleep", "60"], start_new_session=True)
            os.environ["LEFT"] = "1"
            print(os.readlink("/proc/self/ns/pid"), os.readlink("/proc/self/ns/mnt"))
            """,
        )
        second = run(
            sandbox,
            """
            import os
            print(os.readlink("/proc/self/ns/pid"), os.readlink("/proc/self/ns/mnt"))
            print(os.path.exists("/tmp/left"), "LEFT" in os.environ)
            print([open(f"/proc/{p}/cmdline").read() for p in os.listdir("/proc") if p.isdigit()])
            """,
        )
    assert first.status is Status.OK and second.status is Status.OK, second.stderr
    namespaces, leftovers, processes = second.stdout.splitlines()
    assert set(namespaces.split()).isdisjoint(first.stdout.split())
    assert leftovers == "False False" and "sleep" not in processes


def test_the_pool_refills_after_each_call_and_close_empties_it():
    with own_sandbox(warm_sandboxes=2) as sandbox:
        tag = sandbox.config.tag
        for _ in range(3):
            assert run(sandbox, "print(1)").stdout == "1\n"
            assert eventually(lambda: len(waiting_launchers(tag)) == 2)
        sandbox.close()
        assert wait_until_gone(tag) == []
        assert run(sandbox, "print(2)").stdout == "2\n"  # later calls start their own sandbox
        assert waiting_launchers(tag) == []


def test_no_warm_sandbox_when_the_pool_is_off():
    with own_sandbox(warm_sandboxes=0) as sandbox:
        assert run(sandbox, "print(1)").stdout == "1\n"
        assert wait_until_gone(sandbox.config.tag) == []


def test_a_warm_sandbox_killed_from_outside_is_replaced():
    with own_sandbox(warm_sandboxes=1) as sandbox:
        tag = sandbox.config.tag
        run(sandbox, "print(1)")
        assert eventually(lambda: len(waiting_launchers(tag)) == 1)
        victim = waiting_launchers(tag)[0]
        os.kill(victim, signal.SIGKILL)  # this test's own warm sandbox
        assert wait_until_gone(tag) == []  # the whole warm sandbox died with its launcher
        assert run(sandbox, "print(2)").stdout == "2\n"


def test_garbage_collection_ends_the_warm_sandboxes():
    tag = unique_tag()
    sandbox = Sandbox(SandboxConfig(**SHORT_LIMITS, tag=tag, warm_sandboxes=2))
    run(sandbox, "print(1)")
    assert eventually(lambda: len(waiting_launchers(tag)) == 2)
    del sandbox
    gc.collect()
    assert wait_until_gone(tag) == []


def test_no_sandbox_outlives_a_host_killed_while_its_pool_is_busy():
    # Killed in any phase (bubblewrap setting a sandbox up, warm, running, torn down), none of the host's sandbox
    # processes may be left: a host killed while bubblewrap set a sandbox up used to leave its PID 1 waiting for
    # ever (bench_sandbox.py runs more rounds).
    rng = random.Random(28)
    rounds = [kill_busy_host(unique_tag(), rng=rng) for _ in range(KILL_ROUNDS)]
    assert [r.leftovers for r in rounds if r.leftovers] == []


def test_a_forked_child_does_not_keep_the_parents_warm_sandboxes_alive():
    with own_sandbox(warm_sandboxes=2) as sandbox:
        run(sandbox, "print(1)")
        assert eventually(lambda: len(waiting_launchers(sandbox.config.tag)) == 2)
        child = os.fork()
        if child == 0:  # holds on to everything it inherited except what the fork handlers closed
            time.sleep(30)
            os._exit(0)
    try:
        assert wait_until_gone(sandbox.config.tag) == []
    finally:
        os.kill(child, signal.SIGKILL)  # this test's own child
        os.waitpid(child, 0)


def test_concurrent_calls_beyond_the_pool_start_their_own():
    with own_sandbox(warm_sandboxes=2, max_concurrent=6) as sandbox:

        async def many():
            return await asyncio.gather(*(sandbox.run_python(f"print({i})") for i in range(10)))

        results = asyncio.run(many())
        assert [r.stdout for r in results] == [f"{i}\n" for i in range(10)]


def test_another_sandboxs_processes_are_not_this_tests_concern():
    with own_sandbox(warm_sandboxes=1) as other:
        run(other, "print(1)")
        with own_sandbox(warm_sandboxes=1) as mine:
            run(mine, "print(1)")
        # leaving `mine` checked only its own tag while `other` still had a warm sandbox
        assert eventually(lambda: len(waiting_launchers(other.config.tag)) == 1)


def test_the_launcher_stops_the_program_when_the_host_lets_go_of_its_stdin(tmp_path):
    # The launcher alone, without bubblewrap: the host closing the request pipe (as its death would) must kill
    # the program at once, however busy it is.
    tag = unique_tag()
    report_read, report_write = os.pipe()
    launcher = subprocess.Popen(
        [sys.executable, "-I", "-B", str(files("podium.sandbox") / "launcher.py"), "-", "60", tag, str(report_write)],
        stdin=subprocess.PIPE,
        pass_fds=[report_write],
        cwd=tmp_path,
        env={"PODIUM_SANDBOX_TAG": tag, "PATH": "/usr/bin:/bin"},
        start_new_session=True,
    )
    os.close(report_write)
    payload = marshal.dumps({"main.py": b"import os\nos.execv('/bin/sleep', ['sleep', '3600'])"})
    assert launcher.stdin is not None
    launcher.stdin.write(len(payload).to_bytes(8, "little") + payload)
    launcher.stdin.flush()
    try:
        assert eventually(lambda: runs(tag, "sleep"))
    finally:
        launcher.stdin.close()
        launcher.wait()
        os.close(report_read)
    assert launcher.returncode == -signal.SIGKILL
    assert wait_until_gone(tag) == []

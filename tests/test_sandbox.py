"""Adversarial suite: untrusted code must be contained, the host unharmed, the status clear."""

import asyncio
import contextlib
import os
import shutil
import socket
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from podium.core import Status
from podium.errors import SandboxUnavailableError
from podium.sandbox import Sandbox, SandboxConfig

from .test_sandbox_support import own_sandbox, run


@pytest.fixture
def sandbox():
    """A sandbox of this test's own; afterwards none of its processes may be left."""
    with own_sandbox() as sandbox:
        yield sandbox


def test_isolation_is_bubblewrap(sandbox):
    assert sandbox.isolation() == "bubblewrap"


def test_ordinary_code_runs_and_output_is_verbatim(sandbox):
    result = run(sandbox, "import sys\nprint('  spaced\\tout  ')\nprint('oops', file=sys.stderr)\n")
    assert result.status is Status.OK and result.isolated
    assert result.stdout == "  spaced\tout  \n"
    assert result.stderr == "oops\n"


def test_errors_come_back_as_the_program_printed_them(sandbox):
    result = run(sandbox, "def f():\n    return 1 / 0\nf()\n")
    assert result.status is Status.EXEC_ERR and result.exit_code == 1
    assert 'File "main.py", line 2, in f' in result.stderr
    assert result.stderr.rstrip().endswith("ZeroDivisionError: division by zero")
    assert "launcher" not in result.stderr


@pytest.mark.parametrize(
    ("ending", "exit_code", "stderr"),
    [("", 0, ""), ("sys.exit()", 0, ""), ("sys.exit(3)", 3, ""), ("sys.exit('no way')", 1, "no way\n")],
)
def test_the_program_ends_as_python_would(sandbox, ending, exit_code, stderr):
    # The launcher leaves without tearing the interpreter down: what a Python exit does must still happen
    # (non-daemon threads joined, exit handlers run, buffered output flushed) and the status be the same.
    code = f"""
        import atexit, sys, threading, time
        atexit.register(lambda: print("handler ran", end=""))
        threading.Thread(target=lambda: (time.sleep(0.2), print("thread done"))).start()
        print("no newline, still buffered; ", end="")
        {ending}
        """
    result = run(sandbox, code)
    assert result.exit_code == exit_code and result.stderr == stderr
    assert result.stdout == "no newline, still buffered; thread done\nhandler ran"


def test_no_network_not_even_the_hosts_loopback(sandbox):
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    accepted = []
    server.settimeout(0.5)

    def accept():
        with contextlib.suppress(OSError):
            accepted.append(server.accept())

    listener = threading.Thread(target=accept)
    listener.start()
    result = run(
        sandbox,
        f"""
        import socket
        print(socket.if_nameindex())
        try:
            socket.create_connection(("127.0.0.1", {port}), timeout=2)
            print("connected")
        except OSError as error:
            print("blocked", type(error).__name__)
        """,
    )
    listener.join()
    server.close()
    assert result.stdout.splitlines() == ["[(1, 'lo')]", "blocked ConnectionRefusedError"]
    assert accepted == []


def test_host_files_are_invisible(sandbox, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("the host's secret")
    project_file = Path(__file__).resolve()
    result = run(
        sandbox,
        f"""
        import os
        for path in [{str(secret)!r}, {str(project_file)!r}, "/etc/passwd", "/etc/shadow", "/root/.bashrc",
                     "/proc/1/root/etc/hostname"]:
            try:
                print(path, open(path).read()[:20])
            except OSError as error:
                print(path, "denied", type(error).__name__)
        print(sorted(os.listdir("/")))
        """,
    )
    assert "the host's secret" not in result.stdout
    assert result.stdout.count("denied") == 6, result.stdout
    top_level = eval(result.stdout.splitlines()[-1])
    assert "home" not in top_level and "scratch" in top_level


def test_writes_only_land_in_scratch(sandbox, tmp_path):
    target = tmp_path / "written-by-sandbox.txt"
    venv_marker = Path(sys.prefix) / "written-by-sandbox.txt"
    result = run(
        sandbox,
        f"""
        import os
        for path in [{str(target)!r}, {str(venv_marker)!r}, "/usr/evil", "/evil", "/podium/launcher.py",
                     "/dev/evil", "/proc/evil", "/etc/evil"]:
            try:
                with open(path, "w") as handle:
                    handle.write("x")
                print(path, "WRITTEN")
            except OSError as error:
                print(path, "refused", type(error).__name__)
        open("here.txt", "w").write("scratch ok")
        open("/tmp/t.txt", "w").write("tmp ok")
        print(open("/scratch/here.txt").read(), open("/tmp/t.txt").read(), os.getcwd())
        """,
    )
    assert "WRITTEN" not in result.stdout, result.stdout
    assert result.stdout.count("refused") == 8
    assert result.stdout.splitlines()[-1] == "scratch ok tmp ok /scratch"
    assert not target.exists() and not venv_marker.exists()


def test_scratch_is_fresh_for_every_call_and_holds_the_given_files(sandbox):
    first = run(
        sandbox,
        """
        import os
        open("left.txt", "w").write("x")
        open("/tmp/left.txt", "w").write("x")
        print(sorted(os.listdir(".")))
        """,
    )
    assert first.stdout.strip() == "['left.txt', 'main.py']"
    assert run(sandbox, "import os\nprint(os.path.exists('/tmp/left.txt'))").stdout.strip() == "False"
    second = run(sandbox, "import os; print(sorted(os.listdir('.')), open('data.csv').read())", **{"data.csv": "a,b"})
    assert second.stdout.strip() == "['data.csv', 'main.py'] a,b"


def test_scratch_space_is_capped(sandbox):
    result = run(sandbox, "open('big', 'wb').write(b'x' * (200 << 20))")
    assert result.status is Status.EXEC_ERR
    assert "OSError" in result.stderr or "MemoryError" in result.stderr


def test_fork_bomb_is_contained(sandbox):
    counted = run(
        sandbox,
        """
        import os, time
        children = 0
        try:
            for _ in range(500):
                if os.fork() == 0:
                    time.sleep(30)
                    os._exit(0)
                children += 1
        except OSError as error:
            print("refused", error.errno)
        print(children)
        """,
    )
    assert counted.stdout.splitlines()[0] == "refused 11"  # EAGAIN from the process limit
    assert int(counted.stdout.splitlines()[1]) < sandbox.config.max_processes
    bomb = run(sandbox, "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n")
    assert bomb.status is Status.TIMEOUT
    assert subprocess.run(["true"], check=False).returncode == 0  # the host can still start processes


def test_memory_bomb_is_contained(sandbox):
    result = run(sandbox, "hoard = []\nwhile True:\n    hoard.append(bytearray(50 << 20))\n")
    assert result.status is Status.EXEC_ERR
    assert "MemoryError" in result.stderr


def test_infinite_loop_hits_the_cpu_limit():
    with own_sandbox(wall_time_s=60) as sandbox:  # wall time to spare even on a crowded machine
        result = run(sandbox, "while True:\n    pass\n")
    assert result.status is Status.TIMEOUT and result.cpu_timeout
    assert result.reason == "CPU time limit (2 s) exceeded"


def test_sleeping_forever_hits_the_wall_clock_limit(sandbox):
    result = run(sandbox, "import time\nprint('before', flush=True)\ntime.sleep(3600)\n")
    assert result.status is Status.TIMEOUT and result.wall_timeout
    assert result.reason == "wall-clock time limit (6 s) exceeded; the sandbox was killed"
    assert result.stdout == "before\n"
    assert result.seconds < sandbox.config.wall_time_s + 5


def test_huge_output_is_capped_and_the_program_stopped(sandbox):
    result = run(sandbox, "import sys\nwhile True:\n    sys.stdout.write('x' * 4096)\n    sys.stderr.write('y')\n")
    assert result.status is Status.EXEC_ERR and result.output_overflow
    assert len(result.stdout) + len(result.stderr) == sandbox.config.max_output_bytes
    assert set(result.stdout) == {"x"}


def test_killing_the_parent_or_everyone_harms_only_the_sandbox(sandbox):
    host_pid = os.getpid()
    result = run(
        sandbox,
        f"""
        import os, signal
        for pid in [{host_pid}, os.getppid(), 1]:
            try:
                os.kill(pid, signal.SIGKILL)
                print(pid, "killed")
            except OSError as error:
                print(pid, type(error).__name__)
        os.kill(-1, signal.SIGKILL)
        """,
    )
    lines = result.stdout.splitlines()
    assert lines[0] in (f"{host_pid} ProcessLookupError", f"{host_pid} PermissionError")  # not even visible
    if os.geteuid() == 0:  # the monitor keeps uid 0, the program runs as another uid
        assert lines[1].endswith("PermissionError") and lines[2].endswith("PermissionError")
    os.kill(host_pid, 0)  # still here


def test_detached_background_processes_die_with_the_call(sandbox):
    result = run(
        sandbox,
        """
        import os, time
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                time.sleep(3600)
            os._exit(0)
        print("parent leaves")
        """,
    )
    assert result.status is Status.OK
    # the fixture checks that none of this sandbox's processes is left on the host


def test_parent_environment_is_not_inherited(sandbox, monkeypatch):
    monkeypatch.setenv("PODIUM_TEST_SECRET_TOKEN", "hunter2-secret")
    result = run(
        sandbox,
        """
        import os
        print(dict(os.environ))
        for pid in os.listdir("/proc"):
            if pid.isdigit():
                try:
                    print(open(f"/proc/{pid}/environ", "rb").read())
                except OSError as error:
                    print(pid, type(error).__name__)
        """,
    )
    assert result.status is Status.OK
    assert "hunter2" not in result.stdout and "PODIUM_TEST_SECRET" not in result.stdout
    assert "'HOME': '/scratch'" in result.stdout


def test_code_runs_unprivileged(sandbox):
    result = run(
        sandbox,
        """
        import os
        status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines())
        print(os.getuid(), status["CapEff"].strip(), status["NoNewPrivs"].strip())
        """,
    )
    uid, capabilities, no_new_privileges = result.stdout.split()
    assert uid != "0" and int(capabilities, 16) == 0 and no_new_privileges == "1"


def test_missing_bubblewrap_is_refused_with_a_clear_error():
    sandbox = Sandbox(SandboxConfig(bwrap="/nonexistent/bwrap"))
    with pytest.raises(SandboxUnavailableError, match="apt-get install bubblewrap"):
        asyncio.run(sandbox.run_python("print(1)"))


def test_a_sandbox_that_cannot_be_set_up_is_an_error_not_a_result(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    with own_sandbox(read_only_paths=[str(data)], warm_sandboxes=0) as sandbox:
        assert run(sandbox, "print(1)").stdout == "1\n"
        data.rmdir()
        with pytest.raises(SandboxUnavailableError, match=f"Can't find source path {data}"):
            run(sandbox, "print(2)")


def test_unisolated_execution_only_when_opted_in(monkeypatch):
    monkeypatch.setenv("PODIUM_TEST_SECRET_TOKEN", "hunter2-secret")
    with own_sandbox(bwrap="/nonexistent/bwrap", allow_unisolated=True, cpu_time_s=1, wall_time_s=60) as sandbox:
        assert sandbox.isolation() == "none"
        result = run(sandbox, "import os\nprint(6*7, dict(os.environ))")
        assert result.status is Status.OK and not result.isolated
        assert result.stdout.startswith("42") and "hunter2" not in result.stdout
        looping = run(sandbox, "while True: pass")
        assert looping.status is Status.TIMEOUT and looping.reason == "CPU time limit (1 s) exceeded"
        background = run(sandbox, "import subprocess\nsubprocess.Popen(['sleep', '3600'])\nprint('left')")
        assert background.status is Status.OK and background.stdout == "left\n"


def test_file_names_must_stay_in_scratch(sandbox):
    with pytest.raises(ValueError, match="plain names"):
        asyncio.run(sandbox.run_python("", files={"../escape": "x"}))


def test_many_calls_run_concurrently(sandbox):
    async def many():
        return await asyncio.gather(*(sandbox.run_python(f"print({i})") for i in range(12)))

    results = asyncio.run(many())
    assert [r.stdout.strip() for r in results] == [str(i) for i in range(12)]


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("runuser") is None, reason="needs root to become another user")
def test_sandbox_works_for_an_unprivileged_user():
    # Podium run by an ordinary user takes the user-namespace path of bubblewrap.
    system_python = Path("/usr/bin/python3")
    probe = subprocess.run(
        [system_python, "-c", "import sys; print(sys.version_info[:2])"], capture_output=True, text=True
    )
    if probe.returncode != 0 or probe.stdout.strip() != str(sys.version_info[:2]):
        pytest.skip("no system Python of the same version for the unprivileged user")
    site_packages = next(p for p in sys.path if p.endswith("site-packages"))
    source = str(Path(__file__).resolve().parents[1] / "src")
    script = textwrap.dedent(
        """
        import asyncio
        from podium.sandbox import Sandbox, SandboxConfig
        sandbox = Sandbox(SandboxConfig(python="/usr/bin/python3", cpu_time_s=2, wall_time_s=10, max_processes=16))
        code = (
            "import os, time\\nn = 0\\ntry:\\n    for _ in range(100):\\n        if os.fork() == 0:\\n"
            "            time.sleep(5)\\n            os._exit(0)\\n        n += 1\\nexcept OSError:\\n    pass\\n"
            "print(os.getuid(), n)"
        )
        result = asyncio.run(sandbox.run_python(code))
        print(sandbox.isolation(), result.status, result.stdout.strip())
        """
    )
    completed = subprocess.run(
        [
            "runuser",
            "-u",
            "nobody",
            "--",
            "env",
            f"PYTHONPATH={source}:{site_packages}",
            str(system_python),
            "-c",
            script,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd="/",
    )
    assert completed.returncode == 0, completed.stderr
    isolation, status, uid, forked = completed.stdout.split()
    assert (isolation, status) == ("bubblewrap", "OK")
    assert int(forked) < 16 and uid != "0"

"""Statuses are decided by what the sandbox measured, not by the signal alone: a kill at the CPU-time limit is
TIMEOUT whichever signal the kernel sent, other kills are EXEC_ERR, and the limit is named in the reason."""

import pytest

from podium.core import Status

from .test_sandbox_support import own_sandbox, run


@pytest.fixture(params=[True, False], ids=["cgroup", "no-cgroup"])
def sandbox(request):
    """A sandbox with a 1-second CPU limit (and wall time to spare on a crowded machine), with and without a
    cgroup."""
    with own_sandbox(cpu_time_s=1, wall_time_s=60, use_cgroups=request.param) as sandbox:
        if request.param and sandbox.memory_scope() != "sandbox":
            pytest.skip(f"no cgroup here: {sandbox.cgroup_problem}")
        yield sandbox


def test_cpu_limit_is_a_timeout_at_the_soft_limit(sandbox):
    result = run(sandbox, "while True:\n    pass\n")
    assert (result.status, result.signal, result.reason) == (
        Status.TIMEOUT,
        "SIGXCPU",
        "CPU time limit (1 s) exceeded",
    )
    assert result.cpu_seconds is not None and result.cpu_seconds > 0.25  # see CPU_LIMIT_SHARE


def test_cpu_limit_is_a_timeout_when_the_kernel_sends_sigkill(sandbox):
    # A program that ignores SIGXCPU runs on to the hard limit, where the kernel sends SIGKILL: the same kill
    # as a SIGXCPU that came late, which the old status logic reported as EXEC_ERR.
    result = run(sandbox, "import signal\nsignal.signal(signal.SIGXCPU, signal.SIG_IGN)\nwhile True:\n    pass\n")
    assert (result.status, result.signal, result.reason) == (
        Status.TIMEOUT,
        "SIGKILL",
        "CPU time limit (1 s) exceeded",
    )


@pytest.mark.parametrize("signal_name", ["SIGKILL", "SIGXCPU"])
def test_the_same_signals_below_the_cpu_limit_are_errors(sandbox, signal_name):
    result = run(sandbox, f"import os, signal\nos.kill(os.getpid(), signal.{signal_name})\n")
    assert (result.status, result.reason) == (Status.EXEC_ERR, f"killed by {signal_name}")
    assert result.cpu_seconds is not None and result.cpu_seconds < 0.25


def test_a_cpu_hungry_child_is_stopped_too(sandbox):
    result = run(
        sandbox,
        """
        import os
        pid = os.fork()
        if pid == 0:
            while True:
                pass
        print(os.waitpid(pid, 0)[1] & 0x7F)
        """,
    )
    assert result.status is Status.OK and int(result.stdout) in (9, 24)  # SIGKILL or SIGXCPU


def test_whole_sandbox_memory_counts_tmpfs_files_too():
    with own_sandbox(memory_mb=200, scratch_mb=64) as sandbox:
        if sandbox.memory_scope() != "sandbox":
            pytest.skip(f"no cgroup here: {sandbox.cgroup_problem}")
        result = run(
            sandbox,
            """
            for directory in ("/tmp", "/scratch", "/dev/shm"):
                with open(f"{directory}/fill", "wb") as handle:
                    handle.write(b"x" * (60 << 20))
            hoard = bytearray(100 << 20)
            for page in range(0, len(hoard), 4096):
                hoard[page] = 1
            print("all held")
            """,
        )
    assert result.status is Status.EXEC_ERR and result.memory_exceeded
    assert result.reason == "memory limit (200 MiB) exceeded; a process was killed"
    assert "all held" not in result.stdout

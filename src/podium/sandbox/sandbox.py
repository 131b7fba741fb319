"""A sandbox for model-written Python: bubblewrap namespaces, a seccomp filter, cgroup and resource limits.

Isolation (bubblewrap): new PID, network, IPC, UTS and cgroup namespaces (the network namespace has only its
own loopback); a read-only view of the system directories, the Python installation and the configured paths,
in which only regular files and directories are reachable (see :mod:`podium.sandbox.mounts`); size-capped
tmpfs mounts, new for every call, as the only writable places (``/scratch``, the working directory, ``/tmp``
and ``/dev/shm``); a clean environment; a new session; all capabilities dropped; a seccomp filter denying the
system calls listed in :mod:`podium.sandbox.seccomp`; when Podium runs as root, a host uid of its own per
live sandbox (:mod:`podium.sandbox.uids`), otherwise a user namespace of its own.

Limits: CPU seconds per process, wall-clock time, memory, processes, open files, file size and output bytes.
Memory is limited for the whole sandbox where a cgroup can be created (:mod:`podium.sandbox.cgroups`):
processes, tmpfs files and shared memory together stay under ``memory_mb``, and ``pids.max`` bounds the
processes. Without cgroups the bound is per process and documented: each process's address space is at most
``memory_mb`` (RLIMIT_AS), there are at most ``max_processes`` of them (RLIMIT_NPROC, counted for the
sandbox's own uid or user namespace), memory that address-space limits do not count is denied (memfd, System
V shared memory) or capped (the three tmpfs mounts hold at most ``scratch_mb`` each); so the sandbox holds at
most ``max_processes × memory_mb + 3 × scratch_mb``.

Statuses: TIMEOUT at the wall-clock limit, and at the CPU-time limit whichever signal the kernel used
(SIGXCPU at the soft limit, SIGKILL at the hard one): the launcher's monitor measures the program's CPU time,
and such a kill counts as the CPU limit's when that time shows the program spent a good part of its limit
(``CPU_LIMIT_SHARE``), and, for SIGKILL, the cgroup saw no out-of-memory kill. Every limit that stops a
program is named, with its value, in the reason.

Lifetime: no sandbox outlives its wall-clock limit or Podium, in any phase (bubblewrap setting it up, warm,
running, after its program detached), whatever the program does. The launcher is the sandbox's PID 1, and when a
PID namespace's first process exits, the kernel kills every other process in it: no session, process group,
parent-death setting or double fork escapes that. The launcher exits when the host lets go of the sandbox's stdin
(the host alone holds its write end: when the host dies, kill -9 included, the pipe hangs up), at the wall-clock
limit plus a grace (so that the limit holds without the host too), and once the program has ended (see
launcher.py). The host also kills PID 1 itself at the wall-clock limit. Why not bubblewrap's own mechanisms:
``--die-with-parent`` would strand a sandbox whose host died while bubblewrap was setting it up (see
``SandboxFactory.bubblewrap``), and bubblewrap's own PID 1 waits for every process of the sandbox, so a
program's orphan that never ends keeps it alive. A cgroup kill needs a live process to write it, which the host's
death takes away; the cgroup serves the limits, and the host's clean-up.

Each call gets a new sandbox. ``warm_sandboxes`` of them are started ahead (:mod:`podium.sandbox.pool`), so
that a call usually finds one ready: it then costs the program's own run plus a few milliseconds.

Without bubblewrap the sandbox refuses to run anything unless ``allow_unisolated`` is set; then code runs
as a plain subprocess with the same limits (but no process limit) in a temporary directory: no isolation.
"""

import asyncio
import marshal
import signal
import weakref
from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import dataclass

from podium.concurrency import LoopSemaphore
from podium.core.calls import Status
from podium.errors import SandboxUnavailableError
from podium.sandbox.cgroups import CgroupHost
from podium.sandbox.config import SandboxConfig
from podium.sandbox.factory import SandboxFactory
from podium.sandbox.pool import WarmPool
from podium.sandbox.process import Cleaner, Finished, SandboxProcess, Spawner
from podium.sandbox.seccomp import build_filter, host_architecture

# bubblewrap reports a child killed by signal N as exit status 128 + N.
SIGNAL_EXIT_OFFSET = 128
CPU_SIGNALS = ("SIGXCPU", "SIGKILL")
# The kernel checks RLIMIT_CPU against tick-sampled CPU time, which on a busy machine can be far from the precise
# time wait4 reports: a CPU hog sharing its core with short-lived tasks is charged their ticks too (a program
# killed at a 2 s limit has shown 1.6 s under a load of 10 on 2 cores), a program that often sleeps is charged
# less. So SIGXCPU or SIGKILL counts as the CPU limit's when the program used at least this share of the limit:
# enough to set apart a program that sends itself the signal early, loose enough for any load seen.
CPU_LIMIT_SHARE = 0.25


@dataclass(frozen=True)
class SandboxRun:
    """What a sandboxed program did."""

    stdout: str
    stderr: str
    exit_code: int | None
    """Exit status (128 + N when killed by signal N), or None when it was killed at the wall-clock limit."""
    signal: str | None
    """Name of the signal that ended it, if one did."""
    wall_timeout: bool
    output_overflow: bool
    isolated: bool
    seconds: float
    cpu_timeout: bool = False
    """Stopped at its CPU-time limit, whichever signal the kernel used."""
    memory_exceeded: bool = False
    """The kernel killed one of its processes at the sandbox's memory limit."""
    cpu_seconds: float | None = None
    """CPU time of the program and the children it waited for, when it ended by itself."""
    limit_reason: str | None = None
    """Which limit stopped it, with the limit's value."""

    @property
    def status(self) -> Status:
        if self.wall_timeout or self.cpu_timeout:
            return Status.TIMEOUT
        return Status.OK if self.exit_code == 0 and not self.output_overflow else Status.EXEC_ERR

    @property
    def reason(self) -> str | None:
        if self.limit_reason is not None and self.status is not Status.OK:
            return self.limit_reason
        if self.signal is not None:
            return f"killed by {self.signal}"
        if self.exit_code:
            return f"exit code {self.exit_code}"
        return None


class Sandbox:
    """Runs Python code under the configured isolation and limits; safe to share across tasks and loops."""

    def __init__(self, config: SandboxConfig | None = None) -> None:
        self.config = config or SandboxConfig()
        self._isolated: bool | None = None
        self._running = LoopSemaphore(self.config.max_concurrent)
        self._factory: SandboxFactory | None = None
        self._pool: WarmPool | None = None
        self.cgroup_problem: str | None = None
        """Why sandboxes have no cgroup (None when they have one, or before the first run)."""

    def isolation(self) -> str:
        """``bubblewrap``, or ``none`` when running unisolated by the user's choice; raises if neither."""
        if self._isolated is None:
            factory, problem = self._make_factory()
            if problem is not None and not self.config.allow_unisolated:
                factory.close()
                raise SandboxUnavailableError(
                    f"cannot isolate code: {problem}. Install bubblewrap (Debian/Ubuntu: apt-get install "
                    "bubblewrap) or, for trusted code only, allow unisolated execution (allow_unisolated: true, "
                    "or --allow-unisolated)"
                )
            factory.isolated = problem is None
            if not factory.isolated:
                factory.cgroups = None
            self._factory = factory
            self._pool = WarmPool(self.config.warm_sandboxes, factory.start)
            self._pool.fill()
            weakref.finalize(self, _shut_down, self._pool, factory)
            self._isolated = problem is None
        return "bubblewrap" if self._isolated else "none"

    def memory_scope(self) -> str:
        """``sandbox`` when one cgroup limits all of a sandbox's memory, ``process`` when each process's is."""
        self.isolation()
        return "sandbox" if self._factory is not None and self._factory.cgroups is not None else "process"

    async def run_python(self, code: str, files: Mapping[str, str | bytes] | None = None) -> SandboxRun:
        """Run ``code`` as ``main.py`` in a fresh scratch directory holding ``files`` (name → content)."""
        isolated = self.isolation() == "bubblewrap"
        inputs = {"main.py": code, **(files or {})}
        for name in inputs:
            if "/" in name or name in ("", ".", "..") or "\0" in name:
                raise ValueError(f"sandbox file names must be plain names, got {name!r}")
        payload = marshal.dumps({n: c.encode() if isinstance(c, str) else bytes(c) for n, c in inputs.items()})
        request = len(payload).to_bytes(8, "little") + payload
        async with self._running:
            process = await self._acquire()
            try:
                finished = await process.run(request, self.config.wall_time_s, self.config.max_output_bytes)
            finally:
                assert self._pool is not None
                self._pool.fill()
        return self._describe(finished, isolated=isolated)

    def close(self) -> None:
        """Kill the warm sandboxes and keep none from now on (later calls each start their own sandbox)."""
        if self._pool is not None:
            self._pool.close()

    async def _acquire(self) -> SandboxProcess:
        assert self._pool is not None and self._factory is not None
        warm = self._pool.take()
        if warm is not None and self._factory.isolated and warm.spec.hidden != self._factory.special_files():
            # A socket or FIFO appeared in a read-only path since this sandbox started: it would be reachable.
            Cleaner.submit(warm.dispose)
            warm = None
        if warm is not None:
            return warm
        starting = Spawner.submit(self._factory.start)
        try:
            return await asyncio.wrap_future(starting)
        except asyncio.CancelledError:  # the sandbox may still arrive: it must not be left waiting
            starting.add_done_callback(_dispose_unused)
            raise

    def _make_factory(self) -> tuple[SandboxFactory, str | None]:
        architecture = host_architecture()
        seccomp = build_filter(architecture) if architecture is not None else b""
        cgroups = None
        if self.config.use_cgroups:
            probed = CgroupHost.probe()
            cgroups, self.cgroup_problem = (probed, None) if isinstance(probed, CgroupHost) else (None, probed)
        else:
            self.cgroup_problem = "disabled by the configuration (use_cgroups: false)"
        factory = SandboxFactory(self.config, isolated=True, cgroups=cgroups, seccomp=seccomp)
        if architecture is None:
            return factory, "no seccomp filter is known for this machine's architecture"
        return factory, factory.probe()

    def _describe(self, finished: Finished, *, isolated: bool) -> SandboxRun:
        exit_code, signal_name, cpu_seconds = _outcome(finished, isolated=isolated)
        assert self._factory is not None
        cpu_limit = self._factory.cpu_limit_s()
        if cpu_seconds is not None:  # measured: a kill at the CPU limit, whichever signal the kernel sent
            out_of_memory = signal_name == "SIGKILL" and finished.oom_killed
            cpu_timeout = signal_name in CPU_SIGNALS and cpu_seconds >= CPU_LIMIT_SHARE * cpu_limit
            cpu_timeout = cpu_timeout and not out_of_memory
        else:
            cpu_timeout = signal_name == "SIGXCPU"
        cpu_timeout = cpu_timeout and not finished.wall_timeout
        return SandboxRun(
            stdout=finished.stdout.decode("utf-8", errors="replace"),
            stderr=finished.stderr.decode("utf-8", errors="replace"),
            exit_code=None if finished.wall_timeout else exit_code,
            signal=None if finished.wall_timeout else signal_name,
            wall_timeout=finished.wall_timeout,
            output_overflow=finished.output_overflow,
            isolated=isolated,
            seconds=finished.seconds,
            cpu_timeout=cpu_timeout,
            memory_exceeded=finished.oom_killed,
            cpu_seconds=cpu_seconds,
            limit_reason=self._limit_reason(finished, cpu_timeout=cpu_timeout, cpu_limit=cpu_limit),
        )

    def _limit_reason(self, finished: Finished, *, cpu_timeout: bool, cpu_limit: int) -> str | None:
        """Which limit stopped the program, with its value; the first that applies of wall, CPU, output, memory."""
        config = self.config
        if finished.wall_timeout:
            return f"wall-clock time limit ({config.wall_time_s:g} s) exceeded; the sandbox was killed"
        if cpu_timeout:
            return f"CPU time limit ({cpu_limit} s) exceeded"
        if finished.output_overflow:
            return f"output limit ({config.max_output_bytes} bytes) exceeded; the program was stopped"
        if finished.oom_killed:
            return f"memory limit ({config.memory_mb} MiB) exceeded; a process was killed"
        return None


def _outcome(finished: Finished, *, isolated: bool) -> tuple[int | None, str | None, float | None]:
    """(exit status as bubblewrap reports it, name of the signal that ended the program, its CPU seconds)."""
    report = _parse_report(finished.report)
    if report is not None:  # the launcher's monitor saw how the program ended and measured its CPU time
        kind, value, cpu_seconds = report
        if kind == "signaled":
            return SIGNAL_EXIT_OFFSET + value, _signal_name(value), cpu_seconds
        return value, None, cpu_seconds
    # No report: the sandbox was killed (limits, cancellation) before the monitor could write one.
    exit_code = finished.returncode
    signal_name = _returncode_signal(exit_code, isolated=isolated)
    if exit_code is not None and exit_code < 0:  # killed by a signal, unisolated: report it as bubblewrap does
        exit_code = SIGNAL_EXIT_OFFSET - exit_code
    return exit_code, signal_name, None


def _dispose_unused(starting: "Future[SandboxProcess]") -> None:
    if not starting.cancelled() and starting.exception() is None:
        starting.result().dispose()


def _shut_down(pool: WarmPool, factory: SandboxFactory) -> None:
    pool.close()
    factory.close()


def _parse_report(data: bytes) -> tuple[str, int, float] | None:
    """The launcher's line: (``exited`` or ``signaled``, code or signal number, CPU seconds); None if absent."""
    parts = data.decode("ascii", errors="replace").split()
    if len(parts) != 3 or parts[0] not in ("exited", "signaled"):
        return None
    try:
        return parts[0], int(parts[1]), float(parts[2])
    except ValueError:
        return None


def _signal_name(number: int) -> str | None:
    try:
        return signal.Signals(number).name
    except ValueError:
        return None


def _returncode_signal(code: int | None, *, isolated: bool) -> str | None:
    """The signal a process died of, from its return code (bubblewrap's 128 + N, or Python's -N)."""
    if code is None:
        return None
    if code < 0:
        return _signal_name(-code)
    if isolated and code > SIGNAL_EXIT_OFFSET:
        return _signal_name(code - SIGNAL_EXIT_OFFSET)
    return None

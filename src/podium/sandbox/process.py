"""Sandbox processes from the host's side: starting one, giving it its program, collecting what it did.

Sandbox processes are started on a few background threads (starting one blocks while bubblewrap sets it
up). Talking to a started process needs no thread: its pipes and pidfds are watched by whichever event loop
runs the call, so a process started during one ``asyncio.run`` serves a call in another.
Cleaning up after a call (waiting for the sandbox's last process, removing its cgroup, giving back its uid)
happens on a background thread, off the call's path.
"""

import asyncio
import contextlib
import json
import os
import select
import shutil
import signal
import subprocess
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from podium.errors import SandboxUnavailableError
from podium.sandbox.cgroups import SandboxCgroup
from podium.sandbox.pipes import CappedOutput, drain, pump, read_line, readable, write_all
from podium.sandbox.uids import UidLease

SPAWN_THREADS = 2
LAST_PROCESS_WAIT_S = 10.0


@dataclass
class LaunchSpec:
    """How to start one sandbox process, and what it holds on the host until it is cleaned up."""

    command: list[str]
    pass_fds: list[int]
    """Descriptors the process inherits; the host's copies are closed once it has started."""
    cwd: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    info_fd: int = -1
    """Read end of bubblewrap's --info-fd pipe (isolated sandboxes), where it says the sandbox's PID 1."""
    cgroup: SandboxCgroup | None = None
    uid: UidLease | None = None
    report_fd: int = -1
    """Read end of the pipe the launcher reports on (see launcher.py)."""
    directory: str | None = None
    """A temporary directory to delete afterwards (unisolated runs)."""
    hidden: frozenset[str] = frozenset()
    """The sockets and FIFOs of the read-only paths this sandbox covers (as they were when it started)."""

    def close_descriptors(self) -> None:
        """Close this process's descriptors of the spec (the uid lease among them), once."""
        for fd in (self.report_fd, self.info_fd):
            if fd >= 0:
                os.close(fd)
        self.report_fd = self.info_fd = -1
        if self.uid is not None:
            self.uid.release()

    def release(self) -> None:
        """Give back what the spec holds: descriptors, cgroup (killing what is left in it), uid, directory."""
        if self.cgroup is not None:
            self.cgroup.remove()
        self.close_descriptors()
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)


@dataclass
class Finished:
    """What came back from one sandbox process."""

    stdout: bytes
    stderr: bytes
    returncode: int | None
    report: bytes
    """The launcher's report (empty when it was killed before it could write it)."""
    wall_timeout: bool
    output_overflow: bool
    oom_killed: bool
    seconds: float


class SandboxProcess:
    """A started sandbox waiting for its program; used for exactly one call, then disposed of."""

    def __init__(self, popen: subprocess.Popen[bytes], spec: LaunchSpec) -> None:
        self.popen = popen
        self.spec = spec
        self.owner = os.getpid()
        self.pidfd = os.pidfd_open(popen.pid)
        self.first_pidfd: int | None = None
        """A pidfd of the sandbox's PID 1, whose death is the end of every process in the sandbox."""
        self._disposed = False
        self._dispose_lock = threading.Lock()

    def alive(self) -> bool:
        """Whether the sandbox is still waiting (it may have died, e.g. killed from outside)."""
        if self._disposed or self.popen.poll() is not None:
            return False
        return self.first_pidfd is None or not _ended(self.first_pidfd, 0)

    async def run(self, request: bytes, wall_s: float, max_output: int) -> Finished:
        """Send the program, collect output until the program ends or ``wall_s`` passes; then clean up."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        output = CappedOutput(max_output, self.kill)
        report = bytearray()
        wall_timeout = False
        try:
            try:
                await asyncio.wait_for(self._serve(request, output, report), timeout=wall_s)
            except TimeoutError:
                wall_timeout = True
            finally:
                if not report.endswith(b"\n") and self.popen.returncode is None:  # timed out, or cancelled
                    self.kill()
                    self.popen.wait()
            if (
                self.first_pidfd is not None
                and not report
                and not wall_timeout
                and output.stderr.startswith(b"bwrap: ")
            ):
                # bubblewrap may report the sandbox's PID 1 and only then fail to set the sandbox up: the launcher
                # never ran, so there is no program outcome, only the set-up failure.
                raise _setup_error(bytes(output.stderr), self.popen.returncode)
            cgroup = self.spec.cgroup
            return Finished(
                stdout=bytes(output.stdout),
                stderr=bytes(output.stderr),
                returncode=self.popen.returncode,
                report=bytes(report),
                wall_timeout=wall_timeout,
                output_overflow=output.overflow,
                oom_killed=cgroup is not None and cgroup.oom_killed(),
                seconds=loop.time() - started,
            )
        finally:
            Cleaner.submit(self.dispose)

    async def _serve(self, request: bytes, output: CappedOutput, report: bytearray) -> None:
        """Send the request and collect the output, until the launcher's report or the end of the sandbox."""
        assert self.popen.stdin is not None and self.popen.stdout is not None and self.popen.stderr is not None
        sinks = {
            self.popen.stdout.fileno(): output.sink(output.stdout),
            self.popen.stderr.fileno(): output.sink(output.stderr),
        }
        readers = [asyncio.ensure_future(pump(fd, sink)) for fd, sink in sinks.items()]
        try:
            await asyncio.gather(write_all(self.popen.stdin.fileno(), request), read_line(self.spec.report_fd, report))
            if report.endswith(b"\n"):
                # The program has ended, so all it wrote is in the pipes already: read that, and leave the
                # sandbox's own teardown (milliseconds) to the clean-up. (No await before the readers are
                # cancelled below, so they cannot read in between.)
                for fd, sink in sinks.items():
                    drain(fd, sink)
            else:  # the sandbox ended without a report (killed, or never set up): read to the end
                await asyncio.gather(*readers, self._exit())
        finally:
            for reader in readers:
                reader.cancel()

    async def _exit(self) -> None:
        await readable(self.pidfd)
        if self.first_pidfd is None:
            # Unisolated, the program's background processes could keep its pipes open: end them, while the
            # unreaped group leader still keeps its group id from being reused.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.popen.pid, signal.SIGKILL)
        self.popen.wait()

    def kill(self) -> None:
        """SIGKILL the sandbox: its PID 1 (whose death ends every process inside) and its first process's group
        (only while that process is unreaped: after that its id could belong to someone else)."""
        if self.owner != os.getpid():
            return
        if self.first_pidfd is not None:
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(self.first_pidfd, signal.SIGKILL)
        if self.popen.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.popen.pid, signal.SIGKILL)

    def dispose(self) -> None:
        """Kill and reap the sandbox, wait for its last process, release what it held; idempotent, and in a
        forked child only closes this process's copies of the descriptors."""
        with self._dispose_lock:
            if self._disposed:
                return
            self._disposed = True
        if self.owner != os.getpid():
            self.close_descriptors()
            return
        self.kill()
        self.popen.wait()
        if self.first_pidfd is not None and not _ended(self.first_pidfd, LAST_PROCESS_WAIT_S):
            self.kill()
        self.close_descriptors()
        self.spec.release()

    def close_descriptors(self) -> None:
        """Close the host's ends of the pipes (stdin among them: its closing tells the launcher to quit)."""
        for stream in (self.popen.stdin, self.popen.stdout, self.popen.stderr):
            if stream is not None:
                stream.close()
        for fd in (self.pidfd, self.first_pidfd):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.first_pidfd = None
        self.spec.close_descriptors()


def _ended(pidfd: int, timeout_s: float) -> bool:
    """Whether the process of ``pidfd`` has ended, waiting up to ``timeout_s`` for it."""
    poller = select.poll()
    poller.register(pidfd, select.POLLIN)
    return bool(poller.poll(timeout_s * 1000))


def launch(spec: LaunchSpec) -> SandboxProcess:
    """Start a sandbox process (blocking; run it on a spawner thread)."""
    try:
        popen = subprocess.Popen(
            spec.command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            pass_fds=spec.pass_fds,
            cwd=spec.cwd,
            env=spec.env,
            start_new_session=True,
        )
    except BaseException:
        spec.release()
        raise
    finally:
        for fd in spec.pass_fds:
            os.close(fd)
    process = SandboxProcess(popen, spec)
    for stream in (popen.stdin, popen.stdout, popen.stderr):
        assert stream is not None
        os.set_blocking(stream.fileno(), False)
    os.set_blocking(spec.report_fd, False)
    if spec.info_fd >= 0:
        try:
            process.first_pidfd = _hold_first_process(popen, spec)
        except (OSError, SandboxUnavailableError):
            process.dispose()
            raise
    return process


def _hold_first_process(popen: subprocess.Popen[bytes], spec: LaunchSpec) -> int:
    """A pidfd of the sandbox's PID 1, once it and its children are in the sandbox's cgroup.

    bubblewrap goes on setting up meanwhile: the first move into a cgroup waits for an RCU grace period
    (~10 ms), which thus overlaps the sandbox's start-up. PID 1 (the launcher) may fork its child before it is
    moved, so its children are moved next (a cheap second move); nothing else can exist, and nothing runs the
    program before the host sends it, after this returns.
    """
    with os.fdopen(spec.info_fd, "rb", closefd=False) as info:
        data = info.read()
    os.close(spec.info_fd)
    spec.info_fd = -1
    if not data:
        raise _setup_failure(popen)
    pid = int(json.loads(data)["child-pid"])
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:  # the sandbox died while bubblewrap set it up
        raise _setup_failure(popen) from None
    try:
        if spec.cgroup is not None:
            spec.cgroup.add(pid)
            for child in _children(pid):
                spec.cgroup.add(child)
    except OSError as error:
        os.close(pidfd)
        if isinstance(error, ProcessLookupError):
            raise _setup_failure(popen) from None
        raise
    return pidfd


def _setup_failure(popen: subprocess.Popen[bytes]) -> SandboxUnavailableError:
    """The error of a bubblewrap that exited before the sandbox was ready, with what it said."""
    popen.wait()
    return _setup_error(popen.stderr.read() if popen.stderr else None, popen.returncode)


def _setup_error(said: bytes | None, returncode: int | None) -> SandboxUnavailableError:
    detail = (said or b"").decode(errors="replace").strip() or f"exit code {returncode}"
    return SandboxUnavailableError(f"bubblewrap could not set up the sandbox: {detail}")


def _children(pid: int) -> list[int]:
    """The children of process ``pid``."""
    try:
        return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except FileNotFoundError:  # a kernel without CONFIG_PROC_CHILDREN: look at every process's parent
        children = []
        for entry in Path("/proc").iterdir():
            with contextlib.suppress(OSError, ValueError):
                if entry.name.isdigit() and int((entry / "stat").read_text().rpartition(")")[2].split()[1]) == pid:
                    children.append(int(entry.name))
        return children


class _Executor:
    """A lazily started, process-wide thread pool, started anew in a forked child."""

    def __init__(self, threads: int, name: str) -> None:
        self.threads = threads
        self.name = name
        self._executor: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        os.register_at_fork(after_in_child=self._forget)

    def submit(self, job: Callable[[], object]) -> Future:  # type: ignore[type-arg]
        """Run ``job`` on one of the threads."""
        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(self.threads, thread_name_prefix=self.name)
            return self._executor.submit(job)

    def _forget(self) -> None:
        self._executor = None
        self._lock = threading.Lock()


Spawner = _Executor(SPAWN_THREADS, "podium-sandbox-spawner")
"""Threads that start sandbox processes (see the module docstring for why threads matter)."""
Cleaner = _Executor(1, "podium-sandbox-cleaner")
"""A thread that cleans up after calls."""

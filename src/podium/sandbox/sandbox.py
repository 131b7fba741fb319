"""A sandbox for model-written Python: bubblewrap namespaces plus resource limits.

Isolation (bubblewrap): new PID, network, IPC, UTS and cgroup namespaces (the network namespace has only
its own loopback); a read-only view of the system directories and the Python installation and nothing else
of the host (no home, no project, no /etc beyond a few harmless files); size-capped tmpfs mounts, new for
every call, as the only writable places (``/scratch``, the working directory, and ``/tmp``); a clean
environment; a new session; all capabilities dropped and, when Podium runs as root, the code runs as
``nobody``. Limits: CPU seconds, address space, processes, open files, file size, output bytes and
wall-clock time. Killing the sandbox's first process kills every
process inside it (PID namespace).

Without bubblewrap the sandbox refuses to run anything unless ``allow_unisolated`` is set; then code runs
as a plain subprocess with the same limits (but no process limit) in a temporary directory: no isolation.
"""

import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from importlib.resources import files
from pathlib import Path

from pydantic import Field, PositiveFloat, PositiveInt

from podium.concurrency import LoopSemaphore
from podium.config import Config
from podium.core.calls import Status
from podium.errors import SandboxUnavailableError

NOBODY_UID = 65534
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
HARMLESS_ETC = ("/etc/ld.so.cache", "/etc/localtime", "/etc/alternatives", "/etc/fonts", "/etc/mime.types")
SCRATCH = "/scratch"
LAUNCHER = "/podium/launcher.py"
ENVIRONMENT = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": SCRATCH,
    "TMPDIR": SCRATCH,
    "LANG": "C.UTF-8",
    # Numeric libraries otherwise start one thread per core, which the process limit would refuse.
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "MPLBACKEND": "Agg",
}
# bubblewrap reports a child killed by signal N as exit status 128 + N.
SIGNAL_EXIT_OFFSET = 128


class SandboxConfig(Config):
    """Limits and isolation settings of the code sandbox."""

    cpu_time_s: PositiveFloat = 10.0
    """CPU seconds per process before it is stopped (RLIMIT_CPU)."""
    wall_time_s: PositiveFloat = 30.0
    """Wall-clock seconds before the whole sandbox is killed."""
    memory_mb: PositiveInt = 1024
    """Address-space limit per process, in MiB (RLIMIT_AS)."""
    max_processes: PositiveInt = 64
    """Most processes and threads inside the sandbox (RLIMIT_NPROC)."""
    max_open_files: PositiveInt = 256
    """Most open file descriptors per process (RLIMIT_NOFILE)."""
    scratch_mb: PositiveInt = 64
    """Size of each writable filesystem (/scratch and /tmp), in MiB; also the largest file that may be written."""
    max_output_bytes: PositiveInt = 65_536
    """Most bytes of stdout plus stderr kept; a program that writes more is stopped."""
    python: str = sys.executable
    """Interpreter that runs the code; its installation (and virtual environment) is visible read-only."""
    read_only_paths: list[str] = Field(default_factory=list)
    """Extra host paths made visible read-only at the same place (data sets, model files)."""
    bwrap: str = "bwrap"
    """The bubblewrap executable."""
    allow_unisolated: bool = False
    """Run code as a plain subprocess when bubblewrap is unavailable. Unsafe: only for trusted code."""
    max_concurrent: PositiveInt = 8
    """Most sandboxes running at once; further runs wait."""


@dataclass(frozen=True)
class SandboxRun:
    """What a sandboxed program did."""

    stdout: str
    stderr: str
    exit_code: int | None
    """Exit status, or None when it was killed at the wall-clock limit."""
    signal: str | None
    """Name of the signal that ended it, if one did."""
    wall_timeout: bool
    output_overflow: bool
    isolated: bool
    seconds: float

    @property
    def status(self) -> Status:
        if self.wall_timeout or self.signal == "SIGXCPU":
            return Status.TIMEOUT
        return Status.OK if self.exit_code == 0 and not self.output_overflow else Status.EXEC_ERR

    @property
    def reason(self) -> str | None:
        if self.wall_timeout:
            return "wall-clock time limit exceeded; the sandbox was killed"
        if self.signal == "SIGXCPU":
            return "CPU time limit exceeded"
        if self.output_overflow:
            return "output limit exceeded; the program was stopped"
        if self.signal is not None:
            return f"killed by {self.signal}"
        if self.exit_code:
            return f"exit code {self.exit_code}"
        return None


class Sandbox:
    """Runs Python code under the configured isolation and limits; safe to share across tasks."""

    def __init__(self, config: SandboxConfig | None = None) -> None:
        self.config = config or SandboxConfig()
        self._isolated: bool | None = None
        self._running = LoopSemaphore(self.config.max_concurrent)
        self._launcher = (files("podium.sandbox") / "launcher.py").read_bytes()

    def isolation(self) -> str:
        """``bubblewrap``, or ``none`` when running unisolated by the user's choice; raises if neither."""
        if self._isolated is None:
            problem = self._probe_bubblewrap()
            if problem is not None and not self.config.allow_unisolated:
                raise SandboxUnavailableError(
                    f"cannot isolate code: {problem}. Install bubblewrap (Debian/Ubuntu: apt-get install "
                    "bubblewrap) or, for trusted code only, allow unisolated execution (allow_unisolated: true, "
                    "or --allow-unisolated)"
                )
            self._isolated = problem is None
        return "bubblewrap" if self._isolated else "none"

    async def run_python(self, code: str, files: Mapping[str, str | bytes] | None = None) -> SandboxRun:
        """Run ``code`` as ``main.py`` in a fresh scratch directory holding ``files`` (name → content)."""
        isolated = self.isolation() == "bubblewrap"
        inputs = {"main.py": code, **(files or {})}
        for name in inputs:
            if "/" in name or name in ("", ".", ".."):
                raise ValueError(f"sandbox file names must be plain names, got {name!r}")
        async with self._running:
            if isolated:
                return await self._run_isolated(inputs)
            return await self._run_unisolated(inputs)

    def _rlimits(self, *, with_process_limit: bool) -> list[tuple[str, int, int]]:
        config = self.config
        cpu = max(1, round(config.cpu_time_s))
        scratch = config.scratch_mb << 20
        limits = [
            ("RLIMIT_CPU", cpu, cpu + 1),  # soft limit sends SIGXCPU, reported as a timeout
            ("RLIMIT_AS", config.memory_mb << 20, config.memory_mb << 20),
            ("RLIMIT_NOFILE", config.max_open_files, config.max_open_files),
            ("RLIMIT_FSIZE", scratch, scratch),
            ("RLIMIT_CORE", 0, 0),
        ]
        if with_process_limit:
            limits.append(("RLIMIT_NPROC", config.max_processes, config.max_processes))
        return limits

    def _launcher_arguments(self, *, isolated: bool) -> list[str]:
        uid = str(NOBODY_UID) if isolated and os.geteuid() == 0 else "-"
        return [uid, *(f"{name}={soft}:{hard}" for name, soft, hard in self._rlimits(with_process_limit=isolated))]

    def _bwrap_command(self, fds: dict[str, int]) -> list[str]:
        config = self.config
        command = [config.bwrap, "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
        if os.geteuid() == 0:
            # As root, skip the user namespace (it would map the code to host uid 0, which the kernel exempts
            # from RLIMIT_NPROC); keep only what the launcher needs to switch to nobody.
            command += ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try"]
            command += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
        else:
            command += ["--unshare-all", "--unshare-user", "--disable-userns"]
        command += ["--hostname", "sandbox"]
        command += _system_mounts()
        # /tmp is mounted before the read-only binds: an interpreter or virtual environment may live under it.
        for writable in ("/tmp", SCRATCH):
            command += ["--perms", "1777", "--size", str(config.scratch_mb << 20), "--tmpfs", writable]
        command += self._read_only_binds
        command += ["--proc", "/proc", "--dev", "/dev"]
        for name, fd in fds.items():
            if name == LAUNCHER:
                command += ["--ro-bind-data", str(fd), LAUNCHER]
            else:
                command += ["--perms", "0666", "--file", str(fd), f"{SCRATCH}/{name}"]
        command += ["--chdir", SCRATCH, "--clearenv"]
        for key, value in ENVIRONMENT.items():
            command += ["--setenv", key, value]
        return command

    @cached_property
    def _read_only_binds(self) -> list[str]:
        # Resolving paths costs syscalls; the config is fixed once the sandbox exists, so do it once.
        return _read_only_mounts(self._visible_paths())

    def _visible_paths(self) -> list[str]:
        python = Path(self.config.python)
        paths = {str(Path(sys.prefix)), str(Path(sys.base_prefix)), str(python.parent), str(python.resolve().parent)}
        if python != Path(sys.executable):
            paths.add(str(python.resolve().parent.parent))
        paths.update(str(Path(p).resolve()) for p in self.config.read_only_paths)
        return sorted(paths)

    async def _run_isolated(self, inputs: Mapping[str, str | bytes]) -> SandboxRun:
        fds = {name: _memfd(name, content) for name, content in inputs.items()}
        fds[LAUNCHER] = _memfd("launcher", self._launcher)
        try:
            command = [
                *self._bwrap_command(fds),
                "--",
                self.config.python,
                "-I",
                "-B",
                LAUNCHER,
                *self._launcher_arguments(isolated=True),
            ]
            return await self._execute(command, pass_fds=tuple(fds.values()), cwd=None, isolated=True)
        finally:
            for fd in fds.values():
                os.close(fd)

    async def _run_unisolated(self, inputs: Mapping[str, str | bytes]) -> SandboxRun:
        with tempfile.TemporaryDirectory(prefix="podium-unisolated-") as directory:
            for name, content in inputs.items():
                data = content.encode() if isinstance(content, str) else content
                (Path(directory) / name).write_bytes(data)
            launcher = Path(directory) / ".podium_launcher.py"
            launcher.write_bytes(self._launcher)
            command = [self.config.python, "-I", "-B", str(launcher), *self._launcher_arguments(isolated=False)]
            environment = {**ENVIRONMENT, "HOME": directory, "TMPDIR": directory}
            return await self._execute(command, pass_fds=(), cwd=directory, isolated=False, env=environment)

    async def _execute(
        self,
        command: list[str],
        *,
        pass_fds: tuple[int, ...],
        cwd: str | None,
        isolated: bool,
        env: dict[str, str] | None = None,
    ) -> SandboxRun:
        started = time.perf_counter()
        process = await asyncio.create_subprocess_exec(
            *command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            pass_fds=pass_fds,
            cwd=cwd,
            env=env if env is not None else {},
            start_new_session=True,
        )
        output = _CappedOutput(self.config.max_output_bytes, lambda: _kill(process))
        wall_timeout = False
        try:
            await asyncio.wait_for(
                asyncio.gather(
                    output.pump(process.stdout, output.stdout),
                    output.pump(process.stderr, output.stderr),
                    process.wait(),
                ),
                timeout=self.config.wall_time_s,
            )
        except TimeoutError:
            wall_timeout = True
        finally:
            if process.returncode is None:
                _kill(process)
                await process.wait()
        code = process.returncode
        signal_name = _signal_name(code, isolated=isolated)
        return SandboxRun(
            stdout=output.stdout.decode("utf-8", errors="replace"),
            stderr=output.stderr.decode("utf-8", errors="replace"),
            exit_code=None if wall_timeout else code,
            signal=None if wall_timeout else signal_name,
            wall_timeout=wall_timeout,
            output_overflow=output.overflow,
            isolated=isolated,
            seconds=time.perf_counter() - started,
        )

    def _probe_bubblewrap(self) -> str | None:
        """Why bubblewrap cannot run code here, or None when it can."""
        if shutil.which(self.config.bwrap) is None:
            return f"'{self.config.bwrap}' was not found"
        probe = [*self._bwrap_command({}), "--", self.config.python, "-I", "-c", "pass"]
        try:
            completed = subprocess.run(probe, capture_output=True, timeout=30, env={}, check=False)
        except (OSError, subprocess.TimeoutExpired) as error:
            return f"bubblewrap failed to start: {error}"
        if completed.returncode != 0:
            detail = completed.stderr.decode(errors="replace").strip() or f"exit code {completed.returncode}"
            return f"bubblewrap cannot create a sandbox here ({detail})"
        return None


class _CappedOutput:
    """Collects stdout and stderr up to a combined byte limit, then stops the program."""

    def __init__(self, limit: int, stop: Callable[[], None]) -> None:
        self.limit = limit
        self.stop = stop
        self.stdout = bytearray()
        self.stderr = bytearray()
        self.overflow = False

    async def pump(self, stream: asyncio.StreamReader | None, into: bytearray) -> None:
        assert stream is not None
        while chunk := await stream.read(65_536):
            room = self.limit - len(self.stdout) - len(self.stderr)
            into += chunk[: max(room, 0)]
            if len(chunk) > room and not self.overflow:
                self.overflow = True
                self.stop()


def _memfd(name: str, content: str | bytes) -> int:
    fd = os.memfd_create(f"podium-{name}")
    os.write(fd, content.encode() if isinstance(content, str) else content)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _kill(process: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)


def _signal_name(code: int | None, *, isolated: bool) -> str | None:
    if code is None:
        return None
    number = code - SIGNAL_EXIT_OFFSET if isolated and code > SIGNAL_EXIT_OFFSET else -code if code < 0 else None
    if number is None:
        return None
    try:
        return signal.Signals(number).name
    except ValueError:
        return None


def _system_mounts() -> list[str]:
    mounts: list[str] = []
    for path in SYSTEM_DIRS:
        if os.path.islink(path):
            mounts += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            mounts += ["--ro-bind", path, path]
    for path in HARMLESS_ETC:
        mounts += ["--ro-bind-try", path, path]
    return mounts


def _read_only_mounts(paths: list[str]) -> list[str]:
    """Bind each path read-only, creating its parents world-readable (bubblewrap would copy modes such as
    /root's 0700, and the code, running as nobody, could not reach the interpreter)."""
    covered = [p for p in paths if not any(p != q and p.startswith(q.rstrip("/") + "/") for q in paths)]
    covered = [p for p in covered if not any(p == d or p.startswith(d + "/") for d in SYSTEM_DIRS)]
    mounts: list[str] = []
    made: set[str] = set()
    for path in covered:
        for parent in reversed(Path(path).parents):
            name = str(parent)
            if name != "/" and name not in made:
                made.add(name)
                mounts += ["--perms", "0755", "--dir", name]
        mounts += ["--ro-bind", path, path]
    return mounts

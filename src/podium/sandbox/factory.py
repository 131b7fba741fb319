"""Builds and starts the process of one sandbox for a configuration: bubblewrap around the launcher, or,
when the user allowed it and bubblewrap is missing, the launcher alone in a temporary directory."""

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from importlib.resources import files
from pathlib import Path

from podium.sandbox.cgroups import CgroupHost
from podium.sandbox.config import SandboxConfig
from podium.sandbox.mounts import SpecialFiles, read_only_mounts, system_mounts
from podium.sandbox.process import LaunchSpec, SandboxProcess, launch
from podium.sandbox.uids import UidLease, lease_uid

SCRATCH = "/scratch"
LAUNCHER = "/podium/launcher.py"
UID_SPAN = 60_000
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
TAG_VARIABLE = "PODIUM_SANDBOX_TAG"


class SandboxFactory:
    """Starts fresh sandbox processes for one configuration; safe to call from several threads."""

    def __init__(self, config: SandboxConfig, *, isolated: bool, cgroups: CgroupHost | None, seccomp: bytes):
        self.config = config
        self.isolated = isolated
        self.cgroups = cgroups
        self._launcher = _memfd("launcher", (files("podium.sandbox") / "launcher.py").read_bytes())
        self._seccomp = _memfd("seccomp", seccomp)
        self._empty = _memfd("empty", b"")
        self._read_only = read_only_mounts(self.visible_paths())
        # The Python installation is the host's own; the configured paths may hold anything.
        self._special = SpecialFiles([str(Path(p).resolve()) for p in config.read_only_paths])

    def close(self) -> None:
        """Release the descriptors the factory keeps."""
        for fd in (self._launcher, self._seccomp, self._empty):
            with contextlib.suppress(OSError):
                os.close(fd)

    def start(self) -> SandboxProcess:
        """A started sandbox waiting for its program (blocking: bubblewrap is set up meanwhile)."""
        return launch(self.isolated_spec() if self.isolated else self.unisolated_spec())

    def visible_paths(self) -> list[str]:
        """Host paths bound read-only into the sandbox: the Python installation and the configured paths."""
        python = Path(self.config.python)
        paths = {str(Path(sys.prefix)), str(Path(sys.base_prefix)), str(python.parent), str(python.resolve().parent)}
        if python != Path(sys.executable):
            paths.add(str(python.resolve().parent.parent))
        paths.update(str(Path(p).resolve()) for p in self.config.read_only_paths)
        return sorted(paths)

    def special_files(self) -> frozenset[str]:
        """The sockets and FIFOs now under the configured read-only paths."""
        return frozenset(self._special.find())

    def bubblewrap(self, fds: list[int], *, root: bool, hidden: frozenset[str] = frozenset()) -> list[str]:
        """bubblewrap's arguments up to the program, covering the ``hidden`` sockets and FIFOs; the descriptors
        the arguments name are appended to ``fds``."""
        config = self.config
        # No --die-with-parent: bubblewrap's outer process would then die with the host, and if that happens
        # before it has released the sandbox's first process (which waits on an eventfd for it), that process waits
        # forever. The launcher is the sandbox's PID 1 instead (--as-pid-1), and ends the sandbox when the host lets
        # go of its stdin or the wall-clock limit passes (see launcher.py).
        command = [config.bwrap, "--new-session", "--as-pid-1", "--cap-drop", "ALL"]
        if root:
            # As root, skip the user namespace (it would map the code to host uid 0, which the kernel exempts
            # from RLIMIT_NPROC); keep only what the launcher needs to switch to the call's uid.
            command += ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try"]
            command += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
        else:
            command += ["--unshare-all", "--unshare-user", "--disable-userns"]
        command += ["--hostname", "sandbox", *system_mounts()]
        size = str(config.scratch_mb << 20)
        # /tmp is mounted before the read-only binds: an interpreter or virtual environment may live under it.
        for writable in ("/tmp", SCRATCH):
            command += ["--perms", "1777", "--size", size, "--tmpfs", writable]
        command += self._read_only
        for special in sorted(hidden):
            fds.append(_reopen(self._empty))
            command += ["--perms", "0444", "--ro-bind-data", str(fds[-1]), special]
        command += ["--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--size", size, "--tmpfs", "/dev/shm"]
        fds += [_reopen(self._launcher), _reopen(self._seccomp)]
        command += ["--ro-bind-data", str(fds[-2]), LAUNCHER, "--seccomp", str(fds[-1])]
        command += ["--chdir", SCRATCH, "--clearenv"]
        for key, value in self.environment(SCRATCH).items():
            command += ["--setenv", key, value]
        return command

    def environment(self, home: str) -> dict[str, str]:
        """The program's whole environment."""
        tag = {TAG_VARIABLE: self.config.tag} if self.config.tag else {}
        return {**ENVIRONMENT, "HOME": home, "TMPDIR": home, **tag}

    def launcher_arguments(self, uid: UidLease | None, report_fd: int) -> list[str]:
        """The launcher's command-line arguments (see launcher.py)."""
        return [
            str(uid.uid) if uid is not None else "-",
            f"{self.config.wall_time_s:g}",
            self.config.tag or "-",
            str(report_fd),
            *(f"{name}={soft}:{hard}" for name, soft, hard in self.rlimits()),
        ]

    def rlimits(self) -> list[tuple[str, int, int]]:
        """The per-process resource limits (the process limit only inside bubblewrap)."""
        config = self.config
        cpu = self.cpu_limit_s()
        scratch = config.scratch_mb << 20
        limits = [
            # SIGXCPU at the soft limit, SIGKILL at the hard one: both timeouts (see CPU_LIMIT_SHARE in sandbox.py).
            ("RLIMIT_CPU", cpu, cpu + 1),
            ("RLIMIT_AS", config.memory_mb << 20, config.memory_mb << 20),
            ("RLIMIT_NOFILE", config.max_open_files, config.max_open_files),
            ("RLIMIT_FSIZE", scratch, scratch),
            ("RLIMIT_CORE", 0, 0),
        ]
        if self.isolated:
            limits.append(("RLIMIT_NPROC", config.max_processes, config.max_processes))
        return limits

    def cpu_limit_s(self) -> int:
        """The CPU-time limit as the kernel applies it (whole seconds)."""
        return max(1, round(self.config.cpu_time_s))

    def isolated_spec(self) -> LaunchSpec:
        """Everything needed to start one bubblewrap sandbox; it owns a uid lease and a cgroup when used."""
        root = os.geteuid() == 0
        spec = LaunchSpec([], [], uid=lease_uid(self.config.first_uid, UID_SPAN) if root else None)
        try:
            if self.cgroups is not None:
                # pids.max counts bubblewrap's PID 1 too, which the program's process limit does not.
                spec.cgroup = self.cgroups.create(self.config.memory_mb << 20, self.config.max_processes + 1)
            spec.hidden = self.special_files()
            command = self.bubblewrap(spec.pass_fds, root=root, hidden=spec.hidden)
            spec.info_fd, info_write = os.pipe()
            # bubblewrap keeps a reader of its --info-fd pipe itself (--sync-fd, held by its outer process and
            # PID 1, closed before the launcher runs): if the host dies first, writing the info must not fail, or
            # bubblewrap would exit before releasing PID 1.
            spec.pass_fds += [info_write, os.dup(spec.info_fd)]
            command += ["--info-fd", str(info_write), "--sync-fd", str(spec.pass_fds[-1])]
            spec.report_fd, report_write = os.pipe()
            spec.pass_fds.append(report_write)
            arguments = self.launcher_arguments(spec.uid, report_write)
        except BaseException:
            _close(spec.pass_fds)
            spec.release()
            raise
        spec.command = [*command, "--", self.config.python, "-I", "-B", LAUNCHER, *arguments]
        return spec

    def unisolated_spec(self) -> LaunchSpec:
        """The launcher as a plain process in a new temporary directory: limits, but no isolation."""
        directory = tempfile.mkdtemp(prefix="podium-unisolated-")
        launcher = Path(directory) / ".podium_launcher.py"
        launcher.write_bytes(os.pread(self._launcher, os.fstat(self._launcher).st_size, 0))
        report_read, report_write = os.pipe()
        command = [self.config.python, "-I", "-B", str(launcher), *self.launcher_arguments(None, report_write)]
        environment = self.environment(directory)
        return LaunchSpec(
            command, [report_write], cwd=directory, env=environment, report_fd=report_read, directory=directory
        )

    def probe(self) -> str | None:
        """Why bubblewrap cannot run code here, or None when it can."""
        if shutil.which(self.config.bwrap) is None:
            return f"'{self.config.bwrap}' was not found"
        fds: list[int] = []
        command = self.bubblewrap(fds, root=os.geteuid() == 0, hidden=self.special_files())
        probe = [*command, "--", self.config.python, "-I", "-c", "pass"]
        try:
            completed = subprocess.run(probe, capture_output=True, timeout=30, env={}, pass_fds=fds, check=False)
        except (OSError, subprocess.TimeoutExpired) as error:
            return f"bubblewrap failed to start: {error}"
        finally:
            _close(fds)
        if completed.returncode != 0:
            detail = completed.stderr.decode(errors="replace").strip() or f"exit code {completed.returncode}"
            return f"bubblewrap cannot create a sandbox here ({detail})"
        return None


def _memfd(name: str, content: bytes) -> int:
    fd = os.memfd_create(f"podium-{name}", os.MFD_CLOEXEC)
    os.write(fd, content)
    return fd


def _reopen(fd: int) -> int:
    """A new open file description of ``fd``'s file, at offset 0 (bubblewrap reads each to its end)."""
    return os.open(f"/proc/self/fd/{fd}", os.O_RDONLY)


def _close(fds: list[int]) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)

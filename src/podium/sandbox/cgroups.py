"""One control group per sandbox: a memory limit and a process limit for the whole sandbox, and a kill switch.

A cgroup v2 hierarchy with the ``memory`` and ``pids`` controllers is used when Podium may create child groups
of its own cgroup; on hybrid hosts (systemd's legacy layout: cgroup v1 controllers plus an empty v2 tree) the
v1 ``memory`` and ``pids`` hierarchies serve instead, and the v2 tree, when writable, adds ``cgroup.kill``.
Each sandbox gets ``podium-<host pid>-<n>`` under Podium's own group in every hierarchy used; the host moves
the sandbox's PID 1 (and the launcher, if already forked) in before the program is sent, so every process,
tmpfs file and shared-memory page the program creates is charged to that group. Nothing here moves Podium's
own process or changes a group Podium did not create; groups left by a Podium process that was killed are
removed when found empty.
"""

import contextlib
import os
import signal
import time
from dataclasses import dataclass
from itertools import count
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
PREFIX = "podium-"
REMOVE_ATTEMPTS = 50  # a just-killed group empties within milliseconds; give up after ~50 ms
_NAMES = count()  # shared by every Sandbox of this process, so that group names never collide


@dataclass(frozen=True)
class Hierarchy:
    """Podium's own group in one mounted cgroup hierarchy."""

    path: Path
    version: int


class SandboxCgroup:
    """The groups of one sandbox, one per hierarchy used."""

    def __init__(self, host: "CgroupHost", directories: dict[str, Path]) -> None:
        self.host = host
        self.directories = directories

    def add(self, pid: int) -> None:
        """Move process ``pid`` (and the children it will have) into the sandbox's groups."""
        for directory in self.directories.values():
            (directory / "cgroup.procs").write_text(str(pid))

    def oom_killed(self) -> bool:
        """Whether the kernel killed a process of this sandbox for exceeding its memory limit."""
        directory = self.directories.get("memory")
        if directory is None:
            return False
        source = "memory.events" if self.host.memory and self.host.memory.version == 2 else "memory.oom_control"
        with contextlib.suppress(OSError):
            for line in (directory / source).read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value) > 0
        return False

    def kill(self) -> None:
        """SIGKILL every process still in the sandbox's groups."""
        for directory in self.directories.values():
            if (directory / "cgroup.kill").exists():
                with contextlib.suppress(OSError):
                    (directory / "cgroup.kill").write_text("1")
                    return
        for directory in self.directories.values():
            with contextlib.suppress(OSError):
                for pid in (directory / "cgroup.procs").read_text().split():
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(int(pid), signal.SIGKILL)

    def remove(self) -> None:
        """Kill what is left and delete the groups (waiting briefly for the processes to go)."""
        self.kill()
        for directory in self.directories.values():
            for _ in range(REMOVE_ATTEMPTS):
                try:
                    directory.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.001)


class CgroupHost:
    """The hierarchies this process may create sandbox groups in, found once."""

    def __init__(self, memory: Hierarchy | None, pids: Hierarchy | None, unified: Hierarchy | None) -> None:
        self.memory = memory
        self.pids = pids
        self.unified = unified

    @classmethod
    def probe(cls) -> "CgroupHost | str":
        """The usable hierarchies, or why per-sandbox memory limits cannot be had here."""
        try:
            memberships = _memberships()
            mounts = _mounts()
        except OSError as error:
            return f"cannot read this process's cgroups ({error})"
        v2 = _own_group(memberships.get("", None), mounts.get(("cgroup2", "")))
        memory = pids = None
        if v2 is not None and _enable_controllers(v2, ("memory", "pids")):
            memory = pids = Hierarchy(v2, 2)
        else:
            v1_memory = _own_group(memberships.get("memory"), mounts.get(("cgroup", "memory")))
            v1_pids = _own_group(memberships.get("pids"), mounts.get(("cgroup", "pids")))
            memory = Hierarchy(v1_memory, 1) if v1_memory is not None else None
            pids = Hierarchy(v1_pids, 1) if v1_pids is not None else None
        if memory is None or pids is None:
            return "no writable cgroup hierarchy with the memory and pids controllers"
        unified = Hierarchy(v2, 2) if v2 is not None and memory.path != v2 else None
        host = cls(memory, pids, unified)
        problem = host._try()
        return problem if problem is not None else host

    def create(self, memory_bytes: int, max_processes: int) -> SandboxCgroup:
        """New groups for one sandbox, with its limits written."""
        name = f"{PREFIX}{os.getpid()}-{next(_NAMES)}"
        roles = {"memory": self.memory, "pids": self.pids, "unified": self.unified}
        directories: dict[str, Path] = {}
        for role, hierarchy in roles.items():
            if hierarchy is None:
                continue
            directory = hierarchy.path / name
            if directory not in directories.values():
                directory.mkdir()
            directories[role] = directory
        group = SandboxCgroup(self, directories)
        try:
            _write_limits(group, memory_bytes, max_processes)
        except OSError:
            group.remove()
            raise
        return group

    def _try(self) -> str | None:
        for stale in _stale_groups([h for h in (self.memory, self.pids, self.unified) if h is not None]):
            with contextlib.suppress(OSError):
                stale.rmdir()
        try:
            self.create(64 << 20, 8).remove()
        except OSError as error:
            return f"cannot create a cgroup for a sandbox ({error})"
        return None


def _write_limits(group: SandboxCgroup, memory_bytes: int, max_processes: int) -> None:
    memory = group.directories["memory"]
    if group.host.memory is not None and group.host.memory.version == 2:
        (memory / "memory.max").write_text(str(memory_bytes))
        if (memory / "memory.swap.max").exists():
            (memory / "memory.swap.max").write_text("0")
    else:
        (memory / "memory.limit_in_bytes").write_text(str(memory_bytes))
        if (memory / "memory.memsw.limit_in_bytes").exists():
            (memory / "memory.memsw.limit_in_bytes").write_text(str(memory_bytes))
    (group.directories["pids"] / "pids.max").write_text(str(max_processes))


def _memberships() -> dict[str, str]:
    """Controller name ("" for the v2 tree) → this process's group path, from /proc/self/cgroup."""
    found: dict[str, str] = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            found[controller] = path
    return found


def _mounts() -> dict[tuple[str, str], tuple[str, Path]]:
    """(filesystem type, controller) → (root of the mount, mount point) for mounted cgroup hierarchies."""
    found: dict[tuple[str, str], tuple[str, Path]] = {}
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields, _, tail = line.partition(" - ")
        fstype, _, options = tail.split(" ", 2) if tail.count(" ") >= 2 else (tail, "", "")
        parts = fields.split(" ")
        if fstype == "cgroup2":
            found.setdefault(("cgroup2", ""), (parts[3], Path(parts[4])))
        elif fstype == "cgroup":
            for option in options.split(","):
                found.setdefault(("cgroup", option), (parts[3], Path(parts[4])))
    return found


def _own_group(path: str | None, mount: tuple[str, Path] | None) -> Path | None:
    """This process's group directory in a hierarchy, if that hierarchy is mounted and writable."""
    if path is None or mount is None:
        return None
    root, point = mount
    if not (path == root or path.startswith(root.rstrip("/") + "/")):
        return None
    directory = point / path[len(root.rstrip("/")) :].lstrip("/")
    return directory if os.access(directory, os.W_OK) else None


def _enable_controllers(group: Path, controllers: tuple[str, ...]) -> bool:
    """Whether child groups of ``group`` can use ``controllers`` (enabling them when allowed)."""
    try:
        available = (group / "cgroup.controllers").read_text().split()
        if not all(c in available for c in controllers):
            return False
        enabled = (group / "cgroup.subtree_control").read_text().split()
        missing = [c for c in controllers if c not in enabled]
        if missing:
            (group / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in missing))
    except OSError:
        return False
    return True


def _stale_groups(hierarchies: list[Hierarchy]) -> list[Path]:
    """Sandbox groups left by Podium processes that no longer exist (killed before they could clean up)."""
    stale = []
    for hierarchy in hierarchies:
        with contextlib.suppress(OSError):
            for entry in hierarchy.path.iterdir():
                owner = entry.name.removeprefix(PREFIX).split("-")[0]
                if entry.name.startswith(PREFIX) and owner.isdigit() and not Path(f"/proc/{owner}").exists():
                    stale.append(entry)
    return stale

"""What the sandbox sees of the host's filesystem: the bubblewrap mount arguments.

A read-only view of the system directories, the Python installation and the configured read-only paths, and
nothing else of the host. Only regular files, directories and symbolic links are reachable through that view:
bubblewrap's read-only binds are ``nodev`` (device nodes cannot be opened), and every socket or FIFO found
under an exposed directory is covered by an empty read-only file at the start of each sandbox, so that no host
service listening on a Unix socket (or reading a FIFO) can be reached from inside. Directories are rescanned
only when their modification time changed, which is when an entry was added, removed or renamed.
"""

import os
import stat
import threading
from pathlib import Path

SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
HARMLESS_ETC = ("/etc/ld.so.cache", "/etc/localtime", "/etc/alternatives", "/etc/fonts", "/etc/mime.types")


def system_mounts() -> list[str]:
    """Read-only binds of the system directories (symbolic links recreated) and a few harmless /etc files."""
    mounts: list[str] = []
    for path in SYSTEM_DIRS:
        if os.path.islink(path):
            mounts += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            mounts += ["--ro-bind", path, path]
    for path in HARMLESS_ETC:
        mounts += ["--ro-bind-try", path, path]
    return mounts


def read_only_mounts(paths: list[str]) -> list[str]:
    """Bind each path read-only, creating its parents world-readable (bubblewrap would copy modes such as
    /root's 0700, and the code, running unprivileged, could not reach the interpreter)."""
    mounts: list[str] = []
    made: set[str] = set()
    for path in covering_paths(paths):
        for parent in reversed(Path(path).parents):
            name = str(parent)
            if name != "/" and name not in made:
                made.add(name)
                mounts += ["--perms", "0755", "--dir", name]
        mounts += ["--ro-bind", path, path]
    return mounts


def covering_paths(paths: list[str]) -> list[str]:
    """The paths that need a bind of their own: not inside another of them nor inside a system directory."""
    covered = [p for p in paths if not any(p != q and p.startswith(q.rstrip("/") + "/") for q in paths)]
    return [p for p in covered if not any(p == d or p.startswith(d + "/") for d in SYSTEM_DIRS)]


class SpecialFiles:
    """Finds sockets and FIFOs under some directories, rescanning only the directories that changed."""

    def __init__(self, roots: list[str]) -> None:
        self.roots = roots
        self._lock = threading.Lock()  # sandboxes start on several threads
        self._seen: dict[str, tuple[int, list[str], list[str]]] = {}
        """Directory → (its mtime, its subdirectories, the sockets and FIFOs directly in it)."""

    def find(self) -> list[str]:
        """Every socket and FIFO under the roots (a root may itself be one)."""
        with self._lock:
            return self._find()

    def _find(self) -> list[str]:
        found: list[str] = []
        pending = []
        for root in self.roots:
            try:
                mode = os.lstat(root).st_mode
            except OSError:
                continue
            if _is_special(mode):
                found.append(root)
            elif stat.S_ISDIR(mode):
                pending.append(root)
        while pending:
            directory = pending.pop()
            subdirectories, special = self._entries(directory)
            found += special
            pending += subdirectories
        return sorted(found)

    def _entries(self, directory: str) -> tuple[list[str], list[str]]:
        try:
            mtime = os.lstat(directory).st_mtime_ns
        except OSError:
            self._seen.pop(directory, None)
            return [], []
        cached = self._seen.get(directory)
        if cached is not None and cached[0] == mtime:
            return cached[1], cached[2]
        subdirectories: list[str] = []
        special: list[str] = []
        try:
            with os.scandir(directory) as entries:
                for entry in entries:
                    mode = entry.stat(follow_symlinks=False).st_mode
                    if stat.S_ISDIR(mode):
                        subdirectories.append(entry.path)
                    elif _is_special(mode):
                        special.append(entry.path)
        except OSError:
            return [], []
        self._seen[directory] = (mtime, subdirectories, special)
        return subdirectories, special


def _is_special(mode: int) -> bool:
    return stat.S_ISSOCK(mode) or stat.S_ISFIFO(mode)

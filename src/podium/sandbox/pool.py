"""Warm sandboxes: started ahead of time, each waiting for exactly one call, then discarded.

A warm sandbox is a complete bubblewrap sandbox (namespaces, fresh tmpfs, seccomp filter, cgroup, its own
uid) whose launcher has imported what it needs and blocks reading its program from stdin. Nothing of a call
survives into another: each sandbox serves one call and is killed afterwards, and a new one is started in
the background to take its place. Warm sandboxes die with Podium: closing the pool, garbage collection of
the :class:`~podium.sandbox.Sandbox` and the end of the process, kill -9 included (their stdin reaches
end-of-file, also for those still starting), each end them.
"""

import os
import threading
import weakref
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, wait

from podium.sandbox.process import Cleaner, SandboxProcess, Spawner

CLOSE_WAIT_S = 30.0


class WarmPool:
    """Keeps up to ``size`` sandboxes started: :meth:`take` hands one out, :meth:`fill` starts replacements."""

    def __init__(self, size: int, start: Callable[[], SandboxProcess]) -> None:
        self.size = size
        self._start = start
        self._ready: deque[SandboxProcess] = deque()
        self._pending: set[Future[SandboxProcess]] = set()
        self._lock = threading.Lock()
        self._closed = False
        self._owner = os.getpid()
        _POOLS.add(self)

    def take(self) -> SandboxProcess | None:
        """A warm sandbox, or None when none is ready (dead ones, killed from outside, are cleaned up)."""
        with self._lock:
            while self._ready:
                candidate = self._ready.popleft()
                if candidate.alive():
                    return candidate
                Cleaner.submit(candidate.dispose)
        return None

    def fill(self) -> None:
        """Start enough sandboxes, in the background, to have ``size`` ready. (Callers do it after a call rather
        than during it: starting a sandbox takes CPU time and the GIL from the call.)"""
        with self._lock:
            if self._closed or self._owner != os.getpid():
                return
            missing = self.size - len(self._ready) - len(self._pending)
            futures = [Spawner.submit(self._start) for _ in range(max(missing, 0))]
            self._pending.update(futures)
        for future in futures:
            future.add_done_callback(self._arrived)

    def close(self) -> None:
        """Kill every warm sandbox, including those still starting; the pool stays empty afterwards."""
        with self._lock:
            self._closed = True
            pending = list(self._pending)
        wait(pending, timeout=CLOSE_WAIT_S)
        with self._lock:
            ready = list(self._ready)
            self._ready.clear()
        for process in ready:
            process.dispose()
        for future in pending:
            if future.done() and future.exception() is None:
                future.result().dispose()

    def abandon(self) -> None:
        """In a forked child: drop the parent's sandboxes, closing only this process's copies of their pipes."""
        self._lock = threading.Lock()
        self._closed = True
        for process in self._ready:
            process.close_descriptors()
        self._ready.clear()
        self._pending.clear()

    def _arrived(self, future: Future[SandboxProcess]) -> None:
        if future.exception() is not None:
            with self._lock:
                self._pending.discard(future)
            return
        process = future.result()
        with self._lock:
            self._pending.discard(future)
            keep = not self._closed and self._owner == os.getpid()
            if keep:
                self._ready.append(process)
        if not keep:
            process.dispose()


_POOLS: "weakref.WeakSet[WarmPool]" = weakref.WeakSet()


def _abandon_all() -> None:
    for pool in list(_POOLS):
        pool.abandon()


os.register_at_fork(after_in_child=_abandon_all)

"""The limits and isolation settings of the code sandbox (how they are enforced: :mod:`podium.sandbox.sandbox`)."""

import sys

from pydantic import Field, NonNegativeInt, PositiveFloat, PositiveInt

from podium.config import Config


class SandboxConfig(Config):
    """Limits and isolation settings of the code sandbox."""

    cpu_time_s: PositiveFloat = 10.0
    """CPU seconds per process before it is stopped (RLIMIT_CPU, whole seconds); reported as TIMEOUT."""
    wall_time_s: PositiveFloat = 30.0
    """Wall-clock seconds before the whole sandbox is killed; reported as TIMEOUT."""
    memory_mb: PositiveInt = 1024
    """Memory in MiB: the address space of each process (RLIMIT_AS) and, where Podium can create a cgroup, all
    the sandbox's memory together (processes, shared memory and the files in its tmpfs)."""
    max_processes: PositiveInt = 64
    """Most processes and threads inside the sandbox (RLIMIT_NPROC, and pids.max with a cgroup)."""
    max_open_files: PositiveInt = 256
    """Most open file descriptors per process (RLIMIT_NOFILE)."""
    scratch_mb: PositiveInt = 64
    """Size of each writable filesystem (/scratch, /tmp and /dev/shm), in MiB; also the largest file that may be
    written."""
    max_output_bytes: PositiveInt = 65_536
    """Most bytes of stdout plus stderr kept; a program that writes more is stopped."""
    python: str = sys.executable
    """Interpreter that runs the code; its installation (and virtual environment) is visible read-only."""
    read_only_paths: list[str] = Field(default_factory=list)
    """Extra host paths made visible read-only at the same place (data sets, model files); sockets and FIFOs
    in them are hidden."""
    bwrap: str = "bwrap"
    """The bubblewrap executable."""
    allow_unisolated: bool = False
    """Run code as a plain subprocess when bubblewrap is unavailable. Unsafe: only for trusted code."""
    max_concurrent: PositiveInt = 8
    """Most sandboxes running at once; further runs wait."""
    warm_sandboxes: NonNegativeInt = 2
    """Sandboxes started ahead of calls, each waiting to serve exactly one call (0: start one per call)."""
    use_cgroups: bool = True
    """Give each sandbox a cgroup (memory and process limits for the whole sandbox) when this host allows it;
    False, or a host that does not, leaves the per-process bounds described in :mod:`podium.sandbox.sandbox`."""
    first_uid: PositiveInt = 100_000
    """When Podium runs as root, each live sandbox runs as its own uid, the lowest free one from this."""
    tag: str = Field(default="", pattern=r"^[A-Za-z0-9_.-]{0,64}$")
    """A label on the sandbox's processes (launcher command line and PODIUM_SANDBOX_TAG in the environment),
    so that a caller can find exactly its own sandboxes' processes (``podium.sandbox.tagged_processes``)."""

import pytest

from podium.sandbox import Sandbox, SandboxConfig


@pytest.fixture(scope="session")
def sandbox() -> Sandbox:
    """A sandbox with short limits so the adversarial tests finish quickly."""
    return Sandbox(SandboxConfig(cpu_time_s=2, wall_time_s=6, memory_mb=512, max_processes=32))

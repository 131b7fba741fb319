"""Isolated execution of untrusted, model-written code."""

from podium.sandbox.config import SandboxConfig
from podium.sandbox.sandbox import Sandbox, SandboxRun
from podium.sandbox.tagged import tagged_processes

__all__ = ["Sandbox", "SandboxConfig", "SandboxRun", "tagged_processes"]

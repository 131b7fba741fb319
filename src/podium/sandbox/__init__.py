"""Isolated execution of untrusted, model-written code."""

from podium.sandbox.sandbox import Sandbox, SandboxConfig, SandboxRun

__all__ = ["Sandbox", "SandboxConfig", "SandboxRun"]

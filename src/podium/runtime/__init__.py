"""The orchestrator runtime: one executor for inference, evaluation and RL rollouts."""

from podium.policies import build_policy
from podium.runtime.config import RunConfig
from podium.runtime.executor import Executor, Respond

__all__ = ["Executor", "Respond", "RunConfig", "build_policy"]

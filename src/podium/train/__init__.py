"""Training the orchestrator (SPEC §7): trajectories → masked samples, SFT on TRL, GRPO on TRL with rollouts from
Podium's own executor, and an adapter for multi-node training with verl. Needs the ``train`` extra."""

from podium.train.config import GRPOConfig, ModelConfig, RewardConfig, RolloutConfig, SFTConfig
from podium.train.samples import ChatFormat, TrainingDataError, TrainingSample, single_sample, trajectory_samples
from podium.train.sft import TrainResult, run_sft

__all__ = [
    "ChatFormat",
    "GRPOConfig",
    "ModelConfig",
    "RewardConfig",
    "RolloutConfig",
    "SFTConfig",
    "TrainResult",
    "TrainingDataError",
    "TrainingSample",
    "run_sft",
    "single_sample",
    "trajectory_samples",
]

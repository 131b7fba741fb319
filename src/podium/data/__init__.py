"""The training-data middle (SPEC §4, §6.2, §6.4): teacher trajectory collection, the RL difficulty filter, Uno's
verifier-gated curriculum, the failure classifier, preference pairs and ToolScale domain synthesis. Each stage
reads and writes JSONL that the ``datasets`` library loads, runs its units concurrently through Podium's executor,
resumes after an interruption, respects a USD cap, and ends with a funnel (``funnel.json``).

    funnel = asyncio.run(collect(CollectConfig(out="runs/sft", benchmark="gsm8k", limit=100)))
"""

from podium.data.collect import CollectConfig, collect
from podium.data.curriculum import CurriculumConfig, curriculum
from podium.data.difficulty import DifficultyConfig, filter_rl
from podium.data.failures import ClassifyConfig, classify_failures
from podium.data.preferences import PreferenceConfig, propose_preferences, read_preferences
from podium.data.store import DataError
from podium.data.synth import SynthConfig, synthesize_domain

__all__ = [
    "ClassifyConfig",
    "CollectConfig",
    "CurriculumConfig",
    "DataError",
    "DifficultyConfig",
    "PreferenceConfig",
    "SynthConfig",
    "classify_failures",
    "collect",
    "curriculum",
    "filter_rl",
    "propose_preferences",
    "read_preferences",
    "synthesize_domain",
]

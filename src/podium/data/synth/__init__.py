"""ToolScale synthesis of tau2-format domains (``podium synth domain``)."""

from podium.data.synth.config import SynthConfig
from podium.data.synth.run import synthesize_domain

__all__ = ["SynthConfig", "synthesize_domain"]

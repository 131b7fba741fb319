"""Graders: verifiers that turn an answer into the outcome b ∈ {0, 1} (SPEC §5.4), and the grader that picks
the verifier an item names. Evaluation and training grade through the same :class:`Grader`."""

from podium.graders.code import CodeVerifier
from podium.graders.environment import EnvironmentVerifier
from podium.graders.grader import Grader, GradingConfig
from podium.graders.judge import JudgeVerifier
from podium.graders.math import MathVerifier
from podium.graders.recorded import RecordedVerifier
from podium.graders.text import MultipleChoiceVerifier, QAVerifier, TokenF1Verifier
from podium.graders.verdict import Verdict, Verifier

__all__ = [
    "CodeVerifier",
    "EnvironmentVerifier",
    "Grader",
    "GradingConfig",
    "JudgeVerifier",
    "MathVerifier",
    "MultipleChoiceVerifier",
    "QAVerifier",
    "RecordedVerifier",
    "TokenF1Verifier",
    "Verdict",
    "Verifier",
]

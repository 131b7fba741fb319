"""Graders: verifiers that turn an answer into the outcome b ∈ {0, 1} (SPEC §5.4), and the grader that picks
the verifier an item names. Evaluation and training grade through the same :class:`Grader`."""

from podium.graders.code import CodeVerifier
from podium.graders.environment import EnvironmentVerifier
from podium.graders.grader import Grader
from podium.graders.judge import JudgeVerifier
from podium.graders.math import MathVerifier
from podium.graders.text import MultipleChoiceVerifier, QAVerifier
from podium.graders.verdict import Verdict, Verifier

__all__ = [
    "CodeVerifier",
    "EnvironmentVerifier",
    "Grader",
    "JudgeVerifier",
    "MathVerifier",
    "MultipleChoiceVerifier",
    "QAVerifier",
    "Verdict",
    "Verifier",
]

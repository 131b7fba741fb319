"""Evaluation: verifiers that turn an answer into the outcome b ∈ {0, 1}."""

from podium.evaluate.verifiers import (
    AssertTests,
    CodeVerifier,
    EnvironmentVerifier,
    HumanEvalTests,
    JudgeVerifier,
    MathVerifier,
    MultipleChoiceVerifier,
    QAVerifier,
    Verdict,
    Verifier,
)

__all__ = [
    "AssertTests",
    "CodeVerifier",
    "EnvironmentVerifier",
    "HumanEvalTests",
    "JudgeVerifier",
    "MathVerifier",
    "MultipleChoiceVerifier",
    "QAVerifier",
    "Verdict",
    "Verifier",
]

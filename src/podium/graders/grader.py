"""Judging an answer to a benchmark item with the verifier the item names (SPEC §5.4), or with one verifier for
every item (the LLM judge). Evaluation, training rewards and ``podium grade`` all grade through :class:`Grader`."""

from pathlib import Path
from typing import Literal

from pydantic import PositiveInt, model_validator

from podium.backends.factory import BackendSpec, build_backend
from podium.config import Config
from podium.core.answers import VerifierKind
from podium.core.trajectory import Trajectory
from podium.datasets.benchmark import shared_data_dir
from podium.datasets.items import AssertTests, BenchmarkItem, HumanEvalTests
from podium.graders.code import CodeVerifier
from podium.graders.environment import EnvironmentVerifier
from podium.graders.judge import MAX_VERDICT_TOKENS, JudgeVerifier
from podium.graders.math import MathVerifier
from podium.graders.recorded import RecordedVerifier
from podium.graders.text import MultipleChoiceVerifier, QAVerifier
from podium.graders.verdict import Verdict, Verifier
from podium.sandbox import Sandbox, SandboxConfig

ENVIRONMENT_GRADER = "tau2 task criteria"
"""How reports name the environment check when its verifier does not name itself."""


def gold_text(gold: str | list[str] | HumanEvalTests | AssertTests) -> str:
    """The gold as a short text for records and reports (code golds are test harnesses, summarised)."""
    if isinstance(gold, str):
        return gold
    if isinstance(gold, list):
        return " | ".join(gold)
    if isinstance(gold, HumanEvalTests):
        return f"check({gold.entry_point})"
    return f"{len(gold.test_list)} asserts"


class GradingConfig(Config):
    """How an evaluation grades answers (the ``grading:`` section of a system config).

    Example, an LLM judge in place of the benchmarks' own verifiers::

        grading:
          verifier: judge
          judge: {kind: http, model: gpt-4o-mini, base_url: https://api.openai.com/v1}
    """

    verifier: Literal["benchmark", "judge"] = "benchmark"
    """``benchmark``: each item's own verifier (math-verify, exact match, option letter, unit tests, tau2
    criteria). ``judge``: an LLM compares each answer with the gold (tool-use items keep their environment check,
    code items are left undecided)."""
    judge: BackendSpec | None = None
    """The judge model; required with ``verifier: judge``."""
    judge_max_tokens: PositiveInt = MAX_VERDICT_TOKENS
    """Most tokens the judge may write per verdict (room for a reasoning model to think first)."""

    @model_validator(mode="after")
    def _judge_named(self) -> "GradingConfig":
        if self.verifier == "judge" and self.judge is None:
            raise ValueError("verifier: judge needs a judge model (judge: {kind: http, model: …})")
        return self


class Grader:
    """Builds each verifier on first use: code needs a sandbox, tool use a loaded domain.

    With ``override`` (the LLM judge, token F1…), every item that is not a tool-use task is graded by that one
    verifier instead of the one it names.
    """

    def __init__(
        self,
        *,
        sandbox_config: SandboxConfig | None = None,
        data_dir: str | Path | None = None,
        override: Verifier | None = None,
    ) -> None:
        self.sandbox_config = sandbox_config or SandboxConfig()
        self.data_dir = data_dir
        self.override = override
        self._verifiers: dict[VerifierKind, Verifier] = {}
        self._environments: dict[str, EnvironmentVerifier] = {}

    @classmethod
    def from_config(cls, config: GradingConfig, **options: object) -> "Grader":
        """The grader a ``grading:`` section describes (``options`` as for the constructor)."""
        if config.verifier == "judge" and config.judge is not None:
            judge = JudgeVerifier(build_backend(config.judge), max_tokens=config.judge_max_tokens)
            return cls(override=judge, **options)  # type: ignore[arg-type]
        return cls(**options)  # type: ignore[arg-type]

    def verifier(self, kind: VerifierKind) -> Verifier:
        """The verifier that grades items of ``kind`` (the override, when there is one)."""
        if self.override is not None:
            return self.override
        if kind not in self._verifiers:
            if kind == "math":
                self._verifiers[kind] = MathVerifier()
            elif kind == "qa":
                self._verifiers[kind] = QAVerifier()
            elif kind == "multiple_choice":
                self._verifiers[kind] = MultipleChoiceVerifier()
            elif kind == "code":
                self._verifiers[kind] = CodeVerifier(Sandbox(self.sandbox_config))
            elif kind == "recorded":
                self._verifiers[kind] = RecordedVerifier()
            else:
                raise ValueError(f"verifier {kind!r} is per domain; use the environment path")
        return self._verifiers[kind]

    def grader_name(self, kind: VerifierKind) -> str:
        """How reports name the grader of items of ``kind``."""
        if kind == "environment":
            return ENVIRONMENT_GRADER
        return self.verifier(kind).name

    def _environment(self, domain_name: str) -> EnvironmentVerifier:
        if domain_name not in self._environments:
            from podium.envs import load_domain  # loads the tool pool; only tool-use benchmarks need it

            domain = load_domain(domain_name, shared_data_dir(self.data_dir) / "tau2")
            self._environments[domain_name] = EnvironmentVerifier(domain)
        return self._environments[domain_name]

    async def grade(self, item: BenchmarkItem, trajectory: Trajectory) -> Verdict:
        """The verdict on ``trajectory`` as an attempt at ``item``."""
        if item.verifier == "environment":
            verifier = self._environment(item.metadata["domain"])
            verdict = await verifier.verify(trajectory, verifier.domain.task(str(item.gold)))
            return verdict.model_copy(update={"grader": getattr(verifier, "name", ENVIRONMENT_GRADER)})
        return await self.grade_answer(item, trajectory.answer)

    async def grade_answer(self, item: BenchmarkItem, answer: str | None) -> Verdict:
        """The verdict on ``answer`` (a final answer or a whole reply) to a question-and-answer ``item``."""
        verifier = self.verifier(item.verifier)
        if answer is None:
            verdict = Verdict.binary(False, reason="no answer")
        else:
            verdict = await verifier.verify(answer, item.gold, question=item.question)
        return verdict.model_copy(update={"grader": verifier.name})

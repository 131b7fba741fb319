"""Judging a trajectory against a benchmark item with the verifier the item names (SPEC §5.4)."""

from pathlib import Path

from podium.benchmarks.items import AssertTests, BenchmarkItem, HumanEvalTests
from podium.benchmarks.loaders import shared_data_dir
from podium.core.answers import VerifierKind
from podium.core.trajectory import Trajectory
from podium.graders.code import CodeVerifier
from podium.graders.environment import EnvironmentVerifier
from podium.graders.math import MathVerifier
from podium.graders.text import MultipleChoiceVerifier, QAVerifier
from podium.graders.verdict import Verdict, Verifier
from podium.sandbox import Sandbox, SandboxConfig


def gold_text(gold: str | list[str] | HumanEvalTests | AssertTests) -> str:
    """The gold as a short text for records and reports (code golds are test harnesses, summarised)."""
    if isinstance(gold, str):
        return gold
    if isinstance(gold, list):
        return " | ".join(gold)
    if isinstance(gold, HumanEvalTests):
        return f"check({gold.entry_point})"
    return f"{len(gold.test_list)} asserts"


class Grader:
    """Builds each verifier on first use: code needs a sandbox, tool use a loaded domain."""

    def __init__(self, *, sandbox_config: SandboxConfig | None = None, data_dir: str | Path | None = None) -> None:
        self.sandbox_config = sandbox_config or SandboxConfig()
        self.data_dir = data_dir
        self._verifiers: dict[VerifierKind, Verifier] = {}
        self._environments: dict[str, EnvironmentVerifier] = {}

    def _verifier(self, kind: VerifierKind) -> Verifier:
        if kind not in self._verifiers:
            if kind == "math":
                self._verifiers[kind] = MathVerifier()
            elif kind == "qa":
                self._verifiers[kind] = QAVerifier()
            elif kind == "multiple_choice":
                self._verifiers[kind] = MultipleChoiceVerifier()
            elif kind == "code":
                self._verifiers[kind] = CodeVerifier(Sandbox(self.sandbox_config))
            else:
                raise ValueError(f"verifier {kind!r} is per domain; use the environment path")
        return self._verifiers[kind]

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
            return await verifier.verify(trajectory, verifier.domain.task(str(item.gold)))
        if trajectory.answer is None:
            return Verdict.binary(False, reason="no answer")
        return await self._verifier(item.verifier).verify(trajectory.answer, item.gold)

"""ParaManager's four-part reward R = R_task + R_fmt + R_div + R_eff (SPEC §5.2; seed 002 §3.3, eqs. 10–18)."""

import re
from dataclasses import dataclass

from podium.core.calls import Status
from podium.core.trajectory import Trajectory

FINAL_ANSWER_TOOL = "final_answer"

# One round: a reasoning block, then one or more tool-call blocks, and nothing else around them.
_ROUND_FORMAT = re.compile(
    r"\s*<reasoning>(?P<reasoning>.*?)</reasoning>\s*(?:<tool_call>(?:(?!<tool_call>).)+?</tool_call>\s*)+",
    re.DOTALL,
)


@dataclass(frozen=True)
class ParaManagerWeights:
    """The paper's thresholds and targets (defaults are the published ones)."""

    parallel_threshold: float = 1.25
    """θ_par: mean calls per round needed for R_par."""
    tool_threshold: int = 3
    """θ_tool: distinct tools (final_answer excluded) needed for R_tool."""
    target_tokens: int = 12_288
    """L_tar: token length under which R_len is 1; it falls linearly to 0 at twice this."""
    target_cost_units: float = 8.0
    """C_tar: cost units under which R_cost is 1; it falls linearly to 0 at twice this."""
    diversity: bool = True
    """Whether R_div counts; off, it is 0 (the paper's ablation without the diversity reward)."""


@dataclass(frozen=True)
class ParaManagerReward:
    """The four terms and their sum."""

    task: float
    format: float
    diversity: float
    efficiency: float

    @property
    def total(self) -> float:
        return self.task + self.format + self.diversity + self.efficiency


def round_follows_format(output: str) -> bool:
    """Fmt(y_t): the round is ``<reasoning>…</reasoning>`` followed by ``<tool_call>…</tool_call>`` blocks."""
    match = _ROUND_FORMAT.fullmatch(output)
    return match is not None and bool(match.group("reasoning").strip())


def soft_budget(value: float, target: float) -> float:
    """1 up to ``target``, then linearly down to 0 at twice the target (eqs. 16–17)."""
    if target <= 0:
        raise ValueError("a budget target must be positive")
    if value <= target:
        return 1.0
    return max(0.0, (2 * target - value) / target)


def trajectory_tokens(trajectory: Trajectory) -> int:
    """L(τ): the length of the whole trajectory, i.e. the last turn's prompt (which holds every earlier turn
    and observation) plus its completion. Summing every turn's prompt would count the context many times."""
    if not trajectory.turns:
        return 0
    return trajectory.turns[-1].usage.tokens


def paramanager_reward(
    trajectory: Trajectory,
    correct: bool,
    weights: ParaManagerWeights = ParaManagerWeights(),
    length_tokens: int | None = None,
) -> ParaManagerReward:
    """R(τ) for one trajectory; ``correct`` is the verifier's verdict on the final answer.

    Calls that were never executed (PARSE_ERR) count neither as parallel calls nor as tools used: issuing
    malformed calls must not earn the diversity reward. ``length_tokens`` overrides L(τ) when the caller
    counts tokens itself (e.g. with the policy's tokenizer).
    """
    rounds = trajectory.turns
    fmt = sum(round_follows_format(turn.output) for turn in rounds) / len(rounds) if rounds else 0.0
    executed = [[r for r in turn.results if r.status is not Status.PARSE_ERR] for turn in rounds]
    mean_calls = sum(len(calls) for calls in executed) / len(rounds) if rounds else 0.0
    tools = {result.call.name for calls in executed for result in calls} - {FINAL_ANSWER_TOOL}
    parallel = 1.0 if mean_calls >= weights.parallel_threshold else 0.0
    variety = 1.0 if len(tools) >= weights.tool_threshold else 0.0
    length = trajectory_tokens(trajectory) if length_tokens is None else length_tokens
    efficiency = 0.5 * (
        soft_budget(length, weights.target_tokens) + soft_budget(trajectory.usage.cost_units, weights.target_cost_units)
    )
    return ParaManagerReward(
        task=1.0 if correct else 0.0,
        format=fmt,
        diversity=0.5 * (parallel + variety) if weights.diversity else 0.0,
        efficiency=efficiency,
    )

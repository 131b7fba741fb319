"""ToolOrchestra's preference-aware reward (SPEC §5.1; seed 000 §3.2 and appendix 20).

Per trajectory τ the metric vector is M = [calls of tool 1 … calls of tool n, r_outcome, r_compute, r_latency]
with r_compute = −USD and r_latency = −seconds. Training normalises each component min-max over the rollout
batch and scores R = M_norm · P when the task was solved, else 0. Evaluation normalises against the starting
checkpoint's vector M_0 on the same example instead.
"""

from collections import Counter
from collections.abc import Sequence

from podium.core.preference import Preference
from podium.core.trajectory import Trajectory


def metric_vector(trajectory: Trajectory, tools: Sequence[str], solved: bool) -> list[float]:
    """M for training: per-tool call counts, r_outcome ∈ {0, 1}, r_compute = −USD, r_latency = −seconds."""
    counts = Counter(result.call.name for result in trajectory.results)
    return [
        *(float(counts[name]) for name in tools),
        1.0 if solved else 0.0,
        -trajectory.usage.usd,
        -trajectory.wall_s,
    ]


def metric_magnitudes(trajectory: Trajectory, tools: Sequence[str], solved: bool) -> list[float]:
    """M for evaluation: like :func:`metric_vector` but cost and latency as positive magnitudes."""
    *counts_and_outcome, compute, latency = metric_vector(trajectory, tools, solved)
    return [*counts_and_outcome, -compute, -latency]


def min_max_normalise(vectors: Sequence[Sequence[float]]) -> list[list[float]]:
    """Each component scaled to [0, 1] over the batch; a component with max = min becomes 0 for everyone."""
    if not vectors:
        return []
    width = len(vectors[0])
    if any(len(vector) != width for vector in vectors):
        raise ValueError("every metric vector in a batch must have the same length")
    lows = [min(vector[k] for vector in vectors) for k in range(width)]
    highs = [max(vector[k] for vector in vectors) for k in range(width)]
    return [
        [(vector[k] - lows[k]) / (highs[k] - lows[k]) if highs[k] > lows[k] else 0.0 for k in range(width)]
        for vector in vectors
    ]


def _dot(left: Sequence[float], right: Sequence[float]) -> float:
    if len(left) != len(right):
        raise ValueError(f"metric vector has {len(left)} components but the preference vector has {len(right)}")
    return sum(a * b for a, b in zip(left, right, strict=True))


def _preference_of(trajectory: Trajectory, preference: Preference | None) -> Preference:
    chosen = preference if preference is not None else trajectory.preference
    if chosen is None:
        raise ValueError(f"trajectory {trajectory.id} has no preference and none was given")
    return chosen


def batch_rewards(
    trajectories: Sequence[Trajectory],
    solved: Sequence[bool],
    tools: Sequence[str],
    preference: Preference | None = None,
) -> list[float]:
    """Training reward of each rollout in a batch: M_norm · P if solved, else 0.

    ``preference`` applies to every rollout; when omitted each trajectory's own preference is used.
    """
    if len(trajectories) != len(solved):
        raise ValueError("one outcome per trajectory is required")
    vectors = [metric_vector(t, tools, s) for t, s in zip(trajectories, solved, strict=True)]
    normalised = min_max_normalise(vectors)
    return [
        _dot(vector, _preference_of(trajectory, preference).vector(list(tools))) if is_solved else 0.0
        for trajectory, vector, is_solved in zip(trajectories, normalised, solved, strict=True)
    ]


def normalise_against_baseline(current: Sequence[float], baseline: Sequence[float]) -> list[float]:
    """Appendix 20: M_s[k] / max(1, M_0[k]) for tool counts and outcome; M_0[k] / max(1, M_s[k]) for cost and
    latency, both as positive magnitudes, so spending less than the baseline scores higher.

    (The NVIDIA code kept the baseline's cost and latency negated but divided by the current value taken
    positively, which makes a cheaper run score lower; magnitudes keep the ratio's sign right.)
    """
    if len(current) != len(baseline):
        raise ValueError("current and baseline metric vectors differ in length")
    if len(current) < 3:
        raise ValueError("a metric vector ends with outcome, compute and latency")
    if any(value < 0 for value in [*current[-2:], *baseline[-2:]]):
        raise ValueError("cost and latency must be given as non-negative magnitudes (use metric_magnitudes)")
    head = len(current) - 2
    return [
        *(current[k] / max(1.0, baseline[k]) for k in range(head)),
        *(baseline[k] / max(1.0, current[k]) for k in range(head, len(current))),
    ]


def evaluation_reward(
    trajectory: Trajectory,
    solved: bool,
    baseline: Trajectory,
    baseline_solved: bool,
    tools: Sequence[str],
    preference: Preference | None = None,
) -> float:
    """R^e: the preference-weighted vector normalised against the starting checkpoint's run, if solved, else 0.

    The benchmark's preference-aware score is the sum of this over examples.
    """
    if not solved:
        return 0.0
    current = metric_magnitudes(trajectory, tools, solved)
    reference = metric_magnitudes(baseline, tools, baseline_solved)
    weights = _preference_of(trajectory, preference).vector(list(tools))
    return _dot(normalise_against_baseline(current, reference), weights)

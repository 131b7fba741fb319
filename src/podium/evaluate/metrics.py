"""Metrics of an evaluation run (SPEC §8): pure functions of its records.

Conventions: a *query* is one attempt (one item × one sample). pass@1 is the accuracy of each item's first
sample (what a one-sample run reports); mean@k averages every sample, which is also the unbiased pass@1
estimator over k samples; pass@2 is the unbiased pass@k estimator (Chen et al., 2021) with k = 2.
"""

import math
from collections import Counter, defaultdict
from collections.abc import Sequence

from pydantic import NonNegativeInt

from podium.core.preference import Preference
from podium.core.record import Record
from podium.evaluate.runner import EvalRecord
from podium.rewards.toolorchestra import evaluation_reward


def pass_at_k(n: int, c: int, k: int) -> float:
    """Probability that at least one of k samples drawn without replacement from n, c of them correct, is
    correct: 1 − C(n−c, k) / C(n, k)."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"need 0 ≤ c ≤ n and 1 ≤ k ≤ n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def by_item(records: Sequence[EvalRecord]) -> dict[str, list[EvalRecord]]:
    """Records grouped by item, each group ordered by sample index."""
    groups: dict[str, list[EvalRecord]] = defaultdict(list)
    for record in records:
        groups[record.item_id].append(record)
    return {item: sorted(group, key=lambda record: record.sample) for item, group in groups.items()}


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def pass_at_1(records: Sequence[EvalRecord]) -> float:
    """Share of items whose first sample is correct."""
    return _mean([float(group[0].verdict.correct) for group in by_item(records).values()])


def pass_at_2(records: Sequence[EvalRecord]) -> float | None:
    """Mean over items of the unbiased pass@2 estimate; None unless every item has at least two samples."""
    groups = by_item(records).values()
    if not groups or any(len(group) < 2 for group in groups):
        return None
    return _mean([pass_at_k(len(group), sum(r.verdict.correct for r in group), 2) for group in groups])


def mean_at_k(records: Sequence[EvalRecord]) -> float:
    """Mean over items of the share of correct samples."""
    return _mean([_mean([float(r.verdict.correct) for r in group]) for group in by_item(records).values()])


def usd_per_query(records: Sequence[EvalRecord]) -> float:
    return _mean([record.usage.usd for record in records])


def tokens_per_query(records: Sequence[EvalRecord]) -> float:
    return _mean([float(record.usage.tokens) for record in records])


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0–100) with linear interpolation between order statistics (NumPy's default)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100.0
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def latency_mean(records: Sequence[EvalRecord]) -> float:
    return _mean([record.wall_s for record in records])


def latency_p95(records: Sequence[EvalRecord]) -> float:
    return percentile([record.wall_s for record in records], 95.0)


def tool_call_distribution(records: Sequence[EvalRecord]) -> dict[str, int]:
    """Calls per tool over every trajectory, most used first (the papers' pie charts)."""
    counts = Counter(result.call.name for record in records for result in record.trajectory.results)
    return dict(counts.most_common())


UNRECORDED_GRADER = "grader not recorded"
"""Shown for verdicts written before records named their grader."""


def graders(records: Sequence[EvalRecord]) -> list[str]:
    """The graders behind the run's accuracy, most verdicts first (attempts whose system failed were graded by
    none and are left out)."""
    counts = Counter(record.verdict.grader or UNRECORDED_GRADER for record in records if record.error is None)
    return [name for name, _ in counts.most_common()]


def call_status_counts(records: Sequence[EvalRecord]) -> dict[str, int]:
    """Calls per status (OK, PARSE_ERR, EXEC_ERR, TIMEOUT) over every trajectory."""
    counts = Counter(str(result.status) for record in records for result in record.trajectory.results)
    return dict(counts.most_common())


class PreferenceScore(Record):
    """ToolOrchestra's evaluation-time preference-aware score against a baseline run."""

    score: float
    """Sum over matched attempts of R^e (SPEC §5.1, appendix 20)."""
    matched: NonNegativeInt
    """Attempts present in both runs (same item and sample)."""
    unmatched: NonNegativeInt
    """Attempts of this run the baseline lacks (not scored)."""


def preference_score(
    records: Sequence[EvalRecord], baseline: Sequence[EvalRecord], tools: Sequence[str], preference: Preference
) -> PreferenceScore:
    """Σ R^e over attempts, each normalised against the baseline's attempt at the same item and sample."""
    reference = {record.key: record for record in baseline}
    score, matched = 0.0, 0
    for record in records:
        base = reference.get(record.key)
        if base is None:
            continue
        matched += 1
        score += evaluation_reward(
            record.trajectory, record.verdict.correct, base.trajectory, base.verdict.correct, tools, preference
        )
    return PreferenceScore(score=score, matched=matched, unmatched=len(records) - matched)


def pareto_front(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indices of the (cost, accuracy) points no other point beats: none is as cheap and at least as accurate
    with one of the two strictly better. Ordered by cost."""
    front = [
        index
        for index, (cost, accuracy) in enumerate(points)
        if not any(
            other_cost <= cost and other_accuracy >= accuracy and (other_cost, other_accuracy) != (cost, accuracy)
            for other_cost, other_accuracy in points
        )
    ]
    return sorted(front, key=lambda index: points[index])


class RunMetrics(Record):
    """The per-benchmark row of a report."""

    items: NonNegativeInt
    """Distinct items attempted."""
    queries: NonNegativeInt
    """Attempts (items × samples)."""
    pass_at_1: float
    """Share of items whose first sample is correct."""
    pass_at_2: float | None
    """Unbiased pass@2; None when some item has fewer than two samples."""
    mean_at_k: float
    """Mean share of correct samples per item."""
    usd_per_query: float
    """Mean USD per attempt."""
    tokens_per_query: float
    """Mean tokens (prompt plus completion, every model) per attempt."""
    latency_mean_s: float
    """Mean wall-clock seconds per attempt."""
    latency_p95_s: float
    """95th percentile of wall-clock seconds per attempt."""
    errors: NonNegativeInt
    """Attempts whose system failed."""
    unverified: NonNegativeInt
    """Attempts the verifier could not decide (counted as wrong)."""
    graders: list[str]
    """Who judged correctness for pass@1, pass@2 and mean@k ("math-verify 0.9.0 + Podium rules"…)."""
    tool_calls: dict[str, int]
    """Calls per tool, most used first."""
    call_statuses: dict[str, int]
    """Calls per status."""


def run_metrics(records: Sequence[EvalRecord]) -> RunMetrics:
    """Every metric of one run."""
    return RunMetrics(
        items=len(by_item(records)),
        queries=len(records),
        pass_at_1=pass_at_1(records),
        pass_at_2=pass_at_2(records),
        mean_at_k=mean_at_k(records),
        usd_per_query=usd_per_query(records),
        tokens_per_query=tokens_per_query(records),
        latency_mean_s=latency_mean(records),
        latency_p95_s=latency_p95(records),
        errors=sum(record.error is not None for record in records),
        unverified=sum(record.verdict.error is not None for record in records),
        graders=graders(records),
        tool_calls=tool_call_distribution(records),
        call_statuses=call_status_counts(records),
    )

"""The gate a candidate passes before it replaces the system serving: a paired comparison of two runs on the same
items (``podium eval --against BASELINE``), with bootstrap intervals (:mod:`podium.evaluate.intervals`), and the
rule that decides whether the candidate wins.

Both runs are ``podium eval`` run directories: a benchmark evaluated with each system, or the held-back slice of
served traffic (``podium data collect --from-served`` writes the serving version's episodes on it as a run, and the
candidate is evaluated on its tasks). Items are paired by id; an item's value under a system is the mean over its
samples. Each metric is compared as ``candidate − baseline``:

* ``accuracy``: the share answered correctly;
* ``usd``: US dollars per question;
* ``reward``: the success-gated cost penalty the claim's GRPO trains for, ``correct × (1 − USD / cost_usd_scale)``
  per question (with ``cost_usd_scale`` set).

The candidate **wins** when the gate's metric is higher on these items (a positive difference) and the interval's
lower end is above ``−margin``: at the interval's confidence it is no worse than the baseline by more than
``margin``.
"""

from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Literal, Self

from pydantic import Field, NonNegativeFloat, PositiveFloat, PositiveInt, model_validator

from podium.config import Config
from podium.core.record import Record
from podium.errors import PodiumError
from podium.evaluate.intervals import DEFAULT_RESAMPLES, PairedInterval, paired_bootstrap
from podium.evaluate.runner import EvalRecord, load_run

COMPARISON_FILE = "comparison.json"
"""Where ``podium eval --against`` writes the comparison, in the candidate's run directory."""
Metric = Literal["accuracy", "usd", "reward"]


class GateError(PodiumError):
    """Two runs cannot be compared (no item in common, a run that is not one)."""


class GateConfig(Config):
    """How a candidate run is compared with a baseline run, and when it wins."""

    against: str | None = None
    """The baseline: a ``podium eval`` run directory on the same items (the serving system's run, or its held-back
    served traffic: ``heldout-VERSION/`` of ``podium data collect --from-served``)."""
    metric: Literal["accuracy", "reward"] = "accuracy"
    """What the candidate must win on: ``accuracy``, or ``reward`` (correct × (1 − USD / cost_usd_scale))."""
    cost_usd_scale: PositiveFloat | None = None
    """The USD that costs a correct answer all of its reward (the claim's GRPO: 0.015); needed by ``reward``."""
    margin: NonNegativeFloat = 0.0
    """How much worse than the baseline the interval may reach and the candidate still win."""
    confidence: float = Field(0.95, gt=0.0, lt=1.0)
    """The intervals' coverage."""
    resamples: PositiveInt = DEFAULT_RESAMPLES
    """Bootstrap resamples."""
    seed: int = 0
    """Seed of the resamples."""

    @model_validator(mode="after")
    def _scale_given(self) -> Self:
        if self.metric == "reward" and self.cost_usd_scale is None:
            raise ValueError("metric reward needs cost_usd_scale, the USD that costs a correct answer its reward")
        return self


class RunSide(Record):
    """One side of a comparison."""

    run: str
    """The run directory."""
    system: str
    """The system's name."""
    version: str | None
    """The system's version, when its episodes recorded one version (``None``: none or several)."""


class MetricComparison(Record):
    """One metric on the paired items: each system's value and the interval of the difference."""

    baseline: float
    candidate: float
    interval: PairedInterval


class Comparison(Record):
    """A candidate run compared with a baseline run on their common items, and the gate's decision."""

    baseline: RunSide
    candidate: RunSide
    items: int
    """Items both runs answered."""
    unpaired: int
    """Items only one of them answered (left out)."""
    metrics: dict[str, MetricComparison]
    """``accuracy``, ``usd`` and (with ``cost_usd_scale``) ``reward``."""
    gate: GateConfig
    """The rule applied."""
    passed: bool
    """Whether the candidate wins."""
    reason: str
    """Why it does or does not."""


def _version(records: Sequence[EvalRecord]) -> str | None:
    versions = Counter(record.trajectory.metadata.get("system_version") for record in records)
    return next(iter(versions)) if len(versions) == 1 else None


def _per_item(records: Sequence[EvalRecord], scale: float | None) -> dict[str, tuple[float, float, float]]:
    """Item → the mean over its samples of (correct, USD, reward)."""
    samples: dict[str, list[tuple[float, float, float]]] = defaultdict(list)
    for record in records:
        correct, usd = float(record.verdict.correct), record.usage.usd
        reward = correct * (1.0 - usd / scale) if scale else correct
        samples[record.item_id].append((correct, usd, reward))
    return {
        item: tuple(sum(column) / len(values) for column in zip(*values, strict=True))
        for item, values in samples.items()
    }  # type: ignore[misc]


def compare_runs(baseline_dir: str | Path, candidate_dir: str | Path, gate: GateConfig) -> Comparison:
    """The paired comparison of two runs on their common items, and whether the candidate passes ``gate``."""
    sides = []
    values = []
    for directory in (baseline_dir, candidate_dir):
        manifest, records = load_run(directory)
        if not records:
            raise GateError(f"{directory} holds no graded attempt")
        version = _version(records) or manifest.system_config.get("system_version")
        sides.append(RunSide(run=str(directory), system=manifest.system, version=version))
        values.append(_per_item(records, gate.cost_usd_scale))
    common = sorted(set(values[0]) & set(values[1]))
    if not common:
        raise GateError(f"{baseline_dir} and {candidate_dir} have no item in common: compare runs on the same items")
    names: list[Metric] = ["accuracy", "usd", *(["reward"] if gate.cost_usd_scale else [])]  # type: ignore[list-item]
    metrics = {}
    for column, name in enumerate(names):
        base = [values[0][item][column] for item in common]
        cand = [values[1][item][column] for item in common]
        interval = paired_bootstrap(base, cand, gate.resamples, gate.seed, confidence=gate.confidence)
        metrics[name] = MetricComparison(
            baseline=sum(base) / len(base), candidate=sum(cand) / len(cand), interval=interval
        )
    passed, reason = decide(metrics[gate.metric].interval, gate)
    unpaired = len(set(values[0]) ^ set(values[1]))
    return Comparison(
        baseline=sides[0], candidate=sides[1], items=len(common), unpaired=unpaired, metrics=metrics, gate=gate,
        passed=passed, reason=reason,
    )  # fmt: skip


def decide(interval: PairedInterval, gate: GateConfig) -> tuple[bool, str]:
    """Whether a candidate whose ``gate.metric`` differs from the baseline's by ``interval`` wins, and why."""
    bounds = f"[{interval.low:+.4f}, {interval.high:+.4f}]"
    shown = f"{gate.metric} {interval.difference:+.4f} {bounds} at {interval.confidence:.0%}"
    if interval.difference <= 0:
        return False, f"{shown}: not higher than the baseline's on these {interval.items} items"
    if interval.low < -gate.margin:
        return False, f"{shown}: the interval reaches below −{gate.margin:g}, too uncertain to replace the baseline"
    return True, f"{shown}: higher, and no worse than −{gate.margin:g} at the interval's confidence"

"""ParaManager's SFT selection over correct trajectories: at most k per question, recoveries first, then tool
balance across the whole set (no tool above a share of all calls), swapping in another correct trajectory of the
same question where that helps and dropping one where it does not."""

from collections import Counter
from dataclasses import dataclass, field

from podium.data.traces import recovered_from, tool_counts
from podium.graders.records import DataRow


def preference_order(rows: list[DataRow], prefer_recovered: bool) -> list[DataRow]:
    """A question's correct trajectories, best first: those that recovered from a failure (when preferred),
    then by sample index."""
    return sorted(rows, key=lambda row: (prefer_recovered and not recovered_from(row.trajectory), row.sample))


def per_question(
    candidates: dict[str, list[DataRow]], keep: int, prefer_recovered: bool
) -> tuple[dict[str, list[DataRow]], dict[str, list[DataRow]]]:
    """``(chosen, spare)``: each question's best ``keep`` trajectories and the rest in preference order."""
    chosen: dict[str, list[DataRow]] = {}
    spare: dict[str, list[DataRow]] = {}
    for item_id, rows in candidates.items():
        ordered = preference_order(rows, prefer_recovered)
        chosen[item_id], spare[item_id] = ordered[:keep], ordered[keep:]
    return chosen, spare


@dataclass
class Balance:
    """The outcome of tool balancing."""

    chosen: dict[str, list[DataRow]]
    dropped: list[tuple[DataRow, str]] = field(default_factory=list)
    """Rows removed from the set, with the reason."""
    swaps: int = 0
    """Rows replaced by another correct trajectory of the same question."""
    note: str | None = None
    """Why the cap could not be met, when it could not."""


def _counts(chosen: dict[str, list[DataRow]]) -> Counter[str]:
    total: Counter[str] = Counter()
    for rows in chosen.values():
        for row in rows:
            total.update(tool_counts(row.trajectory))
    return total


def _share(counts: Counter[str], tool: str) -> float:
    total = sum(counts.values())
    return counts[tool] / total if total else 0.0


def _top_share(counts: Counter[str]) -> float:
    return max((_share(counts, tool) for tool in counts), default=0.0)


def _best_swap(chosen: dict[str, list[DataRow]], spare: dict[str, list[DataRow]]) -> bool:
    """Replace one chosen row by a spare of the same question when that lowers the largest share of any tool
    (strictly, so swaps never cycle)."""
    counts = _counts(chosen)
    best: tuple[float, str, int, DataRow] | None = None
    for item_id, rows in chosen.items():
        for position, row in enumerate(rows):
            for alternative in spare.get(item_id, []):
                trial = counts - tool_counts(row.trajectory) + tool_counts(alternative.trajectory)
                share = _top_share(trial)
                if share < _top_share(counts) and (best is None or share < best[0]):
                    best = (share, item_id, position, alternative)
    if best is None:
        return False
    _, item_id, position, alternative = best
    spare[item_id].remove(alternative)
    spare[item_id].append(chosen[item_id][position])
    chosen[item_id][position] = alternative
    return True


def balance_tools(chosen: dict[str, list[DataRow]], spare: dict[str, list[DataRow]], max_share: float) -> Balance:
    """Lower the most-called tool's share of all calls to at most ``max_share``: swap a question's trajectory for
    a spare one when that lowers the largest share, else drop the row that leans most on the most-called tool.
    Swaps strictly lower the largest share and drops shrink the set, so the loop ends."""
    chosen = {item_id: list(rows) for item_id, rows in chosen.items()}
    spare = {item_id: list(rows) for item_id, rows in spare.items()}
    outcome = Balance(chosen)
    while True:
        counts = _counts(chosen)
        if not counts:
            return outcome
        tool, calls = counts.most_common(1)[0]
        share = calls / sum(counts.values())
        if share <= max_share:
            return outcome
        if 1 / len(counts) > max_share:
            outcome.note = f"tool balance: only {len(counts)} tool(s) called, so no set keeps each under {max_share:g}"
            return outcome
        if _best_swap(chosen, spare):
            outcome.swaps += 1
            continue
        leaning = [
            (tool_counts(row.trajectory)[tool] / max(1, sum(tool_counts(row.trajectory).values())), item_id, row)
            for item_id, rows in chosen.items()
            for row in rows
            if tool_counts(row.trajectory)[tool]
        ]
        lean, item_id, row = max(leaning, key=lambda entry: (entry[0], tool_counts(entry[2].trajectory)[tool]))
        if lean <= share:  # every row leans on the tool as much as the set: dropping cannot lower its share
            outcome.note = f"tool balance: every trajectory calls {tool} as often as the set does; cap not met"
            return outcome
        chosen[item_id].remove(row)
        outcome.dropped.append((row, f"tool balance: {tool} above {max_share:g} of calls"))

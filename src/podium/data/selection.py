"""ParaManager's SFT selection over correct trajectories: at most k per question, recoveries first, then tool
balance across the whole set (no tool above a share of all calls), swapping in another correct trajectory of the
same question where that helps and dropping one where it does not."""

from collections import Counter
from dataclasses import dataclass, field

from podium.data.traces import recovered_from, tool_counts
from podium.solve.records import DataRow


def turn_costs(row: DataRow) -> tuple[float, ...]:
    """USD spent at each turn (the orchestrator's generation and its calls), in order."""
    return tuple(turn.usage.usd + sum(result.usage.usd for result in turn.results) for turn in row.trajectory.turns)


def preference_order(rows: list[DataRow], prefer_recovered: bool, prefer_cheap: bool = False) -> list[DataRow]:
    """A question's correct trajectories, best first: those that recovered from a failure (when preferred), then
    those that spent least turn by turn (when preferred: compared at the first turn, then the next…), then by
    sample index."""

    def key(row: DataRow) -> tuple[bool, tuple[float, ...], int]:
        return (
            prefer_recovered and not recovered_from(row.trajectory),
            turn_costs(row) if prefer_cheap else (),
            row.sample,
        )

    return sorted(rows, key=key)


def per_question(
    candidates: dict[str, list[DataRow]], keep: int, prefer_recovered: bool, prefer_cheap: bool = False
) -> tuple[dict[str, list[DataRow]], dict[str, list[DataRow]]]:
    """``(chosen, spare)``: each question's best ``keep`` trajectories and the rest in preference order."""
    chosen: dict[str, list[DataRow]] = {}
    spare: dict[str, list[DataRow]] = {}
    for item_id, rows in candidates.items():
        ordered = preference_order(rows, prefer_recovered, prefer_cheap)
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


def _share(counts: Counter[str], tool: str) -> float:
    total = sum(counts.values())
    return counts[tool] / total if total else 0.0


def _top_share(counts: Counter[str]) -> float:
    return max((_share(counts, tool) for tool in counts), default=0.0)


class _Balancer:
    """The state of one balancing: the chosen and spare rows, and each row's calls per tool (counted once)."""

    def __init__(self, chosen: dict[str, list[DataRow]], spare: dict[str, list[DataRow]]) -> None:
        self.chosen = {item_id: list(rows) for item_id, rows in chosen.items()}
        self.spare = {item_id: list(rows) for item_id, rows in spare.items()}
        every = [row for rows in [*chosen.values(), *spare.values()] for row in rows]
        self.calls = {row.id: tool_counts(row.trajectory) for row in every}

    def counts(self) -> Counter[str]:
        total: Counter[str] = Counter()
        for rows in self.chosen.values():
            for row in rows:
                total.update(self.calls[row.id])
        return total

    def best_swap(self) -> bool:
        """Replace one chosen row by a spare of the same question when that lowers the largest share of any
        tool (strictly, so swaps never cycle)."""
        counts = self.counts()
        best: tuple[float, str, int, DataRow] | None = None
        for item_id, rows in self.chosen.items():
            for position, row in enumerate(rows):
                for alternative in self.spare.get(item_id, []):
                    share = _top_share(counts - self.calls[row.id] + self.calls[alternative.id])
                    if share < _top_share(counts) and (best is None or share < best[0]):
                        best = (share, item_id, position, alternative)
        if best is None:
            return False
        _, item_id, position, alternative = best
        self.spare[item_id] = [row for row in self.spare[item_id] if row.id != alternative.id]
        self.spare[item_id].append(self.chosen[item_id][position])
        self.chosen[item_id][position] = alternative
        return True

    def leaning_row(self, tool: str) -> tuple[float, str, DataRow]:
        """The chosen row that leans most on ``tool`` (its share of the row's calls, then its calls)."""
        leaning = [
            (self.calls[row.id][tool] / max(1, sum(self.calls[row.id].values())), item_id, row)
            for item_id, rows in self.chosen.items()
            for row in rows
            if self.calls[row.id][tool]
        ]
        return max(leaning, key=lambda entry: (entry[0], self.calls[entry[2].id][tool]))


def balance_tools(chosen: dict[str, list[DataRow]], spare: dict[str, list[DataRow]], max_share: float) -> Balance:
    """Lower the most-called tool's share of all calls to at most ``max_share``: swap a question's trajectory for
    a spare one when that lowers the largest share, else drop the row that leans most on the most-called tool.
    Swaps strictly lower the largest share and drops shrink the set, so the loop ends."""
    state = _Balancer(chosen, spare)
    outcome = Balance(state.chosen)
    while True:
        counts = state.counts()
        if not counts:
            return outcome
        tool, calls = counts.most_common(1)[0]
        share = calls / sum(counts.values())
        if share <= max_share:
            return outcome
        if 1 / len(counts) > max_share:
            outcome.note = f"tool balance: only {len(counts)} tool(s) called, so no set keeps each under {max_share:g}"
            return outcome
        if state.best_swap():
            outcome.swaps += 1
            continue
        lean, item_id, row = state.leaning_row(tool)
        if lean <= share:  # every row leans on the tool as much as the set: dropping cannot lower its share
            outcome.note = f"tool balance: every trajectory calls {tool} as often as the set does; cap not met"
            return outcome
        state.chosen[item_id] = [kept for kept in state.chosen[item_id] if kept.id != row.id]
        outcome.dropped.append((row, f"tool balance: {tool} above {max_share:g} of calls"))

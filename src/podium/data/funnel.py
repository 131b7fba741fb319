"""Funnels: how many units entered and left each filter of a stage and why, counted as the filters run, checked
to add up, saved as ``funnel.json`` (read by ``podium report``) and printed in the terminal."""

import json
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TypeVar

from rich.console import Console
from rich.table import Table
from rich.text import Text

from podium import __version__
from podium.core.files import write_atomically
from podium.core.printable import printable
from podium.solve.records import FUNNEL_FILE, Funnel, FunnelStep

V = TypeVar("V")


class FunnelBuilder:
    """Collects the steps of one stage's funnel."""

    def __init__(self, stage: str) -> None:
        self.stage = stage
        self.steps: list[FunnelStep] = []
        self.notes: list[str] = []

    def count(self, name: str, unit: str, entered: int, left: Counter[str] | dict[str, int]) -> FunnelStep:
        """Record a step whose outcome was counted elsewhere: ``entered`` units, ``left`` reason → count."""
        reasons = {reason: count for reason, count in left.items() if count}
        if sum(reasons.values()) > entered:
            raise ValueError(f"funnel step {name!r}: more units left ({sum(reasons.values())}) than entered")
        step = FunnelStep(name=name, unit=unit, entered=entered, kept=entered - sum(reasons.values()), left=reasons)
        self.steps.append(step)
        return step

    def apply(self, name: str, unit: str, values: Iterable[V], reason: Callable[[V], str | None]) -> list[V]:
        """Filter ``values``: each one ``reason`` names a reason for leaves; the step is recorded."""
        kept: list[V] = []
        left: Counter[str] = Counter()
        entered = 0
        for value in values:
            entered += 1
            why = reason(value)
            if why is None:
                kept.append(value)
            else:
                left[why] += 1
        self.count(name, unit, entered, left)
        return kept

    def note(self, text: str) -> None:
        self.notes.append(text)

    def build(self, outputs: dict[str, int], *, usd: float, wall_s: float) -> Funnel:
        return Funnel(
            stage=self.stage,
            steps=list(self.steps),
            outputs=outputs,
            usd=usd,
            wall_s=wall_s,
            podium_version=__version__,
            notes=list(self.notes),
        )


def reasons(step: FunnelStep) -> str:
    """Why units left a filter, the most common reason first."""
    return "; ".join(f"{reason}: {count}" for reason, count in sorted(step.left.items(), key=lambda kv: -kv[1]))


def why_empty(steps: Sequence[FunnelStep], products: Sequence[str], notes: Sequence[str] = ()) -> str:
    """Why a stage's ``products`` hold nothing: the first filter that kept none of what entered it, with its
    reasons, or the first one nothing reached, with the stage's notes on that step (an LLM step that failed)."""
    made = " and ".join(products)
    for step in steps:
        if step.entered and not step.kept:
            return f"nothing reached {made}: '{step.name}' removed all {step.entered} {step.unit} ({reasons(step)})"
        if not step.entered:
            said = [note for note in notes if note.startswith(step.name)]
            return f"nothing reached {made}: no {step.unit} reached '{step.name}'" + (
                f" ({'; '.join(said)})" if said else ""
            )
    return f"nothing reached {made}" + (f" ({'; '.join(notes)})" if notes else "")


def save_funnel(out: Path, funnel: Funnel) -> Path:
    """Write ``funnel.json`` into the stage directory ``out``."""
    path = out / FUNNEL_FILE
    write_atomically(path, funnel.model_dump_json(indent=2) + "\n")
    return path


def print_funnel(funnel: Funnel, console: Console) -> None:
    """The funnel as a table: each filter with what entered, what it kept, and why the rest left."""
    table = Table(title=Text(printable(f"{funnel.stage} funnel")), title_justify="left")
    for column in ("filter", "unit", "entered", "kept", "left", "why"):
        table.add_column(column, justify="right" if column in ("entered", "kept", "left") else "left")
    for step in funnel.steps:
        counts = (str(step.entered), str(step.kept), str(step.entered - step.kept))
        table.add_row(Text(printable(step.name)), Text(printable(step.unit)), *counts, Text(printable(reasons(step))))
    console.print(table)
    outputs = ", ".join(f"{name}: {rows}" for name, rows in funnel.outputs.items()) or "none"
    console.print(Text(printable(f"outputs: {outputs}  ·  spent ${funnel.usd:.4f}  ·  {funnel.wall_s:.1f} s")))
    for note in funnel.notes:
        console.print(Text.assemble(("note:", "yellow"), " ", printable(note)))


def funnel_lines(funnel: Funnel) -> list[str]:
    """The funnel as JSON Lines: one object per step, then the totals."""
    lines = [json.dumps({"type": "step", **step.model_dump()}) for step in funnel.steps]
    totals = funnel.model_dump(exclude={"steps"})
    lines.append(json.dumps({"type": "summary", **totals}))
    return lines

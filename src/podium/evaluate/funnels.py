"""Funnels of ``podium data`` stages in the HTML report. They are read as data (the
:class:`~podium.solve.records.Funnel` record of ``funnel.json``), never by importing the data stages."""

import html
from pathlib import Path

from podium.solve.records import FUNNEL_FILE, Funnel, read_funnel


def is_funnel(path: Path) -> bool:
    """Whether ``path`` is a funnel file or a data stage directory (one with ``funnel.json`` and no eval manifest)."""
    if path.is_dir():
        return (path / FUNNEL_FILE).exists() and not (path / "manifest.json").exists()
    return path.suffix == ".json"


def _table(funnel: Funnel) -> str:
    rows = []
    for step in funnel.steps:
        why = "; ".join(
            f"{html.escape(reason)}: {count}" for reason, count in sorted(step.left.items(), key=lambda kv: -kv[1])
        )
        cells = [
            html.escape(step.name),
            html.escape(step.unit),
            str(step.entered),
            str(step.kept),
            str(step.entered - step.kept),
            why,
        ]
        rows.append("<tr>" + "".join(f"<td>{cell}</td>" for cell in cells) + "</tr>")
    head = "".join(f"<th>{name}</th>" for name in ("filter", "unit", "entered", "kept", "left", "why"))
    return f'<table class="metrics"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def funnel_section(path: Path) -> str:
    """One stage's funnel: a table of its filters, its outputs, spend and notes."""
    funnel = read_funnel(path)
    outputs = ", ".join(f"{html.escape(name)}: {rows}" for name, rows in funnel.outputs.items()) or "none"
    notes = "".join(f'<p class="notice">{html.escape(note)}</p>' for note in funnel.notes)
    return (
        f'<section class="funnel"><h2>{html.escape(funnel.stage)} · {html.escape(str(path))}</h2>{_table(funnel)}'
        f"<p>outputs: {outputs} · spent ${funnel.usd:.4f} · {funnel.wall_s:.1f} s · "
        f"Podium {html.escape(funnel.podium_version)}</p>{notes}</section>"
    )


def funnel_sections(paths: list[Path]) -> str:
    """The funnel sections of a report (empty without funnels)."""
    if not paths:
        return ""
    return (
        '<section id="funnels"><h2>Data funnels</h2>' + "".join(funnel_section(path) for path in paths) + "</section>"
    )

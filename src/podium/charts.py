"""Charts written as files that change only when their data does."""

from pathlib import Path
from typing import Any


def save_svg(figure: Any, path: Path) -> None:
    """``figure`` (matplotlib) as SVG without a date and with fixed element ids: the same figure writes the same
    bytes, so a committed chart changes only when its data does."""
    from matplotlib import rc_context

    with rc_context({"svg.hashsalt": "podium"}):
        figure.savefig(path, format="svg", metadata={"Date": None})

"""Learning curves: plotted from curves.jsonl into an SVG whose bytes change only when the curves do (the claim's
adapters commit theirs)."""

import json

import pytest

from podium.train.curves import plot_curves


def test_the_same_curves_plot_the_same_svg_bytes(tmp_path) -> None:
    pytest.importorskip("matplotlib")
    source = tmp_path / "curves.jsonl"
    entries = [{"step": 1, "reward": 0.5, "accuracy": 0.6, "usd": 0.001, "calls/gpt4": 0.2, "loss": 0.0}]
    entries.append({"step": 2, "reward": 0.7, "accuracy": 0.8, "usd": 0.002, "calls/gpt4": 0.3, "loss": 0.1})
    source.write_text("".join(json.dumps(entry) + "\n" for entry in entries))
    first = plot_curves(source, tmp_path / "first.svg")
    second = plot_curves(source, tmp_path / "second.svg")
    assert first is not None and second is not None
    assert first.read_bytes() == second.read_bytes() and b"<svg" in first.read_bytes()
    source.write_text(source.read_text() + json.dumps({**entries[1], "step": 3, "reward": 0.1}) + "\n")
    assert plot_curves(source, tmp_path / "third.svg").read_bytes() != first.read_bytes()

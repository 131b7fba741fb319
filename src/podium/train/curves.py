"""Learning curves of ``podium train grpo``: after every logged step, one JSON line in ``OUTPUT/curves.jsonl``
(step, the batch's mean reward, accuracy, USD per episode, the share of episodes that called each worker, the
groups the filters dropped or dynamic sampling replaced, and the loss); at the end, ``OUTPUT/curves.svg`` plots
them (with the ``report`` extra; without it the JSONL is all there is, and the log says so)."""

import json
import logging
from pathlib import Path
from typing import Any

from podium.charts import save_svg
from podium.extras import require_extra

log = logging.getLogger(__name__)
transformers = require_extra("train", "transformers")

PANELS = (("reward", "mean reward"), ("accuracy", "accuracy"), ("usd", "USD per episode"), ("calls/", "share calling"))
"""What each panel of the plot shows: a metric (or a prefix of several) and its axis label."""


class CurvesCallback(transformers.TrainerCallback):
    """Appends each step's Podium metrics to ``curves.jsonl`` and plots them when training ends."""

    def __init__(self, output_dir: Path) -> None:
        self.path = output_dir / "curves.jsonl"
        output_dir.mkdir(parents=True, exist_ok=True)
        self.path.write_text("")

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, float] | None = None, **kwargs: Any) -> None:
        if not logs or "podium/reward" not in logs:
            return
        entry = {
            "step": state.global_step,
            **{k.removeprefix("podium/"): v for k, v in logs.items() if k.startswith("podium/")},
        }
        if "loss" in logs:
            entry["loss"] = logs["loss"]
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(entry) + "\n")

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        plot_curves(self.path, self.path.with_suffix(".svg"))


def plot_curves(source: Path, out: Path) -> Path | None:
    """Plot the curves of ``source`` (a ``curves.jsonl``) into ``out``; None when matplotlib is missing or there
    is nothing to plot."""
    entries = [json.loads(line) for line in source.read_text(encoding="utf-8").splitlines() if line.strip()]
    if not entries:
        return None
    try:
        matplotlib = require_extra("report", "matplotlib")
    except ImportError as error:
        log.warning("no curves.svg: %s", error)
        return None
    matplotlib.use("Agg")
    pyplot = require_extra("report", "matplotlib.pyplot")
    figure, axes = pyplot.subplots(1, len(PANELS), figsize=(4 * len(PANELS), 3.2))
    steps = [entry["step"] for entry in entries]
    for axis, (metric, label) in zip(axes, PANELS, strict=True):
        names = sorted(
            {
                key
                for entry in entries
                for key in entry
                if key == metric or (metric.endswith("/") and key.startswith(metric))
            }
        )
        for name in names:
            axis.plot(
                steps, [entry.get(name, float("nan")) for entry in entries], label=name.removeprefix(metric) or None
            )
        axis.set_xlabel("step")
        axis.set_ylabel(label)
        if metric.endswith("/") and names:
            axis.legend(fontsize=7)
    figure.tight_layout()
    save_svg(figure, out)
    pyplot.close(figure)
    return out

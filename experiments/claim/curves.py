"""Plot the GRPO learning curves (``curves.jsonl`` from ``train.py``): reward, accuracy and USD per question of
each step's rollouts."""

import argparse
import json
from pathlib import Path

from matplotlib.figure import Figure


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("curves", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    entries = [json.loads(line) for line in args.curves.read_text().splitlines() if line.strip()]
    steps = [entry["step"] for entry in entries]
    figure = Figure(figsize=(9, 2.8), layout="constrained")
    for index, (key, label) in enumerate(
        (("reward", "mean reward"), ("accuracy", "accuracy"), ("usd", "USD / question"))
    ):
        axes = figure.add_subplot(1, 3, index + 1)
        axes.plot(steps, [entry[key] for entry in entries], marker="o")
        axes.set_xlabel("GRPO step")
        axes.set_title(label)
        axes.grid(alpha=0.3)
    figure.savefig(args.out, format="svg", metadata={"Date": None})


if __name__ == "__main__":
    main()

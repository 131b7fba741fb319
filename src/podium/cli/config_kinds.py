"""What kind of config a file is, read from its fields, and the line a field is on: what ``podium check`` names its
problems by."""

from pathlib import Path
from typing import Any

import yaml

KINDS = (
    "system", "pool", "run", "stage", "sft", "grpo", "experiment", "prices", "record", "compare", "threshold", "serve",
)  # fmt: skip
"""The kinds of config file ``podium check`` knows."""


def locate(path: Path, field: str) -> int | None:
    """The line of ``field`` (dotted, list indices as numbers) in a YAML or JSON file: its key's line, else the
    line of the deepest part of it the file has."""
    try:
        node = yaml.compose(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return None
    line = None
    for part in field.split("."):
        if isinstance(node, yaml.MappingNode):
            entry = next(((key, value) for key, value in node.value if key.value == part), None)
            if entry is None:
                break
            line, node = entry[0].start_mark.line + 1, entry[1]
        elif isinstance(node, yaml.SequenceNode) and part.isdigit() and int(part) < len(node.value):
            node = node.value[int(part)]
            line = node.start_mark.line + 1
        else:
            break
    return line


def detect_kind(data: Any) -> str | None:
    """What kind of config ``data`` is, from its fields."""
    if not isinstance(data, dict):
        return None
    keys = set(data)
    if "arms" in keys:
        return "experiment"
    if "recording" in keys and "kind" not in keys:
        return "threshold" if keys & {"system", "system_out", "calibration"} else "compare"
    if {"pool", "out"} <= keys and keys & {"tasks", "benchmark"}:
        return "record"
    if "output_dir" in keys:
        return "sft" if "trajectories" in keys else "grpo"
    if "kind" in keys:
        return "system"
    if "out" in keys:
        return "stage"
    if "workers" in keys:
        return "pool"
    if isinstance(data.get("models"), dict) or isinstance(data.get("tools"), dict):
        return "prices"
    from podium.serve.settings import ServeConfig
    from podium.solve.config import SystemConfig

    if keys <= set(SystemConfig.model_fields):
        return "run"
    return "serve" if keys <= set(ServeConfig.model_fields) else None

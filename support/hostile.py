"""Hostile inputs, as campaigns: text that tries to drive the terminal, YAML alias bombs in every kind of file
Podium reads, non-finite numbers in every config field, and calls that return too much or nest too deep. Each
campaign returns what it saw and every violation of what must hold. The tests run small campaigns,
``benchmarks/bench_hostile.py`` large ones."""

import asyncio
import io
import json
import math
import random
import time
from collections.abc import Callable
from contextlib import redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path
from types import UnionType
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel
from rich.console import Console

from podium.cli.fields import Flags, load_config
from podium.cli.output import print_json_line, shown
from podium.config import Config
from podium.core.calls import MAX_STORED_REASON_CHARS, MAX_STORED_VALUE_CHARS, Status, ToolCall
from podium.core.jsonsafe import MAX_DEPTH
from podium.core.printable import printable
from podium.core.trajectory import to_json_line
from podium.costs.prices import PriceCatalog
from podium.data.collect import CollectConfig
from podium.data.preferences import read_preferences
from podium.errors import ConfigError
from podium.evaluate.system_config import load_system_config
from podium.experiments import load_experiment
from podium.pool.descriptions import read_descriptions
from podium.pool.pool import load_pool_config
from podium.pool.registry import ToolRegistry
from podium.pool.tool import Tool, ToolOutput
from podium.runtime.config import RunConfig
from podium.sandbox import SandboxConfig
from podium.train.config import SFTConfig

# Pieces of text a terminal acts on, Rich markup, and what escaping must get right.
HOSTILE_PIECES = [
    "\x1b]52;c;cm0gLXJmIH4=\x07",  # OSC 52: write the clipboard
    "\x1b[2J",  # clear the screen
    "\x1b]0;owned\x07",  # window title
    "\x1b]8;;https://example.invalid\x1b\\link\x1b]8;;\x1b\\",  # a hyperlink
    "\x9b2J",  # the 8-bit CSI
    "\x9d0;title\x9c",  # 8-bit OSC and ST
    "\u202e",  # right-to-left override
    "\u200b",  # zero-width space
    "\r",  # back to the start of the line
    "\b\b\b",  # backspaces
    "\x00",
    "\x7f",
    "[/bold]",
    "[bold red]",
    "[link=https://example.invalid]x[/link]",
    "[@click=app.quit]",
    "\\",
    "\\[not a tag]",
    ":thumbs_up:",
    "plain words",
    "\n",
    "\t",
]
ACTING = {chr(code) for code in (*range(0x00, 0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0))} | {
    "\u200b",
    "\u202e",
}


def acting(text: str) -> list[str]:
    """The characters of ``text`` a terminal would act on (or that hide or reorder text)."""
    return sorted({character for character in text if character in ACTING})


def hostile_text(rng: random.Random, pieces: int = 8) -> str:
    return "".join(rng.choice(HOSTILE_PIECES) for _ in range(rng.randint(1, pieces)))


@dataclass
class TextCampaign:
    texts: int = 0
    violations: list[str] = field(default_factory=list)


def text_campaign(seed: int, texts: int) -> TextCampaign:
    """Random hostile texts printed the ways commands print untrusted text: inside Rich markup (``shown``), in a
    table cell, as JSON Lines. Each must print as exactly its printable form, act on nothing, and read back."""
    rng = random.Random(seed)
    campaign = TextCampaign()
    for _ in range(texts):
        text = hostile_text(rng)
        campaign.texts += 1
        console = Console(file=io.StringIO(), record=True, width=10_000, emoji=False, color_system=None, tab_size=1)
        try:
            console.print(f"[bold]answer:[/bold] {shown(text)}", highlight=False)
        except Exception as error:  # e.g. a MarkupError: the text was read as markup
            campaign.violations.append(f"{text!r}: {type(error).__name__}: {error}")
            continue
        plain = console.export_text()
        if plain != f"answer: {printable(text)}\n".replace("\t", " ") or acting(plain.replace("\n", "")):
            campaign.violations.append(f"{text!r} printed as {plain!r}")
        with redirect_stdout(io.StringIO()) as out:
            print_json_line({"answer": text, "usd": rng.choice([math.nan, math.inf, 0.5])})
        line = out.getvalue()
        if acting(line.rstrip("\n")) or json.loads(line)["answer"] != text:
            campaign.violations.append(f"{text!r} as JSON: {line!r}")
    return campaign


def alias_bomb(width: int = 10, depth: int = 8) -> str:
    """A few hundred bytes that expand to ``width ** depth`` nodes when every alias is written out."""
    lines = [f"b0: &b0 [{', '.join(['x'] * width)}]"]
    lines += [f"b{d}: &b{d} [{', '.join([f'*b{d - 1}'] * width)}]" for d in range(1, depth)]
    return "\n".join(lines) + "\n"


# Every kind of YAML file Podium reads, each with a bomb where its loader walks the tree (under the last key of
# the text before it, if any).
LOADERS: dict[str, tuple[Callable[[Path], Any], str]] = {
    "pool": (load_pool_config, "workers: [{name: w, backend: scripted, model: m, replies: [x]}]\nschemas:\n"),
    "system": (load_system_config, "kind: orchestrator\n"),
    "run": (RunConfig.from_file, ""),
    "sandbox": (SandboxConfig.from_file, ""),
    "prices": (PriceCatalog.from_file, "models:\n"),
    "descriptions": (read_descriptions, ""),
    "preferences": (read_preferences, ""),
    "experiment": (lambda path: load_experiment(path, "small"), ""),
    "train": (SFTConfig.from_file, ""),
    "data stage": (lambda path: load_config(CollectConfig, path, Flags()), ""),
}


def bomb_file(directory: Path, kind: str, width: int, depth: int) -> Path:
    """A file of ``kind`` holding an alias bomb."""
    before = LOADERS[kind][1]
    bomb = alias_bomb(width, depth)
    path = directory / f"{kind.replace(' ', '-')}-{width}x{depth}.yaml"
    path.write_text(before + ("  " + bomb.replace("\n", "\n  ") if before.endswith(":\n") else bomb))
    return path


def load_outcome(kind: str, path: Path) -> tuple[float, str]:
    """Seconds to load (or refuse) ``path`` as ``kind``, and what happened."""
    started = time.perf_counter()
    try:
        LOADERS[kind][0](path)
        outcome = "loaded"
    except ConfigError as error:
        outcome = "refused: " + str(error).splitlines()[-1].strip()
    except Exception as error:  # the loader's own checks after a successful read (e.g. a data stage's)
        outcome = f"{type(error).__name__}: {error}"
    return time.perf_counter() - started, outcome


def numeric_fields(config: type[BaseModel]) -> list[str]:
    """The top-level fields of ``config`` that take a float (alone or as a member of a union)."""
    return [
        name
        for name, info in config.model_fields.items()
        if info.annotation is float
        or (get_origin(info.annotation) in (Union, UnionType) and float in get_args(info.annotation))
    ]


def non_finite_campaign(seed: int, tries: int) -> list[str]:
    """NaN and infinities written into random float fields of every config class: each must be refused."""
    rng = random.Random(seed)
    configs = [c for c in _all_configs() if numeric_fields(c)]
    accepted = []
    for _ in range(tries):
        config = rng.choice(configs)
        name = rng.choice(numeric_fields(config))
        value = rng.choice([math.inf, -math.inf, math.nan])
        try:
            config.model_validate({name: value}, strict=False)
        except ValueError as error:
            if "finite" not in str(error) and "greater than" not in str(error) and "less than" not in str(error):
                accepted.append(f"{config.__name__}.{name}={value}: refused for another reason: {error}")
            continue
        accepted.append(f"{config.__name__}.{name}={value} accepted")
    return accepted


def _all_configs() -> list[type[Config]]:
    found, pending = [], list(Config.__subclasses__())
    while pending:
        config = pending.pop()
        found.append(config)
        pending.extend(config.__subclasses__())
    return found


@dataclass
class SizeCampaign:
    calls: int = 0
    largest_line: int = 0
    violations: list[str] = field(default_factory=list)


def size_campaign(seed: int, calls: int, most_chars: int = 3_000_000) -> SizeCampaign:
    """Calls returning random amounts of text, structure and error text, and values nested at random depths:
    each stored result stays within the size policy, records its original size, and too-deep values are
    refused."""
    rng = random.Random(seed)
    registry = ToolRegistry([Tool.from_schema("produce", "Return what it is told.", {"type": "object"}, _produce)])
    campaign = SizeCampaign()
    for _ in range(calls):
        kind = rng.choice(["text", "structure", "error", "deep"])
        size = rng.choice([10, 1_000, MAX_STORED_VALUE_CHARS, MAX_STORED_VALUE_CHARS + 1, most_chars])
        depth = rng.randint(1, 5 * MAX_DEPTH)
        arguments = {"kind": kind, "size": size, "depth": depth}
        result = asyncio.run(registry.call(ToolCall(name="produce", arguments=arguments)))
        campaign.calls += 1
        line = to_json_line(result)
        campaign.largest_line = max(campaign.largest_line, len(line))
        problem = _size_problem(result, arguments, len(line))
        if problem:
            campaign.violations.append(f"{arguments}: {problem}")
    return campaign


def _produce(kind: str, size: int, depth: int) -> Any:
    if kind == "error":
        raise ValueError("e" * size)
    if kind == "deep":
        value: Any = "leaf"
        for _ in range(depth):
            value = [value]
        return value
    return "t" * size if kind == "text" else ToolOutput({"pad": "p" * size})


def _size_problem(result: Any, arguments: dict[str, Any], line_chars: int) -> str | None:
    limit = MAX_STORED_VALUE_CHARS + MAX_STORED_REASON_CHARS + 16_384 + 2_000  # value, reason, observation, fields
    if line_chars > limit:
        return f"a {line_chars}-character line"
    if arguments["kind"] == "deep" and arguments["depth"] > MAX_DEPTH and result.status is not Status.EXEC_ERR:
        return f"a value {arguments['depth']} deep was kept ({result.status})"
    if arguments["kind"] == "text" and arguments["size"] > MAX_STORED_VALUE_CHARS and result.value_chars is None:
        return "a cut value without its original size"
    if arguments["kind"] == "error" and arguments["size"] > MAX_STORED_REASON_CHARS and result.reason_chars is None:
        return "a cut reason without its original size"
    return None

"""Printing what commands show: consoles, untrusted text made inert, JSON Lines. Light to import (rich and
Podium's core only), so that every command module can use it.

Text from models, tools and files is data: :func:`shown` makes it safe inside Rich markup (control sequences
visible, markup escaped), :func:`print_json_line` writes JSON that holds no non-JSON number and no character a
terminal would act on.
"""

import json
import sys

from rich.console import Console
from rich.markup import escape

from podium.core.jsonsafe import json_ready
from podium.core.printable import json_printable, printable

PIPED_WIDTH = 4096
"""Columns of a console writing to a pipe or a file: tables keep their natural width instead of 80 columns."""


def make_console(*, stderr: bool = False) -> Console:
    """A console that wraps to the terminal's width, and that neither wraps nor cuts anything when its output
    goes to a pipe or a file. Emoji codes (``:smile:``) stay text: what Podium prints is mostly data."""
    stream = sys.stderr if stderr else sys.stdout
    if stream.isatty():
        return Console(stderr=stderr, emoji=False)
    return Console(stderr=stderr, soft_wrap=True, width=PIPED_WIDTH, emoji=False)


def shown(value: object) -> str:
    """Untrusted text (answers, observations, reasons, tool output, names from files) ready for a Rich markup
    string or table cell: control sequences made visible (newlines and tabs kept) and markup escaped, so that
    it prints as the characters it holds and nothing else. (Not for text right before a tag: Rich would read a
    final backslash as escaping that tag, and Rich's own escape doubles it, which prints both otherwise.)"""
    # The end marker keeps escape() from doubling a final backslash; printable text holds no NUL of its own.
    return escape(printable(str(value)) + "\0")[:-1]


def print_json_line(record: object) -> None:
    """One JSON object on one line of stdout (JSON Lines), never wrapped or highlighted; NaN and infinities are
    written as null (JSON has no such numbers) and characters a terminal acts on as escapes."""
    if isinstance(record, str):
        text = record
    else:
        text = json.dumps(json_ready(record), ensure_ascii=False, default=str, allow_nan=False)
    sys.stdout.write(json_printable(text.replace("\n", " ")) + "\n")
    sys.stdout.flush()

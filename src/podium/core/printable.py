"""Text from models, tools and files made safe to print: it is data, and must never drive the terminal.

Terminals act on control characters: ESC starts sequences that clear the screen, set the window title, write
the clipboard (OSC 52) or make links; a carriage return or backspaces overwrite what was printed; C1 controls
(U+0080–U+009F) are 8-bit forms of the same sequences; bidirectional and other invisible format characters
reorder or hide text. :func:`printable` shows every such character as an escape (``\\x1b``, ``\\u202e``) and keeps
newlines and tabs; :func:`json_printable` does the same inside JSON text, where escapes keep the meaning.
:class:`ExcerptFilter` does it to the log records of libraries that log the text they were given, and keeps
them to an excerpt.
"""

import logging
import re

_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff\ufff9-\ufffb]")
_JSON_UNSAFE = re.compile("[\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff\ufff9-\ufffb]")


def printable(text: str) -> str:
    """``text`` with every control and invisible format character but newline and tab written as an escape."""
    return _UNSAFE.sub(_escape, text)


def json_printable(text: str) -> str:
    """JSON text (whose own control characters are escaped already) with the characters JSON leaves as they
    are but terminals act on written as ``\\uXXXX``: the same JSON value, safe to print."""
    return _JSON_UNSAFE.sub(lambda match: f"\\u{ord(match.group()):04x}", text)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


class ExcerptFilter(logging.Filter):
    """Makes each record of the loggers it is added to printable and at most ``limit`` characters long (a
    library that logs the whole text it failed on would otherwise print megabytes of a model's reply)."""

    def __init__(self, limit: int = 500) -> None:
        super().__init__()
        self.limit = limit

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if len(message) > self.limit:
            message = f"{message[: self.limit]}… [{len(message)} characters in all]"
        record.msg, record.args = printable(message), ()
        return True

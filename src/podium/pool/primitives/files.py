"""Attached files as primitives see them: text read on the host within size limits (documents, code), excerpts
of long texts chosen by the instruction's words, and the files a sandbox run gets.

In the sandbox, a pool's attachments sit read-only at their own paths (the pool binds them when it builds its
sandbox); an episode's attachments are copied into the run's working directory, within the size limits.
"""

import re
from dataclasses import dataclass, field
from pathlib import Path

from podium.pool.kit import PoolKit
from podium.pool.resources import Attachment, AttachmentKind

CHUNK_CHARS = 1_500
KINDS: tuple[AttachmentKind, ...] = ("database", "document", "code")
_WORD = re.compile(r"[A-Za-z0-9_]{3,}")


class AttachmentError(Exception):
    """An attachment cannot be read as text; the message says why."""


def read_text(attachment: Attachment, max_bytes: int) -> tuple[str, bool]:
    """The attachment's text (UTF-8) up to ``max_bytes``, and whether the file is longer."""
    try:
        with open(attachment.path, "rb") as handle:
            data = handle.read(max_bytes + 1)
    except OSError as error:
        raise AttachmentError(f"cannot read attachment '{attachment.name}': {error.strerror}") from error
    truncated = len(data) > max_bytes
    data = data[:max_bytes]
    if b"\0" in data:
        raise AttachmentError(f"attachment '{attachment.name}' is binary, not text")
    text = data.decode("utf-8", errors="replace")
    if text.count("\ufffd") > max(4, len(text) // 100):
        raise AttachmentError(f"attachment '{attachment.name}' is not UTF-8 text")
    return text, truncated


def mentioned(attachments: list[Attachment], instruction: str) -> list[Attachment]:
    """The attachments the instruction names, as whole words."""
    return [a for a in attachments if re.search(rf"(?<![\w.-]){re.escape(a.name)}(?![\w-])", instruction)]


def named_in(attachments: list[Attachment], instruction: str) -> list[Attachment]:
    """The attachments the instruction names, or all of them when it names none."""
    return mentioned(attachments, instruction) or attachments


def excerpt(text: str, query: str, limit: int) -> str:
    """``text`` when it fits in ``limit`` characters; otherwise the chunks sharing most words with ``query``, in
    document order, each headed by its line range, and a note of how much was left out."""
    if len(text) <= limit:
        return text
    chunks = _chunks(text)
    wanted = {word.lower() for word in _WORD.findall(query)}
    ranked = sorted(
        range(len(chunks)),
        key=lambda i: (-len(wanted & {w.lower() for w in _WORD.findall(chunks[i][2])}), i),
    )
    kept: list[int] = []
    used = 0
    for index in ranked:
        size = len(chunks[index][2]) + 40
        if used + size > limit:
            continue
        kept.append(index)
        used += size
    parts = [f"[lines {chunks[i][0]}-{chunks[i][1]}]\n{chunks[i][2]}" for i in sorted(kept)]
    left_out = len(text) - sum(len(chunks[i][2]) for i in kept)
    return "\n".join(parts) + f"\n[… {left_out} characters of {len(text)} left out]"


def numbered(text: str) -> str:
    """``text`` with line numbers, for citing code."""
    return "\n".join(f"{number:>5}  {line}" for number, line in enumerate(text.splitlines(), 1))


def _chunks(text: str) -> list[tuple[int, int, str]]:
    """Consecutive runs of whole lines of about CHUNK_CHARS characters: (first line, last line, text)."""
    chunks: list[tuple[int, int, str]] = []
    lines = text.splitlines()
    start, buffer = 1, []
    for number, line in enumerate(lines, 1):
        buffer.append(line[: CHUNK_CHARS * 2])
        if sum(len(item) + 1 for item in buffer) >= CHUNK_CHARS:
            chunks.append((start, number, "\n".join(buffer)))
            start, buffer = number + 1, []
    if buffer:
        chunks.append((start, len(lines), "\n".join(buffer)))
    return chunks


@dataclass
class SandboxInputs:
    """What a sandbox run of a primitive gets: files copied into its working directory, where each attachment
    is found inside the sandbox, and what was left out."""

    files: dict[str, bytes] = field(default_factory=dict)
    paths: dict[str, str] = field(default_factory=dict)
    """Attachment name → its path inside the sandbox."""
    notes: list[str] = field(default_factory=list)
    """One line per attachment (where it is, or why it was left out) for the worker's prompt."""

    @property
    def listing(self) -> str:
        return "; ".join(self.notes) or "none"


def sandbox_inputs(kit: PoolKit) -> SandboxInputs:
    """The attachments of the current call for a sandbox run: the pool's at their read-only paths, the episode's
    copied in (documents and code up to ``max_file_bytes``, databases up to ``max_database_bytes``)."""
    inputs = SandboxInputs()
    bound = set(kit.sandbox.config.read_only_paths)
    limits = kit.config.primitive_limits
    for kind in KINDS:
        for attachment in kit.attachments(kind):
            about = f"{kind} '{attachment.name}'" + (f": {attachment.description}" if attachment.description else "")
            if attachment.path in bound:
                inputs.paths[attachment.name] = attachment.path
                inputs.notes.append(f"{attachment.path} ({about})")
                continue
            limit = limits.max_database_bytes if kind == "database" else limits.max_file_bytes
            copied = _copy(attachment, limit)
            if isinstance(copied, str):
                inputs.notes.append(copied)
                continue
            suffix = Path(attachment.path).suffix
            name = attachment.name if attachment.name.endswith(suffix) else attachment.name + suffix
            inputs.files[name] = copied
            inputs.paths[attachment.name] = name
            inputs.notes.append(f"{name} ({about})")
    return inputs


def _copy(attachment: Attachment, limit: int) -> bytes | str:
    """The file's bytes, or why it is left out."""
    path = Path(attachment.path)
    try:
        size = path.stat().st_size
        if size > limit:
            return f"'{attachment.name}' left out: {size} bytes, more than the limit of {limit}"
        return path.read_bytes()
    except OSError as error:
        return f"'{attachment.name}' left out: {error.strerror}"

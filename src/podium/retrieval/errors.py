"""Errors of local retrieval: a corpus that cannot be read, an index that cannot be loaded."""

from podium.errors import PodiumError


class CorpusError(PodiumError, ValueError):
    """A corpus file is missing, malformed, or has a passage without an id, title or text; the message names
    the file and line."""


class IndexLoadError(PodiumError, ValueError):
    """An index directory is missing, incomplete, of an unknown format, or built with another model."""

"""Model backends behind one ``generate()`` interface."""

from podium.backends.base import BackendError, ChatBackend, Generation
from podium.backends.scripted import ScriptedBackend

__all__ = ["BackendError", "ChatBackend", "Generation", "ScriptedBackend"]

"""Model backends behind one ``generate()`` (:class:`ChatBackend`), built from specs by one factory."""

from podium.backends.base import BackendError, ChatBackend, Completion, Generation, GenerationRequest
from podium.backends.scripted import ScriptedBackend

__all__ = ["BackendError", "ChatBackend", "Completion", "Generation", "GenerationRequest", "ScriptedBackend"]

"""Optional dependency groups: a clear message instead of a bare ImportError; quiet about what the libraries
of those groups warn each other about."""

import importlib
import re
import warnings
from types import ModuleType

from podium.errors import MissingExtraError


def require_extra(extra: str, module: str) -> ModuleType:
    """Import ``module`` or explain which extra provides it.

    Args:
        extra: the name of the optional dependency group in pyproject (``local``, ``search``, ``train``).
        module: the importable module that group provides.
    """
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise MissingExtraError(
            f"'{module}' is not installed; it comes with the '{extra}' extra: pip install 'podium[{extra}]'"
        ) from error


LIBRARY_DEPRECATIONS = ("`is_gradient_checkpointing` is deprecated", "`past_key_values` is deprecated")
"""Deprecation warnings that the model libraries raise in each other's use (peft and TRL read a transformers
property that transformers deprecates; TRL's GRPO passes the key/value cache by its old name): printed on every
model load or training step, with nothing a Podium user can act on."""


def quiet_library_deprecations() -> None:
    """Ignore :data:`LIBRARY_DEPRECATIONS` from now on (Podium calls it where it loads models; idempotent)."""
    for message in LIBRARY_DEPRECATIONS:
        warnings.filterwarnings("ignore", message=re.escape(message), category=FutureWarning)

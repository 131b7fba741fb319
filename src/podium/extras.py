"""Optional dependency groups: a clear message instead of a bare ImportError."""

import importlib
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

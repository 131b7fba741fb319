"""Exception types. A failed tool call is never an exception: it is a result with a status."""


class PodiumError(Exception):
    """Base class of every error Podium raises on purpose."""


class ConfigError(PodiumError, ValueError):
    """A configuration file or object is invalid; the message names the offending field."""


class ToolDefinitionError(PodiumError, TypeError):
    """A tool was defined with a missing description, an untyped or undocumented parameter, or a bad schema."""


class SandboxUnavailableError(PodiumError, RuntimeError):
    """No isolation mechanism works on this machine and unisolated execution was not allowed."""


class UnknownPriceError(PodiumError, KeyError):
    """A model has no price in the catalog, the user's overrides or the genai-prices data."""

    def __str__(self) -> str:  # KeyError would otherwise print the message quoted
        return str(self.args[0]) if self.args else ""


class MissingExtraError(PodiumError, ImportError):
    """An optional dependency group is needed but not installed."""

"""Podium: train and run small orchestrator models over a pool of tools and models."""


def __getattr__(name: str) -> str:
    """``podium.__version__``, read from the installed metadata on first use (importing importlib.metadata at
    start-up costs every command)."""
    if name == "__version__":
        from importlib.metadata import version

        return version("podium")
    raise AttributeError(f"module 'podium' has no attribute {name!r}")

"""Podium: train and run small orchestrator models over a pool of tools and models."""

from importlib.metadata import version

__version__ = version("podium")

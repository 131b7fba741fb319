"""Benchmarks: items (question, gold, verifier kind) and the named sources they are loaded from."""

from podium.datasets.benchmark import Benchmark, BenchmarkError, shared_data_dir
from podium.datasets.items import AssertTests, BenchmarkItem, HumanEvalTests
from podium.datasets.loaders import get_benchmark, register_benchmark

__all__ = [
    "AssertTests",
    "Benchmark",
    "BenchmarkError",
    "BenchmarkItem",
    "HumanEvalTests",
    "get_benchmark",
    "register_benchmark",
    "shared_data_dir",
]

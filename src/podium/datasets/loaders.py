"""The benchmark registry: every shipped family's benchmarks by name, and any registered later.

A new shipped benchmark is a module under ``podium.datasets.families`` (or an entry in its family's
``BENCHMARKS``) and, for a new module, one line in ``FAMILIES`` below.
"""

from podium.datasets.benchmark import Benchmark, BenchmarkError, shared_data_dir
from podium.datasets.families import code, math, multiple_choice, qa, tau2

__all__ = ["BENCHMARKS", "Benchmark", "BenchmarkError", "get_benchmark", "register_benchmark", "shared_data_dir"]

FAMILIES = (math, code, multiple_choice, qa, tau2)
"""The shipped benchmark families."""

BENCHMARKS: dict[str, Benchmark] = {}


def register_benchmark(benchmark: Benchmark) -> None:
    """Make ``benchmark`` available by name (later registrations replace earlier ones)."""
    BENCHMARKS[benchmark.name] = benchmark


def get_benchmark(name: str) -> Benchmark:
    """The benchmark called ``name``; ``tau2_<domain>`` names any tau2-format domain under the data directory's
    ``tau2/`` folder (a synthesized one, say)."""
    if name not in BENCHMARKS and name.startswith(tau2.PREFIX) and len(name) > len(tau2.PREFIX):
        return tau2.tau2_benchmark(name.removeprefix(tau2.PREFIX))
    if name not in BENCHMARKS:
        raise BenchmarkError(f"unknown benchmark {name!r}; known: {', '.join(sorted(BENCHMARKS))}")
    return BENCHMARKS[name]


for _family in FAMILIES:
    for _benchmark in _family.BENCHMARKS:
        register_benchmark(_benchmark)

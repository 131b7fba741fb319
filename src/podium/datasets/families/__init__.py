"""The shipped benchmarks, one module a family; each module's ``BENCHMARKS`` lists its own, and
``podium.datasets.loaders`` registers them."""

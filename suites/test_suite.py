"""One benchmark per cell of the chosen suite: `pytest suites/ --benchmark-only [--suite NAME]`."""

from bench.run.pytest_plugin import benchmark_cell


def test_cell(cell, benchmark, gnnbench):
    benchmark_cell(gnnbench, cell, benchmark)

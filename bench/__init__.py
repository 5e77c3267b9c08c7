"""gnnbench: benchmarks GNN training data pipelines, each framework in its own pinned stack."""

__version__ = "0.1.0"

"""What each framework's maintainers say about the pipelines gnnbench compares (source, date read),
shown where a user picks one (advisor, suite pages) so a deprecated one is not chosen unawares.
Plain data, changed by hand; a backend names its line (bench/backends BackendInfo.lifecycle).
"""

from __future__ import annotations

from dataclasses import dataclass

from bench.backends import BACKENDS


@dataclass(frozen=True)
class Lifecycle:
    pipeline: str    # what a user would call it
    stacks: tuple[str, ...]  # the gnnbench stacks (bench/stacks) whose backends it covers
    status: str      # "maintained", "deprecated", "no new releases"
    says: str        # what the maintainers say, in one sentence
    source: str      # where they say it (URL)
    read_on: str     # when gnnbench read it (ISO date)


LIFECYCLE = (
    Lifecycle("PyG NeighborLoader (+ DDP)", ("pyg",), "maintained",
              "PyG's own loader, released with every PyG version (2.8.1 in the pyg stack); its multi-GPU "
              "examples pair it with DDP.",
              "https://github.com/pyg-team/pytorch_geometric/releases", "2026-11-26"),
    Lifecycle("PyG torch_geometric.distributed", ("pyg-dist",), "deprecated",
              "Deprecated since PyG 2.7 in favour of cuGraph-PyG / WholeGraph; still shipped in 2.8.x, but its "
              "DistNeighborSampler raises TypeError from 2.7.0 to 2.8.1, so gnnbench runs it on 2.6.1.",
              "https://github.com/pyg-team/pytorch_geometric/blob/master/CHANGELOG.md", "2026-11-26"),
    Lifecycle("DGL GraphBolt", ("dgl",), "no new releases",
              "DGL's last tagged release is 2.4.0 (2024-08-29); PyPI's newest dgl is 2.2.1 and its Linux CPU "
              "wheels stop at 2.1.0 (torch <= 2.2), which gnnbench runs.",
              "https://github.com/dmlc/dgl/releases/tag/v2.4.0", "2026-11-26"),
    Lifecycle("cuGraph-PyG / WholeGraph", ("cugraph-pyg",), "maintained",
              "What PyG recommends for multi-GPU training since torch_geometric.distributed's deprecation; "
              "cugraph-pyg-cu12/-cu13 26.10 on PyPI, for PyG >= 2.5 and < 2.8 (GPU only).",
              "https://pypi.org/project/cugraph-pyg-cu13/", "2026-11-26"),
)

# cuGraph-PyG's supported PyG versions per cugraph-gnn's dependency list (its wheels declare none):
# the cugraph-pyg stack's pin must fall in it (tests/test_cugraph_pyg.py)
CUGRAPH_PYG_SUPPORTS_PYG = ">=2.5,<2.8"


def for_backend(backend: str | None) -> Lifecycle | None:
    """The lifecycle line of a backend (by name), or None."""
    return next(iter(lines_for([backend])), None)


def lines_for(backends) -> list[Lifecycle]:
    """The lines of the pipelines these backends are, in LIFECYCLE's order, each once."""
    wanted = {BACKENDS[b].lifecycle for b in backends if b in BACKENDS}
    return [line for line in LIFECYCLE if line.pipeline in wanted]

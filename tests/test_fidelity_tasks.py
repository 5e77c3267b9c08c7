"""`gnnbench fidelity` on typed and link cells (issues 36 and 37): the plain loops the frameworks'
typed and link examples write run for real in their stacks, and a fidelity run pairs every typed
and link cell with its plain loop and gives the pair a ratio."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from bench.backends import BACKENDS
from bench.harness_costs import fidelity
from bench.run import suite as suite_mod
from bench.run.prepare import ensure_dataset
from bench.datasets import link_split
from tests.conftest import REPO, require_stacks

# a tiny IGBH-shaped typed graph (about 5.5 k nodes) and a tiny graph for the link task, one rank,
# no loader workers, the backends' own models and the loaders alone
TINY = """
name: tiny-fidelity-tasks
datasets:
  typed: {source: typed-synthetic, params: {scale: 1, feature_dim: 8, num_classes: 3, seed: 0}}
  g: {source: synthetic, params: {scale: 9, edge_factor: 4, feature_dim: 8, num_classes: 3, seed: 1}}
backends: [pyg-hetero, dgl-graphbolt-hetero, pyg-link, dgl-graphbolt-link]
settings: {num_workers: 0, mode: cpu-cpu, batch_size: 128, fanout: [4, 2], epochs: 2, warmup_epochs: 0,
           hidden: 8, timeout: 300, model: [sage, rgcn, none]}
include:
  - {backend: [pyg-hetero, dgl-graphbolt-hetero], store: lmdb, model: rgcn}
  - {backend: pyg-link, world_size: 2}
"""
NEW_BACKENDS = ("pyg-hetero", "dgl-graphbolt-hetero", "pyg-link", "dgl-graphbolt-link")
MODELLED = {"pyg-hetero": "rgcn", "dgl-graphbolt-hetero": "rgcn", "pyg-link": "sage", "dgl-graphbolt-link": "sage"}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    path = tmp_path_factory.mktemp("fid-tasks") / "tiny.yaml"
    path.write_text(TINY)
    suite, _ = suite_mod.load(path)
    return path, suite_mod.expand(suite)


def cell_of(cells, backend: str, model: str):
    return next(c for c in cells if c.backend == backend and c.settings.model == model and fidelity.comparable(c))


def dataset_of(cell, cache):
    folder = ensure_dataset(cell.dataset_spec, cache, None)
    if BACKENDS[cell.backend].task == "link":
        link_split.ensure(folder)
    return folder


def test_typed_and_link_cells_are_compared_with_their_own_models(tiny):
    _, cells = tiny
    chosen = sorted(c.id for c in cells if fidelity.comparable(c))
    assert chosen == sorted(f"{b}/{'typed' if 'hetero' in b else 'g'}/mode=cpu-cpu/workers=0/ws=1/model={m}"
                            for b in NEW_BACKENDS for m in (MODELLED[b], "none"))
    # the disk-backed stores and two ranks have no plain loop: left out
    assert not [c for c in cells if fidelity.comparable(c) and (c.settings.store != "memory" or c.settings.world_size > 1)]
    assert set(NEW_BACKENDS) <= set(fidelity.PLAIN_BACKENDS)


@pytest.mark.stacks
@pytest.mark.parametrize("backend", NEW_BACKENDS)
def test_plain_loop_trains_in_its_stack(backend, tiny, cache_dir):
    """The typed and link plain loops build their framework's loader and train the shared model for
    the cell's epochs, in the cell's stack."""
    require_stacks("pyg", "dgl")
    _, cells = tiny
    cell = cell_of(cells, backend, MODELLED[backend])
    epochs, cpu = fidelity.run_plain(cell, dataset_of(cell, cache_dir), cache_dir)
    assert len(epochs) == len(cpu) == 2 and all(e > 0 for e in epochs + cpu)


@pytest.mark.stacks
@pytest.mark.parametrize("backend,model", [("dgl-graphbolt-hetero", "rgcn"), ("pyg-link", "none")])
def test_side_by_side_runs_typed_and_link_loops_in_one_process(backend, model, tiny, cache_dir):
    require_stacks("pyg", "dgl")
    _, cells = tiny
    cell = cell_of(cells, backend, model)
    found = fidelity.run_side_by_side(cell, dataset_of(cell, cache_dir), cache_dir)
    assert len(found["harness"]) == len(found["epochs"]) == 2 and all(e > 0 for e in found["harness"] + found["epochs"])
    if backend == "pyg-link":  # the leak check reads the first epoch's batches only, as in a cell's own run
        first, *later = found["harness_batches"]
        assert later and found["harness_leak_checked"] == first > 0


@pytest.mark.stacks
def test_fidelity_pairs_every_typed_and_link_cell(tiny, cache_dir, tmp_path):
    """`gnnbench fidelity` on a typed and a link graph: one pair per cell (a typed cell's model, a
    link cell's loader alone: each loop is run on its own above), each with both sides' epochs and a
    ratio. One round, two epochs: the ratios of so short a run say nothing about the harness (the
    quiet-machine runs do), so none is held to the band here; the exit code then says only whether
    every pair was within it."""
    require_stacks("pyg", "dgl")
    path, _ = tiny
    out = tmp_path / "fid.json"
    picked = "pyg-hetero and rgcn or dgl-graphbolt-link and none"
    proc = subprocess.run([sys.executable, "-m", "bench.cli", "fidelity", str(path), "-k", picked, "--rounds", "1",
                           "--cache-dir", str(cache_dir), "--out", str(out)],
                          cwd=REPO, capture_output=True, text=True, timeout=900)
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    doc = json.loads(out.read_text())
    assert [c["cell_id"] for c in doc["cells"]] == ["pyg-hetero/typed/mode=cpu-cpu/workers=0/ws=1/model=rgcn",
                                                     "dgl-graphbolt-link/g/mode=cpu-cpu/workers=0/ws=1/model=none"]
    for c in doc["cells"]:
        assert len(c["harness_epochs"]) == len(c["plain_epochs"]) == 2, c["cell_id"]
        assert c["ratio"] == pytest.approx(c["harness_median_s"] / c["plain_median_s"]) and c["ratio"] > 0
    # exit 1 only where a pair's interval lies wholly beyond the band: a difference to name
    assert (proc.returncode == 0) is not any(c["reading"] in ("slower", "faster") for c in doc["cells"])
    assert all(f"`{c['cell_id']}`" in out.with_suffix(".md").read_text() for c in doc["cells"])

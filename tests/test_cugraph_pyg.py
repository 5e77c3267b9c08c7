"""cuGraph-PyG as a backend, checked where no GPU and no RAPIDS wheel can run: its stack's pins
against what cugraph-pyg 26.10 declares (the wheels' METADATA, kept in tests/data/cugraph-pyg/: the
headers of cugraph_pyg_cu13/cu12-26.10.0-py3-none-any.whl from PyPI) and the PyG range its
maintainers give; the stack built in the GPU images only (each CUDA tag its own -cu13/-cu12 line);
its cells in the GPU suites expanded, then skipped with the reason; the lifecycle lines where a
user picks a pipeline (the advisor and the suite page)."""

from __future__ import annotations

import json
from email.parser import Parser

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from bench import stacks
from bench.backends import BACKENDS
from bench.publish import advisor, lifecycle, site
from bench.run import prepare, suite
from tests import synthetic_results as sr
from tests.conftest import REPO

METADATA = REPO / "tests/data/cugraph-pyg"
STACK = "cugraph-pyg"


def declared(cuda: str) -> tuple[Version, dict[str, Requirement]]:
    """(version, requirements by name) cugraph-pyg-<cuda> 26.10 declares, extras left out."""
    meta = Parser().parsestr((METADATA / f"cugraph_pyg_{cuda}-26.10.0.METADATA").read_text())
    requires = [Requirement(r) for r in meta.get_all("Requires-Dist")]
    return Version(meta["Version"]), {r.name: r for r in requires if not (r.marker and "extra" in str(r.marker))}


def container_pins(monkeypatch, torch_cuda: str) -> dict[str, str]:
    monkeypatch.setenv(stacks.TORCH_CUDA_ENV, torch_cuda)
    plain, no_isolation = stacks.get(STACK).requirement_lines(container=True)
    return dict(line.split("==", 1) for line in plain + no_isolation)


@pytest.mark.parametrize("torch_cuda, cuda", [("cu130", "cu13"), ("cu126", "cu12")])
def test_the_stacks_pins_agree_with_what_cugraph_pyg_declares(monkeypatch, torch_cuda, cuda):
    pins = container_pins(monkeypatch, torch_cuda)
    version, requires = declared(cuda)
    # each image tag installs its own CUDA's package, at the version whose METADATA is read here
    assert set(pins) & {"cugraph-pyg-cu12", "cugraph-pyg-cu13"} == {f"cugraph-pyg-{cuda}"}
    assert version in SpecifierSet(f"=={pins[f'cugraph-pyg-{cuda}']}")
    # what its wheels declare, the stack's pins meet (numpy); its own RAPIDS libraries are its version's
    for name, requirement in requires.items():
        if name in pins:
            assert Version(pins[name]) in requirement.specifier, (name, pins[name], str(requirement))
        elif name.startswith(("pylibcugraph", "pylibwholegraph")):
            assert requirement.specifier == SpecifierSet("==26.10.*"), str(requirement)
    # its wheels name neither torch nor torch-geometric (so a resolve alone proves nothing): the PyG
    # range is the one its maintainers give (bench/publish/lifecycle.py), and the pin falls in it,
    # on the pyg stack's torch
    assert not {"torch", "torch-geometric"} & set(requires)
    assert Version(pins["torch-geometric"]) in SpecifierSet(lifecycle.CUGRAPH_PYG_SUPPORTS_PYG)
    assert Version(pins["torch-geometric"]).release[:2] == (2, 7)
    plain, _ = stacks.get("pyg").requirement_lines(container=True)
    assert f"torch=={pins['torch']}" in plain


def test_the_stack_is_built_in_the_gpu_images_only(tmp_path, monkeypatch):
    stack = stacks.get(STACK)
    monkeypatch.delenv(stacks.IN_CONTAINER_ENV, raising=False)
    assert stack.container_only and stack.requirement_lines(container=False) == ([], [])
    assert not any(s.container_only for name, s in stacks.available().items() if name != STACK)
    with pytest.raises(stacks.StackError, match="built in the GPU images only"):
        stacks.install(STACK)
    prep = prepare.Preparation(tmp_path, None, say=lambda *a, **k: None)
    cell = next(c for c in suite.expand(suite.load(suite.resolve_path("gpu"))[0]) if c.backend == "cugraph-pyg")
    outcome = prep.prepare(cell)
    assert outcome.status == "skipped" and "gnnbench stacks add cugraph-pyg" in outcome.reason
    dockerfile = (REPO / "docker/Dockerfile").read_text()
    assert "python3 -m bench.stacks install cugraph-pyg" in dockerfile
    assert dockerfile.count("bench.stacks install cugraph-pyg") == 1  # not in bench-cpu


@pytest.mark.parametrize("name, expected", [("gpu", 3), ("multi-gpu", 8)])
def test_its_cells_expand_in_the_gpu_suites_and_skip_here_with_the_reason(name, expected, tmp_path):
    import os
    import subprocess
    import sys

    cells = [c for c in suite.expand(suite.load(suite.resolve_path(name))[0]) if c.backend == "cugraph-pyg"]
    assert len(cells) == expected and {c.settings.mode for c in cells} == {"cuda-cuda"}
    assert BACKENDS["cugraph-pyg"].stack == STACK and not BACKENDS["cugraph-pyg"].one_gpu_per_rank
    proc = subprocess.run([sys.executable, "-m", "bench.cli", "run", name, "-k", "cugraph-pyg", "--results",
                           str(tmp_path), "--no-install"], cwd=REPO, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(REPO), "GNNBENCH_CACHE": str(tmp_path / "cache")})
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    written = json.loads(next(tmp_path.glob(f"{name}-*.json")).read_text())
    skipped = {u["id"]: u for u in written["unmeasured"]}
    assert set(skipped) == {c.id for c in cells} and not written["benchmarks"]
    for u in skipped.values():
        assert u["status"] == "skipped" and u["reason"]  # here: no GPU (requires: gpu); in the image: the stack's own


# --- each pipeline's lifecycle where a user picks one -------------------------------------------------

def test_every_pipeline_has_a_lifecycle_line_with_its_source():
    named = {info.lifecycle for info in BACKENDS.values()} - {None}
    assert named == {line.pipeline for line in lifecycle.LIFECYCLE}  # each line a backend's, each name a line
    assert {b for b, info in BACKENDS.items() if info.lifecycle} >= {"pyg-neighbor", "pyg-dist", "dgl-graphbolt",
                                                                     "cugraph-pyg"}
    for line in lifecycle.LIFECYCLE:
        assert line.source.startswith("https://") and len(line.read_on) == 10, line
        assert set(line.stacks) <= set(stacks.available()), line
    assert lifecycle.for_backend("pyg-dist").status == "deprecated"
    assert "2.4.0" in lifecycle.for_backend("dgl-graphbolt").says and "2.1.0" in lifecycle.for_backend("dgl-graphbolt").says
    assert "recommends" in lifecycle.for_backend("cugraph-pyg").says


def test_the_advisor_and_the_suite_page_show_each_pipelines_lifecycle(tmp_path):
    pyg, dgl = sr.cell_id(), sr.cell_id(backend="dgl-graphbolt")
    path = tmp_path / "run.json"
    path.write_text(json.dumps(sr.run([sr.bench(pyg, [1.0] * 5), sr.bench(dgl, [2.0] * 5)], suite="crafted")))
    from bench.publish import results

    run = results.read(path)
    [advice] = advisor.advise([run])
    assert advice.recommended == pyg
    assert advice.lifecycle[0].startswith("PyG NeighborLoader (+ DDP) (maintained, recommended here): ")
    assert advice.lifecycle[1].startswith("DGL GraphBolt (no new releases): DGL's last tagged release is 2.4.0")
    assert all("read 2026-" in line for line in advice.lifecycle)
    site.build([run], tmp_path / "site")
    page = (tmp_path / "site" / "suite-crafted.html").read_text()
    assert page.count('<ul class="lifecycle">') == 1 and "Pipelines compared: what their maintainers say" in page
    assert "https://github.com/dmlc/dgl/releases/tag/v2.4.0" in page and "torch_geometric.distributed" not in page


def test_its_cells_say_they_are_unverified_on_a_gpu(tmp_path):
    from bench.run import session as session_mod

    run = session_mod.Session(session_mod.RunOptions(suite="gpu", results=tmp_path / "r", cache_dir=tmp_path / "c"))
    cugraph = next(c for c in run.cells if c.backend == "cugraph-pyg")
    graphbolt = next(c for c in run.cells if c.backend == "dgl-graphbolt" and c.settings.mode == "pinned-cuda")
    assert any("cuGraph-PyG has never run" in note for note in run.executor.cell_notes(cugraph))
    assert not any("cuGraph-PyG" in note for note in run.executor.cell_notes(graphbolt))
    assert any("pinned in place by every rank" in note for note in run.executor.cell_notes(graphbolt))


# --- the set-up order and what a cell leaves behind, in the pyg stack (torch, PyG; no RAPIDS, no GPU) ----------

SETUP_ORDER = """
    import os, sys, tempfile
    import numpy as np
    import torch.distributed as dist
    from types import SimpleNamespace
    from bench.backends import cugraph_pyg as cg

    calls = []
    real_group = cg.own_process_group
    cg.own_process_group = lambda: calls.append("process group") or real_group("gloo")  # NCCL needs a GPU
    cg.init_worker = lambda *args: calls.append("cuGraph and WholeGraph set up")
    cg.shutdown_comms = lambda: calls.append("comms shut down")
    cg.Pipeline._stores = staticmethod(lambda *args: calls.append("stores") or ("features", "graph"))
    cg.Pipeline._loader = lambda self, split, shuffle: calls.append("loader") or []
    cg.Pipeline.build_model = lambda self, data: calls.append("model and DDP")
    data = SimpleNamespace(train_idx=np.arange(64), val_idx=np.arange(64, 80), test_idx=np.arange(80, 96))
    before = set(os.listdir(tempfile.gettempdir()))
    from bench.settings import CellSettings
    pipe = cg.Pipeline(data, CellSettings(mode="cuda-cuda", seed=0, batch_size=8, fanout=[2], model="sage"))
    built = list(calls)
    pipe.close()
    print(built, calls[len(built):], dist.is_initialized(), sorted(set(os.listdir(tempfile.gettempdir())) - before), sep="|")
"""


def test_set_up_runs_in_order_and_a_cell_leaves_no_file(tmp_path, monkeypatch):
    """The order of set-up calls through the module's own seams (cuGraph and WholeGraph recorded, as
    they cannot run here; torch.distributed real): the stores, then the loader, then the model (with
    DDP); close() shuts the comms down. RMM is the whole process's allocator before any of this
    (test_rmm_is_set_before_torch_allocates). The one-rank group of a single-rank cell is made for real
    (gloo here) and leaves nothing in the temporary folder."""
    from tests.test_gpu_suites import run_in

    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    built, closed, group_left, leftovers = run_in("pyg", SETUP_ORDER).split("|")
    assert built == str(["process group", "cuGraph and WholeGraph set up", "stores", "loader", "model and DDP"])
    assert closed == str(["comms shut down"])
    assert group_left == "False" and leftovers == "[]"


RMM_ORDER = """
    import inspect, types
    import torch
    from bench.backends import base, cugraph_pyg as cg
    from bench.run import worker

    assert cg.Pipeline.before_cuda is cg.rmm_for_the_process and not cg.Pipeline.torch_memory_stats
    assert base.Pipeline.torch_memory_stats and base.Pipeline.before_cuda(0) is None
    swap = inspect.getsource(cg.rmm_for_the_process)
    assert swap.index("rmm.reinitialize(") < swap.index("change_current_allocator(rmm_torch_allocator)")
    take = inspect.getsource(worker.take_device)
    assert take.index("before_cuda(") < take.index("torch.cuda.init()") < take.index("torch.zeros(1")
    assert "before_cuda" in inspect.getsource(worker.run_cell)
    assert "use_mem_pool(" not in inspect.getsource(cg)  # one thread's routing: what it replaced
    peaks = worker.GpuPeaks(types.SimpleNamespace(device=torch.device("cuda", 0), torch_memory_stats=False))
    print(peaks.peak(), peaks.end("build"))
"""


def test_rmm_is_set_before_torch_allocates():
    """cuGraph-PyG's RMM pool serves the whole process, as its examples set it: the backend's
    `before_cuda` (RMM's managed pool, torch's allocator swapped for RMM's) runs in the worker once the
    device is chosen and before torch's first CUDA allocation (the context's `torch.zeros(1)`), so
    backward's threads and DDP's buckets allocate from RMM too; no per-phase GPU peak is read from torch's
    statistics then. Read from the code, in the pyg stack (no GPU, no RMM here): unverified on a GPU."""
    from tests.test_gpu_suites import run_in

    assert run_in("pyg", RMM_ORDER) == "None {}"

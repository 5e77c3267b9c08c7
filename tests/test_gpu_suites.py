"""The GPU questions: the GPU suites (expansion, per-gpu workers, skipped in seconds where no GPU
is visible), the mode record every mode decision asks, `--mode`, and the CUDA-path defects that
can be shown without a GPU (DGL 2.1's feature-store API, its CPU-only build, the GradScaler of
torch 2.2, LOCAL_WORLD_SIZE, the pinned ceiling, the ceilings' cache)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from bench import cli, modes
from bench.settings import CellSettings, Recorded
from bench.publish import stages
from bench.machine import ceilings, gpus
from bench.run import suite as suite_mod
from bench.run.session import RunOptions, Session
from tests.conftest import REPO, require_stacks

GPU_SUITES = ("gpu", "multi-gpu")


def cells_of(name: str):
    suite, _ = suite_mod.load(name)
    return suite, suite_mod.expand(suite)


# --- the suites ------------------------------------------------------------------------------

def test_gpu_suite_asks_each_mode_with_each_worker_count():
    suite, cells = cells_of("gpu")
    assert suite.requires == "gpu"
    graphbolt = {(c.dataset, c.settings.mode, c.settings.num_workers) for c in cells
                 if c.backend == "dgl-graphbolt" and not c.settings.profile and c.settings.amp == "off"
                 and not c.settings.gpu_cache}
    for dataset in ("cora", "products-s21"):
        assert {(m, w) for d, m, w in graphbolt if d == dataset} == {
            (m, w) for m in modes.MODES for w in (0, 2, 4)}
    pyg_cuda = {(c.settings.pin_memory, c.settings.num_workers) for c in cells
                if c.backend == "pyg-neighbor" and c.settings.mode == "cpu-cuda" and c.dataset == "products-s21"
                and c.settings.amp == "off" and not c.settings.profile}
    assert pyg_cuda == {(p, w) for p in (False, True) for w in (0, 4)}
    assert any(c.settings.amp == "bf16" for c in cells) and any(c.settings.gpu_cache for c in cells)
    # a cell that turns a GPU setting on never shares the id of its plain twin
    assert len({c.id for c in cells}) == len(cells)
    assert "pyg-neighbor/products-s21/mode=cpu-cuda/workers=0/ws=1/pin_memory=True/profile=off" in {c.id for c in cells}


def test_multi_gpu_suite_sweeps_world_sizes_and_per_gpu_workers():
    suite, cells = cells_of("multi-gpu")
    assert suite.requires == "gpu"
    assert {c.settings.world_size for c in cells} == {1, 2, 4, 8}
    assert {c.settings.num_workers for c in cells} == {0, suite_mod.PER_GPU}
    assert {c.dataset for c in cells} == {"cora", "products-s21", "igbh-tiny"}


# the core budget: each rank's share of the cores less one for its own thread, at least one worker
@pytest.mark.parametrize("cores,world_size,nnodes,expected", [(16, 1, 1, 15), (16, 4, 1, 3), (16, 8, 2, 3),
                                                               (2, 8, 1, 1)])
def test_per_gpu_workers_resolve_from_the_usable_cores_and_the_nodes_ranks(cores, world_size, nnodes, expected):
    _, cells = cells_of("multi-gpu")
    cell = next(c for c in cells if c.settings.num_workers == suite_mod.PER_GPU
                and c.settings.world_size == world_size)
    resolved = suite_mod.resolve_workers(cell, cores, nnodes)
    assert resolved.settings.num_workers == expected
    assert resolved.settings.num_workers_rule == suite_mod.PER_GPU and resolved.id == cell.id
    assert cell.settings.num_workers == suite_mod.PER_GPU  # the suite's cell is left as it was


@pytest.mark.skipif(len(gpus.visible()) > 0, reason="this machine shows a GPU: the GPU suites would run")
@pytest.mark.parametrize("name", GPU_SUITES)
def test_gpu_suites_skip_every_cell_in_seconds_without_a_gpu(tmp_path, capsys, name):
    """With an empty cache and no stacks: every cell, the cpu-cpu baselines too, skipped with the
    reason before any stack, dataset or store step; exit 0."""
    env = {"GNNBENCH_CACHE": str(tmp_path / "cache"), "GNNBENCH_STACKS_DIR": str(tmp_path / "stacks")}
    started = time.perf_counter()
    proc = subprocess.run([str(Path(os.sys.executable).parent / "gnnbench"), "run", name,
                           "--results", str(tmp_path / "r")], cwd=REPO, capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=120)
    took = time.perf_counter() - started
    assert proc.returncode == 0, proc.stderr
    assert took < 60, took
    assert not (tmp_path / "cache").exists() and not (tmp_path / "stacks").exists()
    [result] = (tmp_path / "r").glob(f"{name}-*.json")
    doc = json.loads(result.read_text())
    _, cells = cells_of(name)
    assert doc["benchmarks"] == []
    skipped = {u["id"]: u for u in doc["unmeasured"]}
    assert set(skipped) == {c.id for c in cells}
    assert all(u["status"] == "skipped" and "requires: gpu" in u["reason"] for u in skipped.values())
    assert any("mode=cpu-cpu" in cid for cid in skipped)


def test_without_a_suite_run_names_the_suite_it_chose_and_why(monkeypatch):
    monkeypatch.setattr(gpus, "visible", lambda: gpus.Gpus((), "no NVIDIA driver here"))
    assert cli.default_suite() == ("smoke", "no GPU visible (no NVIDIA driver here)")
    monkeypatch.setattr(gpus, "visible", lambda: gpus.Gpus(("NVIDIA H100",), "nvidia-smi -L"))
    name, why = cli.default_suite()
    assert name == "gpu" and "1 GPU(s) visible (NVIDIA H100" in why


def test_cuda_visible_devices_narrows_what_is_visible(monkeypatch):
    monkeypatch.setattr(gpus, "_from_driver", lambda: (["A", "B", "C"], "nvidia-smi -L"))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,2")
    assert len(gpus.visible()) == 2
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert len(gpus.visible()) == 0 and "hides" in gpus.visible().how
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "-1")
    assert len(gpus.visible()) == 0


def test_a_gpu_cell_needs_a_gpu_for_each_of_this_nodes_ranks(tmp_path):
    """The count is of this node's ranks (world size / nodes), not the global world size."""
    session = Session(RunOptions(suite="multi-gpu", results=tmp_path / "r", cache_dir=tmp_path / "c",
                                 nnodes=2, node_rank=0, rdzv_endpoint="127.0.0.1:29500"))
    session.executor._gpus = gpus.Gpus(("H100", "H100"), "a two-GPU node")
    by_ws = {c.settings.world_size: c for c in session.cells
             if c.backend == "pyg-neighbor" and c.dataset == "cora" and c.settings.num_workers == 0
             and c.settings.mode == "cpu-cuda"}
    assert session.gpu_refusal(by_ws[4]) is None  # 2 ranks on each of 2 nodes
    refused = session.gpu_refusal(by_ws[8])
    assert refused.status == "skipped" and "4 ranks on this node need 4 GPUs; 2 visible" in refused.reason


# --- the mode record ---------------------------------------------------------------------------

def test_modes_declare_where_things_run_and_what_is_pinned():
    assert not modes.mode("cpu-cpu").needs_gpu and modes.mode("cpu-cpu").backend_for_ranks == "gloo"
    cpu_cuda, pinned, cuda = modes.mode("cpu-cuda"), modes.mode("pinned-cuda"), modes.mode("cuda-cuda")
    assert cpu_cuda.copies_batches and not cpu_cuda.seeds_to_device_first and cpu_cuda.workers_allowed
    assert pinned.pinned and pinned.seeds_to_device_first and pinned.overlap_feature_fetch
    assert cuda.storage == modes.CUDA and cuda.overlap_feature_fetch
    assert all(m.backend_for_ranks == "nccl" for m in (cpu_cuda, pinned, cuda))
    assert modes.pins(CellSettings(mode="cpu-cuda", pin_memory=True)) and not modes.pins(CellSettings(mode="cpu-cuda"))
    with pytest.raises(KeyError, match="allowed: cpu-cpu"):
        modes.mode("gpu-gpu")


MODE_PARSING = re.compile(r"""endswith\(["']-cu|endswith\(["']-cpu|[!=]= ["'](cpu-cpu|cpu-cuda|pinned-cuda|cuda-cuda)["']"""
                          r"""|in \(["'](cpu-cpu|cpu-cuda|pinned-cuda|cuda-cuda)""")


def test_no_mode_name_is_parsed_outside_the_mode_module():
    found = [f"{path.relative_to(REPO)}:{n}: {line.strip()}"
             for path in (REPO / "bench").rglob("*.py") if path.name != "modes.py"
             for n, line in enumerate(path.read_text().splitlines(), 1) if MODE_PARSING.search(line)]
    assert found == []


def test_a_known_worker_failure_is_labelled_only_when_its_error_matches():
    label = modes.known_worker_failure("pinned-cuda", 2, "RuntimeError: 'PyCapsule' object has no attribute "
                                                         "'cudaHostUnregister'")
    assert label and "DGL #7381" in label
    assert modes.known_worker_failure("pinned-cuda", 2, "RuntimeError: CUDA out of memory") is None
    assert modes.known_worker_failure("pinned-cuda", 0, "cudaHostUnregister") is None
    assert modes.known_worker_failure("cpu-cuda", 2, "cudaHostUnregister") is None


def test_mode_option_replaces_the_mode_axis_and_names_backends_without_it():
    suite, _ = suite_mod.load("smoke")
    changed, notes = suite_mod.with_mode(suite, ["pinned-cuda"])
    cells = suite_mod.expand(changed)
    assert cells and all(c.settings.mode == "pinned-cuda" and c.backend == "dgl-graphbolt" for c in cells)
    assert notes == ["--mode pinned-cuda: pyg-neighbor has no such mode (its modes: cpu-cpu, cpu-cuda): "
                     "its cells are not run"]
    with pytest.raises(suite_mod.SuiteError, match="settings.mode|mode"):
        suite_mod.with_mode(suite, ["gpu-gpu"])


def test_run_with_mode_skips_the_gpu_cells_here_and_lists_the_others(tmp_path, capsys):
    if gpus.visible():
        pytest.skip("this machine shows a GPU")
    code = cli.main(["run", "smoke", "--mode", "cpu-cuda", "--results", str(tmp_path / "r"),
                     "--cache-dir", str(tmp_path / "c"), "--no-install"])
    out = capsys.readouterr().out
    assert code == 0 and "needs a CUDA GPU; this machine shows none" in out
    assert not (tmp_path / "c").exists() or not any((tmp_path / "c").rglob("*.npy"))


# --- the CUDA-path defects, shown on the CPU ---------------------------------------------------

def run_in(stack: str, code: str) -> str:
    from bench import stacks

    require_stacks(stack)
    proc = subprocess.run([str(stacks.get(stack).python), "-c", textwrap.dedent(code)], cwd=REPO,
                          capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.strip().splitlines()[-1]


def test_graphbolt_pinned_mode_places_features_through_dgl_21s_api(tmp_path):
    """DGL 2.1's BasicFeatureStore has no item access (the old code's `features[KEY]` raised
    TypeError before the first batch); `placed` pins the Feature before the store is made, and pins
    a private copy, never the hub's read-only memory map. cudaHostRegister needs a GPU, so the
    pinning calls are recorded here (the API calls and the arrays they get are what is shown)."""
    from bench.datasets import synthetic

    spec = {"name": "tiny", "source": "synthetic", "params": synthetic.canonical_params({"scale": 8, "feature_dim": 8})}
    dataset = synthetic.materialise(spec, tmp_path)
    answer = run_in("dgl", f"""
        import json
        import numpy as np, torch
        import dgl.graphbolt as gb
        from bench import datasets, modes
        from bench.datasets import hub
        from bench.backends import dgl_graphbolt as backend
        try:
            gb.BasicFeatureStore({{backend.FEATURE_KEY: gb.TorchBasedFeature(torch.zeros(2, 2))}})[backend.FEATURE_KEY]
            subscript = "works"
        except TypeError:
            subscript = "TypeError"
        pinned = []
        def record(self):
            tensors = [self._tensor] if hasattr(self, "_tensor") else [self.csc_indptr, self.indices]
            pinned.extend(bool(t.numpy().flags.writeable) for t in tensors)
            return self
        gb.TorchBasedFeature.pin_memory_ = record
        gb.FusedCSCSamplingGraph.pin_memory_ = record
        class Cached(gb.Feature):
            def __init__(self, fallback, rows):
                super().__init__(); self.fallback, self.rows = fallback, rows
            def read(self, ids=None):
                return self.fallback.read(ids)
        gb.GPUCachedFeature = Cached
        data = hub.load_dataset("synthetic", {str(dataset)!r}, features_in_memory=False)
        from bench.settings import CellSettings
        settings = CellSettings(store="memory", gpu_cache=0.25)
        graph, store = backend.placed(data, settings, torch.device("cpu"), modes.mode("pinned-cuda"))
        row = store.read("node", None, "feat", torch.tensor([3]))
        print(json.dumps({{"subscript": subscript, "pinned_writable": pinned,
                          "cached_rows": store._features[backend.FEATURE_KEY].rows,
                          "row_ok": bool(torch.equal(row[0], torch.from_numpy(np.asarray(data.features[3]))))}}))
    """)
    found = json.loads(answer)
    assert found["subscript"] == "TypeError"  # the defect: DGL 2.1's store is not subscriptable
    assert found["pinned_writable"] == [True, True, True]  # graph indptr, indices, features: private copies
    assert found["cached_rows"] == 64 and found["row_ok"]


def test_pypi_dgl_is_recognised_as_a_cpu_build():
    answer = run_in("dgl", """
        from bench.backends import dgl_graphbolt as backend
        print(backend.gpu_build_problem() or "gpu build")
    """)
    assert "CPU build" in answer and "set_max_uva_threads" in answer


def test_fp16_grad_scaler_exists_in_both_stacks():
    """torch 2.2.1 (the dgl stack) has no torch.amp.GradScaler; the fp16 scaler falls back to
    torch.cuda.amp's there and takes torch.amp's where it exists (the pyg stack)."""
    code = """
        import torch
        from bench.backends.base import grad_scaler
        print(f"{hasattr(torch.amp, 'GradScaler')} {type(grad_scaler('cpu')).__module__}")
    """
    assert run_in("dgl", code) == "False torch.cuda.amp.grad_scaler"
    assert run_in("pyg", code).startswith("True torch.amp")


def test_local_world_size_decides_the_gpus_a_node_needs(monkeypatch):
    from bench.backends.base import local_world_size

    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    assert local_world_size(8) == 8  # one process, no torchrun
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")
    assert local_world_size(8) == 4  # 8 ranks over 2 nodes: 4 here


@pytest.mark.parametrize("settings,expected", [
    ({"mode": "cpu-cuda", "pin_memory": True}, "pinned"),
    ({"mode": "cpu-cuda", "pin_memory": False}, "pageable"),
    ({"mode": "pinned-cuda"}, "pinned"),
])
def test_the_copy_is_held_against_the_ceiling_of_what_the_cell_pinned(settings, expected):
    cell = SimpleNamespace(settings=Recorded(settings), machine=SimpleNamespace(
        ceilings={"h2d_pinned_bytes_per_s": 25e9, "h2d_pageable_bytes_per_s": 10e9}))
    assert stages.h2d_ceiling(cell)[1] == expected


def test_ceilings_never_keep_an_unmeasured_h2d_and_key_the_gpus(tmp_path, monkeypatch):
    assert "gpus" in ceilings.machine_key()
    monkeypatch.setattr(gpus, "visible", lambda: gpus.Gpus((), "none here"))
    found = ceilings.probe(tmp_path, interpreters=lambda: [])
    assert found["h2d_pinned_bytes_per_s"] is None
    assert "h2d" not in json.loads(ceilings.cache_file(tmp_path).read_text())


def test_barriers_under_nccl_name_this_ranks_gpu_in_both_stacks():
    """torch 2.2's NCCL barrier guesses the GPU (rank % GPUs) before any NCCL op: the worker's
    barrier names LOCAL_RANK's GPU under NCCL, and takes gloo's as it is. The call is recorded by a
    stand-in for torch.distributed (no GPU here); the argument is accepted by both torches."""
    code = """
        import inspect, os
        import torch.distributed as dist
        from bench.run.worker import rank_barrier
        from bench.settings import CellSettings
        os.environ["LOCAL_RANK"] = "1"
        calls = []
        class Recorder:
            def barrier(self, **kwargs):
                calls.append(kwargs)
        for mode in ("pinned-cuda", "cpu-cuda", "cpu-cpu"):
            rank_barrier(Recorder(), CellSettings(mode=mode))
        print(calls, "device_ids" in inspect.signature(dist.barrier).parameters)
    """
    expected = "[{'device_ids': [1]}, {'device_ids': [1]}, {}] True"
    assert run_in("dgl", code) == expected
    assert run_in("pyg", code) == expected


def test_graphbolt_cuda_mode_copies_to_the_gpu_straight_from_the_hubs_maps(tmp_path):
    """cuda-cuda needs no private host copy per rank (only pinning in place needs a writable one):
    what .to(device) gets is the hub's memory map itself. The .to calls are recorded (no GPU here)."""
    from bench.datasets import synthetic

    spec = {"name": "tiny", "source": "synthetic", "params": synthetic.canonical_params({"scale": 8, "feature_dim": 8})}
    dataset = synthetic.materialise(spec, tmp_path)
    answer = run_in("dgl", f"""
        import json, warnings
        import numpy as np, torch
        import dgl.graphbolt as gb
        from bench import datasets, modes
        from bench.datasets import hub
        from bench.settings import CellSettings
        from bench.backends import dgl_graphbolt as backend
        data = hub.load_dataset("synthetic", {str(dataset)!r}, features_in_memory=False)
        shared = []
        def record(self, device):
            tensors = [self._tensor] if hasattr(self, "_tensor") else [self.csc_indptr, self.indices]
            hub = [data.features] if hasattr(self, "_tensor") else [data.graphbolt_indptr, data.graphbolt_indices]
            shared.extend(bool(np.shares_memory(t.numpy(), h)) for t, h in zip(tensors, hub))
            return self
        gb.TorchBasedFeature.to = record
        gb.FusedCSCSamplingGraph.to = record
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # and no warning about the read-only map
            backend.placed(data, CellSettings(), torch.device("cpu"), modes.mode("cuda-cuda"))
        print(json.dumps(shared))
    """)
    assert json.loads(answer) == [True, True, True]  # graph indptr, indices, features: the hub's own pages

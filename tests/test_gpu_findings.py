"""Issue 38's findings that show without a GPU: one visible GPU per rank (the env a rank runs
with), workers and threads from the cores a rank is pinned to, start-up by phase and the GPU's
device-wide memory carried into results and columns, NCCL's set-up in the process_group phase
(the torch of each stack asked whether it takes `device_id`), the start check of a stack's CUDA
build against the driver and the GPUs (facts faked), and PyG's scatter kept off a CPU-only
torch-scatter on CUDA. What needs a GPU to show is marked unverified in docs/gpus.md."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from bench.backends import base
from bench.machine import core_budget
from bench.publish import columns, results
from bench.result_format import ResultFile
from bench.run import record, runner
from bench import cuda_fit
from tests.conftest import REPO
from tests.test_gpu_user_view import stack_python


# --- one visible GPU per rank -------------------------------------------------------------------

def rank_env(environ: dict, local_rank: int) -> dict:
    """The environment a rank of a GPU cell runs with: the runner's, narrowed by the worker's main
    before torch is imported."""
    env = runner.worker_env(REPO / "cache", "run-1") | environ
    return env | base.one_gpu_env(env, local_rank)


@pytest.mark.parametrize("visible, expected", [(None, ["0", "1"]), ("2,3", ["2", "3"]),
                                               ("GPU-aaaa,GPU-bbbb", ["GPU-aaaa", "GPU-bbbb"])])
def test_each_rank_sees_its_own_gpu_alone(visible, expected):
    environ = {} if visible is None else {"CUDA_VISIBLE_DEVICES": visible}
    for local_rank in (0, 1):
        env = rank_env(environ, local_rank)
        assert env["CUDA_VISIBLE_DEVICES"] == expected[local_rank] and base.one_gpu(env)
        assert env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"  # CUDA's numbering as NVML's and nvidia-smi's
        # the node's list is kept: the rank can still find its peers' GPUs (their cores, for pinning)
        assert base.rank_gpus(env, 2) == expected
        assert base.one_gpu_env(env, local_rank)["CUDA_VISIBLE_DEVICES"] == expected[local_rank]  # twice: the same


def test_a_rank_without_a_gpu_of_its_own_is_left_to_say_so():
    assert base.one_gpu_env({"CUDA_VISIBLE_DEVICES": "5"}, 1) == {}  # two ranks, one GPU listed
    assert base.one_gpu_env({"CUDA_VISIBLE_DEVICES": "-1"}, 0) == {}


def test_the_worker_narrows_before_torch_is_imported():
    """The worker's main sets CUDA_VISIBLE_DEVICES before anything imports torch (CUDA reads it
    once): importing the worker module, in the pyg stack, imports no torch."""
    python = stack_python("pyg")
    code = "import sys, bench.run.worker; print('torch' in sys.modules)"
    out = subprocess.run([python, "-c", code], cwd=REPO, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[-1] == "False"


# --- workers from the pinned cores ----------------------------------------------------------------

def test_per_gpu_workers_come_from_the_cores_a_rank_is_pinned_to():
    # a two-socket node, 32 usable cores, 2 ranks whose GPUs sit on socket 0 (16 cores): the host's
    # per-gpu figure is 32 / 2 - 1 = 15 workers, the pinned rank has 8 cores
    assert core_budget.per_gpu_workers(32, 2) == 15
    budget = core_budget.pinned(8, 15, core_budget.AUTO, rule=core_budget.PER_GPU)
    assert (budget.workers, budget.threads, budget.cores, budget.oversubscribed) == (7, 1, 8, False)
    # an explicit count stays as asked, and the budget says it oversubscribes the pinned cores
    budget = core_budget.pinned(4, 6)
    assert budget.workers == 6 and budget.oversubscribed


# --- start-up by phase and the device-wide GPU memory in results ------------------------------------

RANK = {"rank": 0, "startup_phases": {"imports": 2.0, "cuda_context": 0.5, "process_group": 1.5},
        "gpu_device_used_bytes": 3 * 2**30, "gpu_peaks": {"build": 2**20, "measured": 2**30}}


def test_startup_phases_and_device_memory_reach_the_result_and_a_column():
    from bench.run.worker import slowest_phases

    other = {"rank": 1, "startup_phases": {"imports": 1.0, "cuda_context": 0.7, "process_group": 1.5},
             "gpu_device_used_bytes": 2**30, "gpu_peaks": {"build": 2**21, "measured": 2**29}}
    cell_record = {"startup_phases": slowest_phases([RANK["startup_phases"], other["startup_phases"]]),
                   "gpu_device_used_bytes": 3 * 2**30, "gpu_peaks": slowest_phases([RANK["gpu_peaks"], other["gpu_peaks"]])}
    assert cell_record["startup_phases"] == {"imports": 2.0, "cuda_context": 0.7, "process_group": 1.5}
    assert cell_record["gpu_peaks"] == {"build": 2**21, "measured": 2**30}
    base_record = {"versions": {}, "val_acc": 0.5, "test_acc": 0.5, "startup_s": 4.0, "epochs": [{"seconds": 1.0, "seeds": 1}]}
    written = record.from_record({**base_record, **cell_record})
    assert written["startup_phases"] == cell_record["startup_phases"] and written["gpu_device_used_bytes"] == 3 * 2**30
    cpu = record.from_record(base_record)  # a CPU cell: left out, as files written before them lack them
    assert "gpu_device_used_bytes" not in cpu and "gpu_peaks" not in cpu

    from tests import synthetic_results as syn

    cid = syn.cell_id(mode="cpu-cuda")
    doc = syn.run([syn.bench(cid, [1.0, 1.1, 0.9], **{k: written[k] for k in cell_record}, ranks=[RANK])])
    ResultFile.model_validate(doc)  # the reader's model takes them, per cell and per rank
    bad = json.loads(json.dumps(doc))
    bad["benchmarks"][0]["extra_info"]["startup_phases"]["imports"] = -1.0
    with pytest.raises(Exception, match="startup_phases"):
        ResultFile.model_validate(bad)
    cell = results.of_document(doc, REPO / "x.json").measured[0]
    shown = {c.header: c.html_text(cell) for c in columns.CELL_COLUMNS}
    assert shown["start-up by phase"] == "imports 2.0 · cuda_context 0.7 · process_group 1.5"
    assert shown["GPU device used"] == "3,072" and shown["GPU peak by phase"].startswith("build 2")


# --- NCCL's set-up in the process_group phase -------------------------------------------------------

@pytest.mark.parametrize("stack, takes_device_id", [("pyg", True), ("dgl", False)])  # torch 2.13, 2.2.1
def test_nccl_is_set_up_eagerly_where_torch_can_and_by_a_barrier_everywhere(stack, takes_device_id):
    """Each stack's own init_process_group is asked whether it takes device_id (eager NCCL set-up);
    gloo never gets it. The barrier on the rank's GPU follows init in every torch
    (worker.join_process_group)."""
    python = stack_python(stack)
    code = """
import json, torch, torch.distributed as dist
from bench.run.worker import eager_device
print(json.dumps([list(eager_device(dist.init_process_group, "nccl", torch.device("cuda", 0))),
                  list(eager_device(dist.init_process_group, "gloo", torch.device("cpu")))]))
"""
    out = subprocess.run([python, "-c", code], cwd=REPO, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=120)
    assert out.returncode == 0, out.stderr
    nccl, gloo = json.loads(out.stdout.splitlines()[-1])
    assert nccl == (["device_id"] if takes_device_id else []) and gloo == []
    source = (REPO / "bench/run/worker.py").read_text()
    join = source[source.index("def join_process_group"):source.index("def eager_device")]
    assert join.index("init_process_group(") < join.index("rank_barrier(dist, settings)")


# --- the start check: the stack's CUDA build against the driver and the GPUs ------------------------

CU130_ARCHS = ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120", "compute_120"]
CU126_ARCHS = ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"]


def test_a_too_old_driver_is_refused_in_one_line_naming_the_tag_to_use():
    why = cuda_fit.problem("13.0", "12.4", [("NVIDIA A100-SXM4-80GB", (8, 0))], CU130_ARCHS)
    assert why is not None and "\n" not in why
    assert "driver supports CUDA 12.4" in why and "built for CUDA 13.0" in why and ":latest-cu126" in why
    assert cuda_fit.problem("13.0", 13000, [("H100", (9, 0))], CU130_ARCHS) is None  # the driver API's integer
    # CUDA 12's minor version compatibility: a 12.6 build on a 12.2 driver runs
    assert cuda_fit.problem("12.6", "12.2", [("Tesla V100-SXM2-32GB", (7, 0))], CU126_ARCHS) is None


def test_a_too_old_gpu_is_refused_in_one_line_naming_the_tag_to_use():
    why = cuda_fit.problem("13.0", "13.0", [("NVIDIA H100", (9, 0)), ("Tesla V100-SXM2-32GB", (7, 0))], CU130_ARCHS)
    assert why is not None and "\n" not in why
    assert why.startswith("GPU 1 (Tesla V100-SXM2-32GB, compute capability 7.0) has no kernels") and ":latest-cu126" in why
    # cubins run on later minors of their major (sm_86 on 8.9: L4, L40S), PTX on anything later
    assert cuda_fit.runs_on((8, 9), CU126_ARCHS) and cuda_fit.runs_on((12, 1), ["compute_90"])
    assert not cuda_fit.runs_on((10, 0), CU126_ARCHS) and not cuda_fit.runs_on((8, 6), ["sm_80a"])
    why = cuda_fit.problem("12.6", "12.8", [("NVIDIA B200", (10, 0))], CU126_ARCHS)
    assert why is not None and why.endswith("update the NVIDIA driver to >= 580 and use the image tag :latest (CUDA 13.0, "
                                            + cuda_fit.IMAGE_TAGS[0].gpus + ")")  # the newest GPUs: the CUDA 13 tag
    assert cuda_fit.problem("12.6", "12.8", [("Kepler", (3, 7))], CU126_ARCHS).endswith("gnnbench stacks add)")


def test_the_tags_the_check_names_are_the_ones_compose_builds_and_the_docs_describe():
    compose = (REPO / "docker-compose.yml").read_text()
    docs = (REPO / "docs/containers.md").read_text() + (REPO / "docs/gpus.md").read_text()
    for tag in cuda_fit.IMAGE_TAGS:
        assert f"gnnbench:{tag.tag}" in compose, tag.tag
        assert f":{tag.tag}" in docs and f"driver ≥ {tag.min_driver}" in docs, tag.tag


# --- pinned-cuda: one host copy per node, and the memory plan ------------------------------------------

STATS = {"num_nodes": 1_000_000, "num_edges": 10_000_000, "feature_dim": 100, "num_classes": 8,
         "num_train": 1000, "num_val": 1000, "num_test": 1000}
FEATURES = 1_000_000 * 100 * 4


def test_the_memory_plan_counts_what_a_node_holds_once_once():
    from bench.run import memory_plan as memory

    pinned = {ws: memory.estimate(STATS, "dgl-graphbolt", ws, "memory", "pinned-cuda") for ws in (1, 4)}
    cpu = {ws: memory.estimate(STATS, "dgl-graphbolt", ws, "memory", "cpu-cuda") for ws in (1, 4)}
    cuda = memory.estimate(STATS, "dgl-graphbolt", 4, "memory", "cuda-cuda")
    # pinned-cuda: graph and features once per node, whatever the ranks; a rank adds its interpreter only
    assert pinned[4]["total_bytes"] - pinned[1]["total_bytes"] == 3 * memory.PROCESS_OVERHEAD_BYTES
    assert pinned[4]["shared_bytes"] >= FEATURES
    # cpu-cuda: each rank reads its own features; GraphBolt's graph is the hub's maps, held once
    assert cpu[4]["total_bytes"] - cpu[1]["total_bytes"] == 3 * (memory.PROCESS_OVERHEAD_BYTES + FEATURES)
    # cuda-cuda: the features go from the map to the GPU: no host copy at all
    assert cuda["total_bytes"] == 4 * memory.PROCESS_OVERHEAD_BYTES + cuda["shared_bytes"] < cpu[4]["total_bytes"]
    assert cuda["shared_bytes"] < pinned[4]["shared_bytes"] - FEATURES  # nor GraphBolt's graph on the host
    # PyG builds its own CSC in each rank: that part stays per rank
    pyg = {ws: memory.estimate(STATS, "pyg-neighbor", ws, "memory", "cpu-cuda") for ws in (1, 2)}
    assert pyg[2]["total_bytes"] - pyg[1]["total_bytes"] == pyg[1]["per_rank_bytes"] > FEATURES


def test_ranks_of_a_node_share_one_writable_copy_to_pin(tmp_path):
    """Two processes ask for the same array's node copy: one writes it, both map the same file
    read-write (what cudaHostRegister needs), and a write through one is seen by the other."""
    import numpy as np

    from bench.backends import shared_host

    source = tmp_path / "hub.npy"
    np.save(source, np.arange(1000, dtype=np.int64))
    shared = tmp_path / "shared"
    shared.mkdir()
    code = f"""
import numpy as np, pathlib, sys
from bench.backends import shared_host
hub = np.load({str(source)!r}, mmap_mode="r")
copy = shared_host.node_copy(hub, "indices", pathlib.Path({str(shared)!r}))
assert copy.flags.writeable and copy.flags.c_contiguous and not np.shares_memory(copy, hub)
print(int(copy.sum()), type(copy).__name__)
"""
    procs = [subprocess.Popen(["python3", "-c", code], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env={**os.environ, "PYTHONPATH": str(REPO)}) for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    assert [o[0].split() for o in outs] == [[str(sum(range(1000))), "memmap"]] * 2
    assert sorted(p.name for p in shared.iterdir()) == ["indices.lock", "indices.npy"]  # one copy
    mine = shared_host.node_copy(np.load(source, mmap_mode="r"), "indices", shared)
    mine[0] = 7
    assert np.load(shared / "indices.npy", mmap_mode="r")[0] == 7  # MAP_SHARED: the ranks' pages are one
    assert shared_host.node_copy(np.arange(3), "x", None).flags.writeable  # no shared folder: a private copy



def test_the_multi_gpu_suite_counts_coras_batches_per_rank_as_the_shard_makes_them(monkeypatch):
    import math

    import numpy as np

    comment = (REPO / "suites/multi-gpu.yaml").read_text()
    seeds = np.arange(140)  # Cora's training nodes
    for world, words in ((8, "17 of them"), (8, "two batches per rank"), (4, "35 seeds, three batches"),
                         (2, "70 seeds, five")):
        monkeypatch.setenv("RANK", "0")
        monkeypatch.setenv("WORLD_SIZE", str(world))
        mine = len(base.shard(seeds, 0))
        assert words in comment
        assert f"{mine} " in words or {2: "two", 3: "three", 5: "five"}[math.ceil(mine / 16)] in words


# --- the ceilings cache: keyed on the hardware, not the hostname ----------------------------------------

def test_the_ceilings_cache_outlives_a_new_container_hostname(monkeypatch, tmp_path):
    import platform

    from bench.machine import ceilings

    before = ceilings.cache_file(tmp_path)
    monkeypatch.setattr(platform, "node", lambda: "3f2a9c0d1e7b")  # what `docker compose run` names a container
    assert ceilings.cache_file(tmp_path) == before
    (tmp_path / "dmi").mkdir()
    (tmp_path / "dmi" / "sys_vendor").write_text("Supermicro\n")
    (tmp_path / "dmi" / "product_name").write_text("SYS-821GE-TNHR\n")
    assert ceilings.board(tmp_path / "dmi") == "Supermicro / SYS-821GE-TNHR"
    monkeypatch.setattr(ceilings, "gpu_uuids", lambda: ["GPU-1234"])  # another card: another machine
    assert ceilings.cache_file(tmp_path) != before


# --- the offline node's CPU-only sampler build, and PyG's scatter on CUDA ---------------------------------

def test_the_node_builds_torch_sparse_without_cuda_kernels():
    script = (REPO / "docker/node-install.sh").read_text()
    build = next(line for line in script.splitlines() if "--no-build-isolation torch-scatter torch-sparse" in line)
    assert build.strip().startswith("FORCE_ONLY_CPU=1 ")


def test_pyg_scatter_leaves_a_cpu_only_torch_scatter_on_a_cuda_device():
    """In the pyg stack (its torch-scatter, where it has one, is built for the CPU: what the node
    builds): on a CUDA device the backend tells PyG it has no torch_scatter, and PyG's scatter max
    then takes torch's own scatter_reduce, with the same values and gradients as torch_scatter's."""
    python = stack_python("pyg")
    code = """
import json, torch, torch_geometric.typing as t
if not t.WITH_TORCH_SCATTER:
    print(json.dumps("no torch-scatter in this stack")); raise SystemExit
from torch_geometric.utils import scatter
from bench.backends.pyg_node import scatter_without_cpu_only_torch_scatter
src = torch.tensor([1.0, 5.0, 2.0, 7.0, 3.0], requires_grad=True)
index = torch.tensor([0, 0, 1, 1, 1])
def run():
    out = scatter(src, index, dim=0, reduce="max")
    grad, = torch.autograd.grad(out.sum(), src)
    return out.tolist(), grad.tolist()
before = run()
untouched = scatter_without_cpu_only_torch_scatter(torch.device("cpu"))
what = scatter_without_cpu_only_torch_scatter(torch.device("cuda", 0))
print(json.dumps([before, run(), untouched, what, t.WITH_TORCH_SCATTER]))
"""
    out = subprocess.run([python, "-c", code], cwd=REPO, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=300)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.splitlines()[-1])
    if isinstance(got, str):
        pytest.skip(got)
    before, after, untouched, what, flag = got
    assert before == after == [[5.0, 7.0], [0.0, 1.0, 0.0, 1.0, 0.0]]
    assert untouched is None and "no CUDA kernels" in what and flag is False


def test_nvidia_smis_gpu_list_is_read_without_nvml():
    from bench.machine import gpu_affinity

    text = ("0, GPU-9d2a1c4e-0000-1111-2222-333344445555, 00000000:18:00.0\n"
            "1, GPU-0b7e4f21-0000-1111-2222-333344445555, 00000000:3B:00.0\n")
    rows = gpu_affinity.parse_listing(text)
    assert rows[1] == {"index": 1, "uuid": "GPU-0b7e4f21-0000-1111-2222-333344445555", "pci": "00000000:3B:00.0"}
    assert gpu_affinity.find_gpu("GPU-0b7e", rows)[0] is rows[1] and gpu_affinity.find_gpu("0", rows)[0] is rows[0]
    assert gpu_affinity.find_gpu("MIG-1234", rows)[0] is None


def test_every_stack_has_nvml_in_the_gpu_images_and_the_machines_stacks_stay_as_built(tmp_path, monkeypatch):
    """nvidia-ml-py is a container-only line of every pin file: the images get NVML (each rank's GPU
    cores, GPU utilisation), a machine's stack folders (named by a digest of what they install) do
    not change, so no machine rebuilds its stacks for it."""
    from bench import stacks

    for name, stack in stacks.available().items():
        plain, _ = stack.requirement_lines(container=True)
        assert any(line.startswith("nvidia-ml-py==") for line in plain), name
        local, local_no_isolation = stack.requirement_lines(container=False)
        assert not any(line.startswith("nvidia-ml-py") for line in local + local_no_isolation), name
        # the machine's stack folder is the one the pins without that line name
        without = tmp_path / stack.requirements.name
        without.write_text("".join(line for line in stack.pins.splitlines(keepends=True)
                                   if not line.startswith("nvidia-ml-py")))
        monkeypatch.delenv(stacks.IN_CONTAINER_ENV, raising=False)
        assert stacks.Stack(name, without).digest == stack.digest, name


def test_cugraph_pygs_features_are_counted_once_per_node():
    from bench.run import memory_plan as memory

    one, four = (memory.estimate(STATS, "cugraph-pyg", ws, "memory", "cuda-cuda") for ws in (1, 4))
    assert four["total_bytes"] - one["total_bytes"] == 3 * memory.PROCESS_OVERHEAD_BYTES
    assert one["shared_bytes"] >= FEATURES  # WholeGraph's host memory: the features once, split over the ranks


def test_a_full_shared_folder_leaves_each_rank_its_own_copy(tmp_path, monkeypatch):
    import numpy as np

    from bench.backends import shared_host

    monkeypatch.setattr(shared_host, "free_bytes", lambda where: 10)  # a container's 64 MB /dev/shm, say
    copy = shared_host.node_copy(np.arange(100, dtype=np.int64), "big", tmp_path)
    assert not isinstance(copy, np.memmap) and copy.flags.writeable and list(tmp_path.iterdir()) == []


def test_graphbolt_pins_the_nodes_shared_copy_in_place(tmp_path):
    """In the dgl stack: what pinned-cuda hands to pin_memory_ (cudaHostRegister, in place) is the
    cell's shared copy itself (a write through it reaches the file every rank maps), and the hub's
    read-only map where no pinning is asked."""
    import numpy as np

    python = stack_python("dgl")
    hub = tmp_path / "hub.npy"
    np.save(hub, np.arange(50, dtype=np.int64))
    shared = tmp_path / "shared"
    shared.mkdir()
    code = f"""
import json, numpy as np
from bench.backends import dgl_graphbolt as backend
hub = np.load({str(hub)!r}, mmap_mode="r")
pinned = backend.host_tensor(hub, True, "indices")
pinned[0] = 42
kept = backend.host_tensor(hub, False, "indices")
print(json.dumps([int(np.load({str(shared / "indices.npy")!r}, mmap_mode="r")[0]), bool(np.shares_memory(kept.numpy(), hub))]))
"""
    out = subprocess.run([python, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(REPO), "GNNBENCH_SHARED_HOST": str(shared)})
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.splitlines()[-1]) == [42, True]

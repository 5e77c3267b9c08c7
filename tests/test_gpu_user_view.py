"""What a GPU user looks at, checked on a machine without a GPU: the GPU sampler's reduction (a
source of synthetic NVML-like samples), the recorded reason where there is no GPU or no NVML,
the machine-info parsers on `nvidia-smi` text, the NCCL settings captured, CUDA out-of-memory
recorded as `oom` (raised as torch raises it, through real cells, one rank and two), each rank's
loader workers on their own cores through PyG's own `enable_cpu_affinity`, and the table column.
What only a GPU can show (NVML's numbers, the cores next to a real GPU, a real OOM) is marked
unverified in the cells' notes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from bench.publish import columns, results
from bench import stacks
from bench.machine import gpu_affinity, gpu_facts, gpu_sampler, nvml
from bench.run import cuda_oom, runner
from tests import synthetic_results as syn
from tests.conftest import REPO, require_stacks, run_suite

MB = 1e6


# --- the sampler's reduction ------------------------------------------------------------------

def samples(times, util, h2d_mb=None, used=None) -> list[gpu_sampler.Sample]:
    return [gpu_sampler.Sample(t, util_pct=u, mem_util_pct=u / 2 if u is not None else None,
                               h2d_bytes_per_s=None if h2d_mb is None else h2d_mb[i] * MB,
                               d2h_bytes_per_s=None if h2d_mb is None else h2d_mb[i] * MB / 10,
                               used_bytes=None if used is None else used[i])
            for i, (t, u) in enumerate(zip(times, util))]


def test_an_epoch_reduces_to_mean_and_max_utilisation_and_bytes_moved():
    # one second, samples at 0.1, 0.3, ..., 0.9: each stands for 0.2 s (the first and last from the
    # epoch's edges), so a constant 100 MB/s moves 100 MB
    got = gpu_sampler.reduce(samples([0.1, 0.3, 0.5, 0.7, 0.9], [10, 20, 90, 30, 50], [100] * 5,
                                     used=[1, 5, 3, 2, 2]), 0.0, 1.0)
    assert got["samples"] == 5 and got["seconds"] == 1.0
    assert got["util_mean_pct"] == pytest.approx(40) and got["util_max_pct"] == 90
    assert got["mem_util_mean_pct"] == pytest.approx(20)
    assert got["h2d_bytes"] == pytest.approx(100 * MB) and got["h2d_mb_per_s"] == pytest.approx(100)
    assert got["d2h_mb_per_s"] == pytest.approx(10)
    assert got["device_used_max_bytes"] == 5


def test_uneven_samples_weigh_by_the_time_each_stands_for():
    # a burst at 1000 MB/s read once at t=0.05, then 0 MB/s at 0.15 and 0.95: the first sample
    # stands for [0, 0.1], so 100 MB in all over one second
    got = gpu_sampler.reduce(samples([0.05, 0.15, 0.95], [100, 0, 0], [1000, 0, 0]), 0.0, 1.0)
    assert got["h2d_bytes"] == pytest.approx(100 * MB) and got["h2d_mb_per_s"] == pytest.approx(100)
    assert got["util_mean_pct"] == pytest.approx(100 / 3)  # utilisation: a plain mean of the readings


def test_counters_never_read_are_none_not_zero():
    got = gpu_sampler.reduce(samples([0.5], [None]), 0.0, 1.0)  # e.g. a MIG instance: no utilisation, no PCIe
    assert got["util_mean_pct"] is None and got["util_max_pct"] is None
    assert got["h2d_bytes"] is None and got["h2d_mb_per_s"] is None
    assert gpu_sampler.reduce([], 0.0, 0.5)["samples"] == 0


def test_epochs_then_ranks_summarise():
    epochs = [gpu_sampler.reduce(samples([0.5], [u], [h]), 0.0, 1.0) for u, h in ((40, 100), (60, 300))]
    rank = gpu_sampler.summarise(epochs + [None])
    assert rank["epochs"] == 2 and rank["util_mean_pct"] == pytest.approx(50) and rank["util_max_pct"] == 60
    assert rank["h2d_mb_per_s"] == pytest.approx(200) and rank["h2d_bytes_per_epoch"] == pytest.approx(200 * MB)
    starved = {**rank, "util_mean_pct": 10.0, "util_max_pct": 30.0, "h2d_mb_per_s": 100.0}
    cell = gpu_sampler.across_ranks([rank, starved])
    assert cell["util_mean_pct"] == pytest.approx(30) and cell["util_min_rank_pct"] == 10
    assert cell["util_max_pct"] == 60 and cell["h2d_mb_per_s"] == pytest.approx(150)
    assert gpu_sampler.summarise([]) is None and gpu_sampler.across_ranks([None, None]) is None


class Ramp:
    """An NVML-like source: utilisation climbing 10 points a read, 50 MB/s host-to-device."""

    def __init__(self):
        self.reads = 0

    def read(self) -> gpu_sampler.Sample:
        self.reads += 1
        return gpu_sampler.Sample(time.perf_counter(), util_pct=min(100.0, 10.0 * self.reads), h2d_bytes_per_s=50 * MB)


def test_the_sampler_thread_samples_between_start_and_stop():
    sampler = gpu_sampler.EpochSampler(Ramp(), interval=0.02)
    sampler.start()
    deadline = time.monotonic() + 60  # a busy machine schedules the thread late, never not at all
    while sampler.source.reads < 4 and time.monotonic() < deadline:
        time.sleep(0.02)
    got = sampler.stop()
    assert got["samples"] >= 3 and got["util_max_pct"] >= 30
    assert got["h2d_mb_per_s"] == pytest.approx(50, rel=0.05)
    reads = sampler.source.reads
    time.sleep(0.06)
    assert sampler.source.reads == reads  # stopped: no reads after the epoch


def test_a_source_that_fails_loses_samples_not_the_epoch():
    class Broken:
        def read(self):
            raise OSError("driver went away")

    sampler = gpu_sampler.EpochSampler(Broken(), interval=0.01)
    sampler.start()
    time.sleep(0.05)
    assert sampler.stop()["samples"] == 0 and "driver went away" in sampler.errors[0]


class Device:
    def __init__(self, type_: str, index: int | None = 0):
        self.type, self.index = type_, index


def test_no_gpu_or_no_nvml_records_why(monkeypatch):
    assert gpu_sampler.open_for(Device("cpu")) == (None, gpu_sampler.CPU_ONLY)
    monkeypatch.setitem(sys.modules, "pynvml", None)  # nvidia-ml-py absent: `import pynvml` fails
    sampler, reason = gpu_sampler.open_for(Device("cuda"))
    assert sampler is None and "nvidia-ml-py" in reason and "not sampled" in reason


def test_nvml_is_matched_to_the_cuda_device():
    listed = [{"pci": b"00000000:17:00.0", "uuid": "GPU-aaaa-1111"}, {"pci": "00000000:65:00.0", "uuid": "GPU-bbbb-2222"}]
    assert nvml.match_index(0, listed, pci="0000:65:00.0")[0] == 1  # by PCI bus id, whatever the order
    assert nvml.match_index(0, listed, uuid="bbbb-2222")[0] == 1  # torch's UUID has no GPU- prefix
    assert nvml.match_index(0, listed, visible="1")[0] == 1
    assert nvml.match_index(1, listed, visible="GPU-aaaa")[0] is None  # CUDA sees one GPU only
    assert nvml.match_index(0, listed, visible="GPU-aaaa")[0] == 0  # a UUID prefix, as CUDA takes it
    index, why = nvml.match_index(0, listed, visible="MIG-1234")
    assert index is None and "MIG" in why
    assert nvml.match_index(3, listed)[0] is None
    assert nvml.normal_pci("00000000:0A:00.0") == nvml.normal_pci("0000:0a:00.0") == "0000:0a:00.0"


# --- machine info: nvidia-smi text, NCCL settings -----------------------------------------------

TOPO = ("\t\x1b[4mGPU0\tGPU1\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m\n"
        "GPU0\t X \tNV18\tPIX\t0-55,112-167\t0\t\tN/A\n"
        "GPU1\tNV18\t X \tNODE\t56-111,168-223\t1\t\tN/A\n"
        "NIC0\tPIX\tNODE\t X \t\t\t\t\n"
        "\n"
        "Legend:\n\n  X    = Self\n  NV#  = Connection traversing a bonded set of # NVLinks\n\n"
        "NIC Legend:\n\n  NIC0: mlx5_0\n")

QUERY = ("0, NVIDIA H100 80GB HBM3, GPU-aaaa-1111, 00000000:17:00.0, 550.54.15, 81559, 1980, 2619, 1980, 2619, 5, 16, "
         "Disabled, 700.00, Default\n"
         "1, NVIDIA H100 80GB HBM3, GPU-bbbb-2222, 00000000:65:00.0, 550.54.15, 81559, 345, 2619, 1980, 2619, 5, 16, "
         "Enabled, [N/A], Default\n")


def test_topology_matrix_is_parsed():
    topo = gpu_facts.parse_topology(TOPO)
    assert set(topo) == {"GPU0", "GPU1", "NIC0"}
    assert topo["GPU0"]["links"] == {"GPU1": "NV18", "NIC0": "PIX"}
    assert topo["GPU1"]["cpu_affinity"] == "56-111,168-223" and topo["GPU1"]["numa_affinity"] == "1"
    assert topo["GPU0"]["cpus"][:2] == [0, 1] and len(topo["GPU0"]["cpus"]) == 112
    assert "cpu_affinity" not in topo["NIC0"]
    assert gpu_facts.parse_topology("") == {} and gpu_facts.parse_topology("No devices were found") == {}


def test_gpu_query_is_parsed():
    gpus = gpu_facts.parse_query(QUERY)
    assert [g["index"] for g in gpus] == [0, 1]
    assert gpus[0]["name"] == "NVIDIA H100 80GB HBM3" and gpus[0]["memory.total"] == 81559
    assert gpus[1]["clocks.sm"] == 345 and gpus[1]["clocks.max.sm"] == 1980  # idle clocks vs the most
    assert gpus[1]["mig.mode.current"] == "Enabled" and gpus[1]["power.limit"] is None  # [N/A]
    assert gpus[0]["pci.bus_id"] == "00000000:17:00.0" and gpus[0]["pcie.link.width.current"] == 16


def test_gpu_info_from_the_tools(monkeypatch):
    outputs = {"--query-gpu": QUERY, "topo": TOPO}
    monkeypatch.setattr(gpu_facts.shutil, "which", lambda name: "/usr/bin/nvidia-smi")
    monkeypatch.setattr(gpu_facts, "run_tool", lambda args: next(v for k, v in outputs.items() if any(a.startswith(k) for a in args)))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    monkeypatch.setenv("NCCL_IB_DISABLE", "1")
    info = gpu_facts.gpu_info()
    assert info["gpus"][0] == "NVIDIA H100 80GB HBM3, 550.54.15, 81559 MiB"  # the older form, kept
    assert info["topology"] == TOPO and info["topology_matrix"]["GPU0"]["links"]["GPU1"] == "NV18"
    assert info["mig_mode"] == ["Disabled", "Enabled"] and info["cuda_visible_devices"] == "0,1"
    assert info["nccl_env"]["NCCL_IB_DISABLE"] == "1"
    machine = {"gnnbench": {"gpu": info}}
    from bench import result_format
    assert result_format.MachineInfo.model_validate(machine)  # the schema reads it
    monkeypatch.setattr(gpu_facts.shutil, "which", lambda name: None)
    assert gpu_facts.gpu_info() is None


def test_nccl_settings_are_captured():
    env = {"NCCL_DEBUG": "INFO", "NCCL_SOCKET_IFNAME": "eth0", "TORCH_NCCL_BLOCKING_WAIT": "1", "PATH": "/bin",
           "MY_NCCL_THING": "x"}
    assert gpu_facts.nccl_env(env) == {"NCCL_DEBUG": "INFO", "NCCL_SOCKET_IFNAME": "eth0", "TORCH_NCCL_BLOCKING_WAIT": "1"}


def test_cpu_lists_and_shares():
    assert gpu_affinity.parse_cpulist("0-3,8,10-11\n") == [0, 1, 2, 3, 8, 10, 11]
    assert gpu_affinity.mask_to_cores([0b1011, 1]) == [0, 1, 3, 64]
    cores = list(range(8))
    assert gpu_affinity.split_share(cores, [0, 1], 1) == [4, 5, 6, 7]  # two GPUs on one socket
    assert gpu_affinity.split_share([0, 1], [0, 1, 2], 2) == [0, 1]  # fewer cores than ranks: shared
    assert gpu_affinity.split_loader([4, 5, 6, 7], 2) == ([4, 5], [6, 7])
    assert gpu_affinity.split_loader([4, 5], 2) == ([4, 5], None)  # the rank keeps a core
    assert gpu_affinity.pin_rank(Device("cpu"), ["0"], 0, 2).record == {}  # CPU cells as they are


# --- CUDA out of memory ----------------------------------------------------------------------

def stack_python(name: str) -> str:
    require_stacks(name)
    return str(stacks.get(name).python)


@pytest.mark.parametrize("stack", ["pyg", "dgl"])  # torch 2.13 and torch 2.2.1
def test_torch_out_of_memory_error_is_classified_as_oom(stack):
    code = """
import json, torch
from bench.run import cuda_oom
try:
    raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 1.50 GiB. GPU 0 has a total capacity of 79 GiB")
except Exception as exc:
    caught = exc
print(json.dumps({"oom": cuda_oom.is_cuda_oom(caught), "other": cuda_oom.is_cuda_oom(RuntimeError("shape mismatch")),
                  "dgl": cuda_oom.is_cuda_oom(RuntimeError("CUDA error: out of memory")),
                  "record": cuda_oom.record(caught, 1, torch.device("cpu"), {"versions": {}})}))
"""
    out = subprocess.run([stack_python(stack), "-c", code], cwd=REPO, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=120)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.splitlines()[-1])
    assert got["oom"] and got["dgl"] and not got["other"]
    assert got["record"]["status"] == "oom" and got["record"]["gpu_memory"]["tried_bytes"] == int(1.5 * 2**30)
    assert got["record"]["reason"].startswith("CUDA out of memory on rank 1") and "1,536 MiB" in got["record"]["reason"]


def test_the_oom_reason_names_the_device_wide_memory():
    memory = {"device_used_bytes": 80 * 2**30, "device_total_bytes": 81 * 2**30,
              "peak_allocated_bytes": 70 * 2**30, "peak_reserved_bytes": 75 * 2**30}
    text = cuda_oom.reason(RuntimeError("CUDA out of memory. Tried to allocate 20.00 MiB"), 0, "cuda:0", memory)
    assert "device-wide 81,920 of 82,944 MiB in use when it failed" in text
    assert "71,680 MiB allocated, 76,800 MiB reserved" in text and "tried to allocate 20 MiB" in text


def test_a_rank_that_wrote_oom_and_exited_is_oom(tmp_path):
    """The record the runner reads; with the worker's exit code it decides the outcome
    (test_out_of_gpu_memory_is_recorded_as_oom_for_one_rank_and_for_two)."""
    out = tmp_path / "result.json"
    assert runner.written_record(out) is None
    out.write_text(json.dumps({"status": "oom", "reason": "CUDA out of memory on rank 1"}))
    assert runner.written_record(out)["status"] == "oom"
    out.write_text("{half")
    assert runner.written_record(out) is None


OOM_SUITE = """
name: gpu-user-view
datasets:
  tiny: {source: synthetic, params: {scale: 9, edge_factor: 4, feature_dim: 8, num_classes: 3, seed: 1}}
backends: [pyg-neighbor, dgl-graphbolt]
settings: {num_workers: 0, mode: cpu-cpu, batch_size: 64, fanout: [4, 2], epochs: 2, warmup_epochs: 1,
           model: sage, hidden: 8, timeout: 240, world_size: [1, 2]}
exclude:
  - {backend: dgl-graphbolt, world_size: 2}
"""


@pytest.fixture(scope="module")
def oom_run(tmp_path_factory, cache_dir):
    """PyG's cells raise CUDA's out-of-memory error in their first measured epoch (one rank alone;
    rank 1 of two), GraphBolt's is measured."""
    require_stacks("pyg", "dgl")
    folder = tmp_path_factory.mktemp("oom")
    suite = folder / "suite.yaml"
    suite.write_text(OOM_SUITE)
    out = folder / "out.json"
    proc = run_suite(suite, out, cache_dir, env={"GNNBENCH_FAULT": "oom:pyg-neighbor/tiny/mode=cpu-cpu/workers=0/ws=1,"
                                                                   "oom:pyg-neighbor/tiny/mode=cpu-cpu/workers=0/ws=2@1"})
    assert proc.returncode == 0, proc.stdout[-3000:]
    return json.loads(out.read_text())


def test_out_of_gpu_memory_is_recorded_as_oom_for_one_rank_and_for_two(oom_run):
    by_id = {u["id"]: u for u in oom_run["unmeasured"]}
    one = by_id["pyg-neighbor/tiny/mode=cpu-cpu/workers=0/ws=1"]
    two = by_id["pyg-neighbor/tiny/mode=cpu-cpu/workers=0/ws=2"]
    assert one["status"] == "oom" and one["reason"].startswith("CUDA out of memory on rank 0")
    assert "tried to allocate 2,048 MiB" in one["reason"] and one["gpu_memory"]["tried_bytes"] == 2**31
    # rank 1 wrote the record and exited; torchrun ended rank 0, stuck in its next all-reduce
    assert two["status"] == "oom" and two["reason"].startswith("CUDA out of memory on rank 1")


def test_a_cpu_cell_records_why_no_gpu_was_sampled_and_the_nccl_facts(oom_run, tmp_path):
    [measured] = oom_run["benchmarks"]
    info = measured["extra_info"]
    assert info["cell_id"] == "dgl-graphbolt/tiny/mode=cpu-cpu/workers=0/ws=1"
    assert info["gpu_util"] is None and info["gpu_util_reason"] == gpu_sampler.CPU_ONLY
    assert "gpu_util" not in info["ranks"][0] and "cpu_affinity" not in info["ranks"][0]  # CPU cells as they were
    # torch 2.2.1+cu121 carries NCCL; its version and the NCCL settings are in the cell's record
    assert info["device"]["nccl_version"].count(".") == 2 and info["device"]["nccl_env"] == {}
    path = tmp_path / "out.json"
    path.write_text(json.dumps(oom_run))
    run = results.read(path)  # the schema reads oom cells and the new fields
    assert {c.status for c in run.cells} == {"ok", "oom"}


def test_loader_workers_are_pinned_through_pyg_enable_cpu_affinity(tmp_path):
    """A rank's share of cores with one worker: PyG's own context gives the worker the last core
    and the rank keeps the rest (the GPU's cores stand in here as the cores this process may use)."""
    python = stack_python("pyg")
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two usable cores")
    code = f"""
import json, os, torch
from torch_geometric.data import Data
from torch_geometric.loader import NeighborLoader
from bench.machine.gpu_affinity import Plan

def seen(worker_id):
    with open({str(tmp_path / 'worker.json')!r}, "w") as f:
        json.dump(sorted(os.sched_getaffinity(0)), f)

data = Data(x=torch.randn(50, 4), edge_index=torch.randint(0, 50, (2, 200)), num_nodes=50)
loader = NeighborLoader(data, num_neighbors=[2], batch_size=10, num_workers=1, persistent_workers=True,
                        worker_init_fn=seen)
cores = sorted(os.sched_getaffinity(0))
plan = Plan({{"rank_cores": cores, "num_workers": 1}}, cores)
with plan.loader(loader):
    batches = sum(1 for _ in loader)
print(json.dumps({{"record": plan.record, "batches": batches, "rank": sorted(os.sched_getaffinity(0)), "cores": cores}}))
"""
    out = subprocess.run([python, "-c", code], cwd=REPO, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=180)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.splitlines()[-1])
    cores = got["cores"]
    assert got["batches"] == 5
    assert got["record"]["loader_cores"] == [cores[-1]] and got["rank"] == cores[:-1] == got["record"]["rank_cores"]
    assert "enable_cpu_affinity" in got["record"]["loader_how"]
    assert json.loads((tmp_path / "worker.json").read_text()) == [cores[-1]]  # the worker ran on its core


def test_a_loader_without_per_worker_affinity_says_so():
    class GraphBoltLike:
        pass

    plan = gpu_affinity.Plan({"rank_cores": [0, 1], "num_workers": 2}, [0, 1])
    with plan.loader(GraphBoltLike()):
        pass
    assert "offers no per-worker affinity" in plan.record["loader_how"]
    assert gpu_affinity.Plan().loader(GraphBoltLike()) is not None  # not pinned: nothing to do


# --- the table column ------------------------------------------------------------------------

def test_gpu_util_column_shows_gpu_cells_and_is_blank_for_cpu_ones(tmp_path):
    gpu_id, cpu_id = syn.cell_id(mode="cpu-cuda", ws=2), syn.cell_id()
    util = {"util_mean_pct": 42.4, "util_max_pct": 97.0, "util_min_rank_pct": 20.0, "h2d_mb_per_s": 1234.5, "ranks": 2}
    ranks = [{"rank": 0, "gpu_util": {"util_mean_pct": 64.8, "util_max_pct": 97.0, "h2d_mb_per_s": 1500.0}},
             {"rank": 1, "gpu_util": {"util_mean_pct": 20.0, "util_max_pct": 50.0, "h2d_mb_per_s": 969.0}}]
    run = syn.write(tmp_path, "run.json", syn.run([
        syn.bench(gpu_id, [1.0, 1.1, 0.9], gpu_util=util, ranks=ranks, peak_gpu_bytes=2**30),
        syn.bench(cpu_id, [1.0, 1.1, 0.9], gpu_util=None, gpu_util_reason=gpu_sampler.CPU_ONLY)]))
    gpu, cpu = (next(c for c in run.cells if c.id == i) for i in (gpu_id, cpu_id))
    [util_col] = [c for c in columns.markdown_columns(run.cells, ["all"]) if c.header == "GPU util %"]
    assert util_col.markdown_text(gpu) == "42 % (max 97 %, least busy rank 20 %)"
    assert util_col.text(cpu) == "–" and util_col.note(cpu) is None
    assert "rank 1: mean 20 %, max 50 %, host-to-device 969 MB/s" in util_col.hint(gpu)
    [h2d_col] = [c for c in columns.markdown_columns(run.cells, ["all"]) if c.header == "h2d MB/s"]
    assert h2d_col.text(gpu) == "1,234" and h2d_col.text(cpu) == "–"
    # a run of CPU cells only: the columns are left out
    cpu_only = syn.write(tmp_path, "cpu.json", syn.run([syn.bench(cpu_id, [1.0, 1.1, 0.9])]))
    assert not any(c.header in ("GPU util %", "h2d MB/s") for c in columns.markdown_columns(cpu_only.cells, ["all"]))


def test_environment_page_shows_the_gpu_facts(tmp_path, monkeypatch):
    from bench.publish import site

    monkeypatch.setattr(gpu_facts.shutil, "which", lambda name: "/usr/bin/nvidia-smi")
    monkeypatch.setattr(gpu_facts, "run_tool", lambda args: QUERY if any(a.startswith("--query-gpu") for a in args) else TOPO)
    monkeypatch.setenv("NCCL_P2P_DISABLE", "1")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    data = syn.run([syn.bench(syn.cell_id(mode="cpu-cuda"), [1.0, 1.1, 0.9],
                              device={"cuda_available": True, "torch_cuda": "12.1", "nccl_version": "2.19.3"})])
    data["machine_info"]["gnnbench"] = {"gpu": gpu_facts.gpu_info()}
    run = syn.write(tmp_path, "gpu.json", data)
    site.build([run], tmp_path / "site")
    page = (tmp_path / "site" / "environment.html").read_text()
    assert "GPU 1: SM 345 of 1980 MHz, memory 2619 of 2619 MHz, PCIe gen 5 x16, MIG Enabled" in page
    assert "<code>NCCL_P2P_DISABLE=1</code>" in page and "CUDA_VISIBLE_DEVICES</dt><dd>unset" in page
    assert "<td>2.19.3</td>" in page  # the NCCL version the cell's torch carries


def fake_gpu_sysfs(monkeypatch, tmp_path, cpulists: dict[int, str]) -> None:
    """No NVML: the node's GPUs as nvidia-smi lists them (index, UUID, PCI bus id), their cores
    from the kernel's local_cpulist (here a folder standing in for /sys/bus/pci/devices)."""
    for index, cpulist in cpulists.items():
        folder = tmp_path / f"0000:{0x17 + index:02x}:00.0"
        folder.mkdir()
        (folder / "local_cpulist").write_text(cpulist + "\n")
    monkeypatch.setattr(gpu_affinity, "SYSFS_PCI", tmp_path)
    listing = [{"index": i, "uuid": f"GPU-{i:04d}aaaa", "pci": f"00000000:{0x17 + i:02X}:00.0"} for i in cpulists]
    monkeypatch.setattr(gpu_affinity, "_LISTING", (listing, "nvidia-smi --query-gpu"))


def test_a_gpus_cores_come_from_the_kernel_without_nvml_or_torch(monkeypatch, tmp_path):
    """torch 2.2 (the dgl stack) reports no PCI bus id: the GPU is found by its CUDA_VISIBLE_DEVICES
    entry (index or UUID) in nvidia-smi's list, its cores in the kernel's local_cpulist."""
    allowed = sorted(os.sched_getaffinity(0))
    fake_gpu_sysfs(monkeypatch, tmp_path, {0: f"{allowed[0]}-{allowed[-1]}", 1: "4096-4097"})
    cores, how = gpu_affinity.gpu_cores("0")
    assert cores == allowed and "0000:17:00.0/local_cpulist" in how and "nvidia-smi" in how
    assert gpu_affinity.gpu_cores("GPU-0000")[0] == allowed  # a UUID prefix, as CUDA takes it
    cores, why = gpu_affinity.gpu_cores("1")  # a GPU next to cores this process may not use
    assert cores is None and "may be used by this process" in why
    cores, why = gpu_affinity.gpu_cores("7")
    assert cores is None and "lists 2 GPU(s)" in why
    monkeypatch.setattr(gpu_affinity, "_LISTING", (None, nvml.NOT_INSTALLED + "; and nvidia-smi lists no GPU"))
    cores, why = gpu_affinity.gpu_cores("0")
    assert cores is None and "nvidia-ml-py" in why and "nvidia-smi" in why


def test_two_ranks_whose_gpus_share_a_socket_split_its_cores(tmp_path):
    """pin_rank in the pyg stack's interpreter (its torch sets the thread count): local rank 1 of
    two, both GPUs next to the same cores, takes the second half and is pinned to it."""
    python = stack_python("pyg")
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < 2:
        pytest.skip("needs two usable cores")
    (tmp_path / "0000:17:00.0").mkdir()
    (tmp_path / "0000:17:00.0" / "local_cpulist").write_text(",".join(map(str, allowed)))
    (tmp_path / "0000:18:00.0").mkdir()
    (tmp_path / "0000:18:00.0" / "local_cpulist").write_text(",".join(map(str, allowed)))
    code = f"""
import json, os, pathlib, torch
from bench.machine import gpu_affinity
gpu_affinity.SYSFS_PCI = pathlib.Path({str(tmp_path)!r})
gpu_affinity._LISTING = ([{{"index": 0, "uuid": "GPU-a", "pci": "0000:17:00.0"}},
                          {{"index": 1, "uuid": "GPU-b", "pci": "0000:18:00.0"}}], "nvidia-smi --query-gpu")
plan = gpu_affinity.pin_rank(torch.device("cuda", 0), ["0", "1"], 1, 0)
print(json.dumps({{"record": plan.record, "now": sorted(os.sched_getaffinity(0)), "threads": torch.get_num_threads()}}))
"""
    out = subprocess.run([python, "-c", code], cwd=REPO, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=120)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.splitlines()[-1])
    half = allowed[len(allowed) // 2:len(allowed) // 2 * 2]
    assert got["record"]["rank_cores"] == half == got["now"] and got["record"]["shared_with_local_ranks"] == [0, 1]
    assert got["record"]["gpu_cores"] == allowed and got["threads"] <= len(half)

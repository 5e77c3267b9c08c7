"""Time per stage and work per batch (bench/backends/stages.py): the clock's accounting on its own,
the `profile` setting, and real tiny runs of every backend through `pytest suites/`, whose stages
must add up to their epochs and whose work counts must agree with what the cell was asked to do."""

from __future__ import annotations

import json
import threading
import time

import pytest

from bench.backends import stages
from bench.machine.load import HIGH_LOAD
from bench.run import suite
from tests.conftest import require_stacks, run_suite_text

TINY = "rmat-s9"
FEATURE_DIM = 16
FANOUT = [5, 5]
SUITE = f"""
name: stages
datasets:
  {TINY}:
    source: synthetic
    params: {{scale: 9, edge_factor: 8, feature_dim: {FEATURE_DIM}, num_classes: 4}}
  mol:
    source: molecules
    params: {{count: 300, min_nodes: 8, max_nodes: 20, feature_dim: {FEATURE_DIM}, num_classes: 4, seed: 3}}
backends: [pyg-neighbor, dgl-graphbolt, pyg-graphs]
settings:
  num_workers: 0
  store: [memory, lmdb]
  mode: cpu-cpu
  batch_size: 64
  fanout: {FANOUT}
  epochs: 2
  warmup_epochs: 1
  timeout: 240
  work_budget: 1  # count every batch: the checks below are exact
exclude:
  - {{backend: [dgl-graphbolt, pyg-graphs], store: lmdb}}
include:
  - {{backend: [pyg-neighbor, dgl-graphbolt], dataset: {TINY}, store: memory, num_workers: 2}}
  - {{backend: pyg-neighbor, dataset: {TINY}, store: memory, profile: false}}
  - {{backend: pyg-neighbor, dataset: {TINY}, store: memory, trim_to_layer: true}}
  - {{backend: dgl-graphbolt, dataset: {TINY}, store: memory, threads: 1}}
"""


def cell(backend: str, workers: int = 0, store: str = "memory", dataset: str = TINY, profile: bool = True,
         trim: bool = False) -> str:
    return (f"{backend}/{dataset}/mode=cpu-cpu/workers={workers}/ws=1/store={store}"
            + ("" if profile else "/profile=off") + ("/trim_to_layer=True" if trim else ""))


PROFILED = [cell("pyg-neighbor"), cell("pyg-neighbor", store="lmdb"), cell("pyg-neighbor", workers=2),
            cell("dgl-graphbolt"), cell("dgl-graphbolt", workers=2), cell("pyg-graphs", dataset="mol")]


# --- the clock alone (no framework) -------------------------------------------------------------

class Batch:
    """Anything a loader yields: stamps are attributes on it."""


def test_own_thread_loader_seconds_are_stages_and_the_rest_of_next_is_wait():
    clock = stages.EpochClock()
    batch = stages.stamp(stages.stamp(Batch(), "sample", 0.25), "fetch", 0.5)
    clock.loaded(1.0, batch)
    split = clock.split(1.0, allreduce_seconds=0.0)
    assert split["sample"] == 0.25 and split["fetch"] == 0.5
    assert split["wait"] == pytest.approx(0.25)
    assert clock.worker_seconds() is None
    assert not hasattr(batch, stages.STAMP)  # taken off: the model never sees it


def test_loader_seconds_from_another_thread_overlap_and_all_of_next_is_wait():
    batch = Batch()
    worker = threading.Thread(target=lambda: stages.stamp(batch, "sample", 0.25))
    worker.start()
    worker.join()
    clock = stages.EpochClock()
    clock.loaded(0.125, batch)
    split = clock.split(0.125, allreduce_seconds=0.0)
    assert split["sample"] == 0.0 and split["wait"] == 0.125
    assert clock.worker_seconds() == {"sample": 0.25, "fetch": 0.0}


def test_timed_carries_an_earlier_stamp_to_the_new_object():
    sampled = stages.stamp(Batch(), "sample", 0.5)
    made = stages.timed(lambda out: Batch(), "fetch")(sampled)
    assert [entry[0] for entry in stages.take_stamp(made)] == ["sample", "fetch"]


def test_split_adds_up_and_takes_allreduce_out_of_forward_backward():
    clock = stages.EpochClock()
    clock.seconds.update(sample=1.0, forward_backward=3.0, optimizer=0.5, wait=0.5)
    split = clock.split(6.0, allreduce_seconds=1.0)
    assert split["forward_backward"] == 2.0 and split["allreduce"] == 1.0 and split["other"] == 1.0
    assert sum(split.values()) == pytest.approx(6.0) and set(split) == set(stages.STAGES)


def test_work_sums_hops_of_any_depth():
    clock = stages.EpochClock(work_budget=1.0)
    for counts in (([4, 10], [12], 14, 14 * 64), ([4, 8, 3], [9, 6], 15, 15 * 64)):
        clock.count(lambda batch, counts=counts: stages.BatchWork(*counts), Batch())
    assert clock.work.as_dict() == {"batches": 2, "counted": 2, "hop_nodes": [8, 18, 3], "hop_edges": [21, 6],
                                    "layer_nodes": [], "layer_edges": [], "input_nodes": 29,
                                    "feature_bytes": 29 * 64, "copy_bytes": 0,
                                    "full": {"counted": 0, "hop_nodes": [], "hop_edges": [], "layer_nodes": [],
                                             "layer_edges": []}}


# Two full batches of 4 seeds and a rank's partial last batch of 1 seed, whose one seed shares its
# neighbours with no other: more nodes per seed, with the same sampling
FULL = stages.BatchWork([4, 10, 20], [30, 60], 34, 34 * 64, [14, 4], [90, 30])
PARTIAL = stages.BatchWork([1, 5, 9], [8, 20], 15, 15 * 64, [6, 1], [28, 8])


def test_work_keeps_layers_and_full_batches_apart():
    clock = stages.EpochClock(work_budget=1.0, batch_size=4)
    for counts in (FULL, FULL, PARTIAL):
        clock.count(lambda batch, counts=counts: counts, Batch())
    work = clock.work.as_dict()
    assert work["layer_nodes"] == [34, 9] and work["layer_edges"] == [208, 68]
    assert work["full"] == {"counted": 2, "hop_nodes": [8, 20, 40], "hop_edges": [60, 120], "layer_nodes": [28, 8],
                            "layer_edges": [180, 60]}


def test_work_per_seed_is_over_the_full_batches_of_every_rank_and_epoch():
    from bench.run.record import profile_info
    from bench.run.worker import sum_work

    def epoch(*batches):
        clock = stages.EpochClock(work_budget=1.0, batch_size=4)
        for counts in batches:
            clock.count(lambda batch, counts=counts: counts, Batch())
        return clock.work.as_dict()

    ranks = sum_work([epoch(FULL, PARTIAL), epoch(FULL, PARTIAL)])  # two ranks, each with its partial batch
    assert ranks["full"]["counted"] == 2 and ranks["layer_nodes"] == [40, 10]
    record = {"stages": dict.fromkeys(stages.STAGES, 0.1), "loader_worker_s": None, "work": ranks}
    work = profile_info([record, record], profile=True)["work"]
    assert work["per_seed"] == {"over": "full", "counted": 2.0, "hop_nodes": [1.0, 2.5, 5.0], "hop_edges": [7.5, 15.0],
                                "layer_nodes": [3.5, 1.0], "layer_edges": [22.5, 7.5]}
    assert work["layer_nodes"] == [10.0, 2.5]  # means per counted batch, partial ones included
    only_partial = {**record, "work": epoch(PARTIAL)}
    assert profile_info([only_partial], profile=True)["work"]["per_seed"]["over"] == "all"


def test_pyg_layers_run_on_the_whole_subgraph_unless_trimmed():
    layer_work = stages.layer_work
    assert layer_work([4, 10, 20], [30, 60], trimmed=False) == ([34, 34], [90, 90])
    # trim_to_layer: layer 2 needs the seeds and hop 1's nodes, over hop 1's edges
    assert layer_work([4, 10, 20], [30, 60], trimmed=True) == ([34, 14], [90, 30])
    assert layer_work([4, 10, 20, 40], [30, 60, 120], trimmed=True) == ([74, 34, 14], [210, 90, 30])


def test_work_counting_stays_within_its_budget():
    """Counting that takes longer than the budget's share of the epoch so far skips batches (the
    first is always counted); a budget of 1 counts every batch, however dear."""
    def dear(batch):
        time.sleep(0.02)
        return stages.BatchWork([1, 2], [3], 3, 12)

    sampled = stages.EpochClock(work_budget=0.005)
    for _ in range(5):  # 20 ms of counting would need 4 s of epoch at 0.5 %
        sampled.count(dear, Batch())
    assert sampled.work.as_dict()["batches"] == 5 and sampled.work.as_dict()["counted"] == 1
    every = stages.EpochClock(work_budget=1.0)
    for _ in range(3):
        every.count(dear, Batch())
    assert every.work.as_dict()["counted"] == 3


def test_recorded_work_is_a_mean_over_the_batches_counted():
    from bench.run.record import profile_info

    epoch = {"stages": dict.fromkeys(stages.STAGES, 0.1), "loader_worker_s": None,
             "work": {"batches": 10, "counted": 2, "hop_nodes": [8, 30], "hop_edges": [40], "input_nodes": 38,
                      "feature_bytes": 38 * 64, "copy_bytes": 10 * 100}}
    work = profile_info([epoch, epoch], profile=True)["work"]
    assert work["hop_nodes"] == [4, 15] and work["input_nodes"] == 19 and work["feature_bytes"] == 19 * 64
    assert work["copy_bytes"] == 100  # measured on every batch
    assert work["batches"] == 10 and work["counted"] == 2


# --- the setting --------------------------------------------------------------------------------

def test_profile_is_on_by_default_and_off_shows_in_the_cell_id(write_suite):
    base = f"""
name: p
datasets: {{{TINY}: {{source: synthetic, params: {{scale: 9}}}}}}
backends: [pyg-neighbor]
"""
    on, _ = suite.load(write_suite(base))
    [only] = suite.expand(on)
    assert only.settings.profile is True and "profile" not in only.id
    swept, _ = suite.load(write_suite(base + "settings: {profile: [true, false]}\n", "swept.yaml"))
    assert [c.id for c in suite.expand(swept)] == [only.id, only.id + "/profile=off"]
    with pytest.raises(suite.SuiteError, match=r"settings\.profile"):
        suite.load(write_suite(base + "settings: {profile: sometimes}\n", "bad.yaml"))


# --- real runs ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def run(tmp_path_factory, cache_dir) -> dict[str, dict]:
    require_stacks("pyg", "dgl")
    proc, out = run_suite_text(SUITE, tmp_path_factory.mktemp("stages"), cache_dir)
    assert proc.returncode == 0, proc.stdout[-3000:]
    document = json.loads(out.read_text())
    assert document["unmeasured"] == []
    cells = Cells({b["extra_info"]["cell_id"]: b for b in document["benchmarks"]})
    cells.path = out
    return cells


class Cells(dict):
    """The run's benchmarks by cell id, and its result file (`path`)."""
    path = None


@pytest.mark.parametrize("cell_id", PROFILED)
def test_stages_add_up_to_the_epoch(run, cell_id):
    bench = run[cell_id]
    info, epoch = bench["extra_info"], bench["stats"]["mean"]
    assert info["profile"] is True and set(info["stages"]) == set(stages.STAGES)
    assert all(seconds >= 0 for seconds in info["stages"].values()), info["stages"]
    assert sum(info["stages"].values()) == pytest.approx(epoch, rel=0.05)
    # the remainder is bookkeeping: a stage left unmeasured would show up here. With DataLoader
    # workers on these 2 cores the training thread is also preempted between its clocks (3
    # processes on 2 cores: 16 % of a 0.07 s epoch seen once), so a looser bound there.
    bound = 0.15 if info["settings"]["num_workers"] == 0 else 0.30
    # On a machine other work keeps busy (the cell records it: other_load, "times suspect" from
    # HIGH_LOAD on) the training thread is preempted anywhere, between clocks too, so the
    # remainder says nothing there (41 % seen under a CPU burner per core): the bound holds where
    # the cell's own load record says its times are sound.
    if (info.get("other_load") or 0.0) < HIGH_LOAD:
        assert info["stages"]["other"] <= bound * epoch, (info["stages"], info.get("other_load"))
    assert info["stages"]["forward_backward"] > 0 and info["stages"]["optimizer"] > 0
    assert info["stages"]["allreduce"] == 0 and info["stages"]["copy"] >= 0  # one rank, on the CPU


def test_loader_stages_are_counted_where_they_ran(run):
    inline = run[cell("pyg-neighbor")]["extra_info"]
    assert inline["stages"]["sample"] > 0 and inline["stages"]["fetch"] > 0
    assert inline["loader_worker_s"] is None
    lmdb = run[cell("pyg-neighbor", store="lmdb")]["extra_info"]
    assert lmdb["stages"]["fetch"] > 0 and lmdb["loader_worker_s"] is None
    for workers in (cell("pyg-neighbor", workers=2), cell("dgl-graphbolt", workers=2)):
        info = run[workers]["extra_info"]
        assert info["stages"]["sample"] == 0 and info["loader_worker_s"]["sample"] > 0, workers
    assert run[cell("pyg-neighbor", workers=2)]["extra_info"]["loader_worker_s"]["fetch"] > 0
    # without workers GraphBolt samples and fetches in its prefetch thread (copy_to's): overlapped
    graphbolt = run[cell("dgl-graphbolt")]["extra_info"]
    assert graphbolt["stages"]["sample"] == 0 and graphbolt["stages"]["fetch"] == 0
    assert graphbolt["loader_worker_s"]["sample"] > 0 and graphbolt["loader_worker_s"]["fetch"] > 0
    graphs = run[cell("pyg-graphs", dataset="mol")]["extra_info"]
    assert graphs["stages"]["sample"] == 0 and graphs["stages"]["fetch"] > 0


@pytest.mark.parametrize("cell_id", [c for c in PROFILED if "pyg-graphs" not in c])
def test_work_per_batch_is_consistent(run, cell_id):
    info = run[cell_id]["extra_info"]
    work = info["work"]
    assert len(work["hop_nodes"]) == len(FANOUT) + 1 and len(work["hop_edges"]) == len(FANOUT)
    assert all(n > 0 for n in work["hop_nodes"] + work["hop_edges"]), work
    assert work["batches"] == info["batches_per_epoch"]
    # hop 0 is the seeds: every training node once per epoch
    assert work["hop_nodes"][0] * work["batches"] == pytest.approx(info["dataset"]["num_train"])
    assert sum(work["hop_nodes"]) == pytest.approx(work["input_nodes"])  # each node at its first hop
    assert work["feature_bytes"] == pytest.approx(work["input_nodes"] * FEATURE_DIM * 4)
    assert work["copy_bytes"] == 0  # nothing goes to a device on the CPU
    assert work["hop_edges"][0] <= FANOUT[0] * work["hop_nodes"][0]


def test_both_frameworks_count_the_same_first_hop(run):
    """The seeds and their sampled in-edges are the same set in both (every training node, up to
    5 of its neighbours without replacement), so the first hop's counts must agree exactly."""
    pyg, graphbolt = (run[cell(b)]["extra_info"]["work"] for b in ("pyg-neighbor", "dgl-graphbolt"))
    assert pyg["hop_nodes"][0] * pyg["batches"] == pytest.approx(graphbolt["hop_nodes"][0] * graphbolt["batches"])
    assert pyg["hop_edges"][0] * pyg["batches"] == pytest.approx(graphbolt["hop_edges"][0] * graphbolt["batches"])


def test_layers_and_work_per_seed(run):
    """What each layer computes over: PyG's whole subgraph in every layer, or with trim_to_layer the
    hops the layer still needs; GraphBolt's blocks, whose last layer computes the seeds alone. Per
    seed over full batches (64 seeds): this graph's last batch is partial."""
    pyg, trimmed, graphbolt = (run[c]["extra_info"]["work"]
                               for c in (cell("pyg-neighbor"), cell("pyg-neighbor", trim=True), cell("dgl-graphbolt")))
    assert pyg["layer_nodes"] == [pytest.approx(pyg["input_nodes"])] * 2
    assert pyg["layer_edges"] == [pytest.approx(sum(pyg["hop_edges"]))] * 2
    hops = trimmed["hop_nodes"]
    assert trimmed["layer_nodes"] == [pytest.approx(sum(hops)), pytest.approx(hops[0] + hops[1])]
    assert trimmed["layer_edges"] == [pytest.approx(sum(trimmed["hop_edges"])), pytest.approx(trimmed["hop_edges"][0])]
    assert graphbolt["layer_nodes"][1] == pytest.approx(graphbolt["hop_nodes"][0])  # the seeds
    assert graphbolt["layer_edges"] == [pytest.approx(e) for e in reversed(graphbolt["hop_edges"])]
    for work in (pyg, trimmed, graphbolt):
        per_seed = work["per_seed"]
        assert per_seed["over"] == "full" and 0 < per_seed["counted"] < work["batches"]
        assert per_seed["hop_nodes"][0] == 1.0 and len(per_seed["layer_nodes"]) == len(FANOUT)
    assert trimmed["per_seed"]["layer_nodes"][1] < pyg["per_seed"]["layer_nodes"][1]
    info = run[cell("pyg-neighbor", trim=True)]["extra_info"]
    assert info["seeds_per_epoch"] == info["dataset"]["num_train"] and info["settings"]["trim_to_layer"] is True


def test_graph_batches_count_whole_graphs(run):
    work = run[cell("pyg-graphs", dataset="mol")]["extra_info"]["work"]
    assert work["hop_nodes"][0] == pytest.approx(work["input_nodes"]) and work["hop_edges"][0] > 0
    assert work["feature_bytes"] == pytest.approx(work["input_nodes"] * FEATURE_DIM * 4)


def test_profile_off_records_no_stages(run):
    info = run[cell("pyg-neighbor", profile=False)]["extra_info"]
    assert info["profile"] is False and info["stages"] is None and info["work"] is None
    assert info["loader_worker_s"] is None and info["seeds_per_s"] > 0


def test_graphbolt_on_the_cpu_waits_on_its_prefetch_thread_and_copies_nothing(run):
    """copy_to(cpu) moves nothing: the training thread's time in next() is waiting on gb.DataLoader's
    prefetch thread, shown as `wait`, apart from a copy stage that stays 0 on the CPU."""
    for cell_id in (cell("dgl-graphbolt"), cell("dgl-graphbolt", workers=2)):
        split = run[cell_id]["extra_info"]["stages"]
        assert split["copy"] == 0 and split["wait"] > 0, split


@pytest.mark.parametrize("cell_id", [c for c in PROFILED if "pyg-graphs" not in c])
def test_cells_record_threads_index_dtype_and_both_test_accuracies(run, cell_id):
    info = run[cell_id]["extra_info"]
    budget = info["device"]["core_budget"]
    assert info["device"]["num_threads"] == budget["threads"] >= 1 and budget["threads_rule"] == "auto"
    assert budget["ranks"] == 1 and budget["workers"] == info["settings"]["num_workers"]
    graphbolt = cell_id.startswith("dgl-graphbolt")
    expected = "int32" if graphbolt else "int64"  # GraphBolt as its OnDiskDataset builds small graphs
    assert info["graph_index_dtype"] == {"indices": expected, "indptr": expected}
    # sampled with the training fanouts, and with full neighbourhoods layer by layer: both recorded
    assert 0 <= info["test_acc"] <= 1 and 0 <= info["test_acc_full"] <= 1


def test_a_threads_setting_is_the_count_the_cell_ran_with(run):
    info = run[f"{cell('dgl-graphbolt')}/threads=1"]["extra_info"]
    assert info["device"]["num_threads"] == 1 and info["device"]["core_budget"]["threads_rule"] == "set"


def test_the_report_labels_both_test_accuracies_and_the_threads(run):
    from bench.publish import columns, results

    cells = [c for c in results.read(run.path).cells if c.measured]
    headers = [c.header for c in columns.markdown_columns(cells, ["all"])]
    assert "test acc" in headers and "test acc, full neighbourhoods" in headers and "threads" in headers

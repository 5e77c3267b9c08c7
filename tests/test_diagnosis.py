"""Each cell against its ceiling (bench/publish/stages.py) and the diagnosis of slower
configurations (bench/publish/diagnosis.py), on synthetic result files built per the stage
contract (tests/synthetic_results.py): every rule fires on the numbers that call for it and stays
silent on the numbers just short of its threshold."""

from __future__ import annotations

import pytest

from bench.backends.stages import split_line
from bench.publish import diagnosis, stages
from tests import synthetic_results as sr


def read(tmp_path, benchmarks, ceilings=sr.CEILINGS):
    return sr.write(tmp_path, "run.json", sr.run(benchmarks, ceilings=ceilings))


def one(tmp_path, epoch_s=1.0, ws=1, workers=0, **extra):
    cid = sr.cell_id(ws=ws, workers=workers)
    return read(tmp_path, [sr.bench(cid, [epoch_s] * 5, **extra)]).cells[0]


# --- stages against ceilings ------------------------------------------------------------------

def test_binding_stage_and_fetch_against_the_gather_ceiling(tmp_path):
    info = sr.stage_info(1.0, {"sample": 0.1, "fetch": 0.6, "forward_backward": 0.25, "optimizer": 0.05})
    fetched_per_s = info["work"]["feature_bytes"] * info["work"]["batches"] / 0.6
    ceilings = sr.CEILINGS | {"gather_bytes_per_s": {"64": fetched_per_s / 0.38, "4096": 1.0}}
    cell = read(tmp_path, [sr.bench(sr.cell_id(), [1.0] * 5, **info)], ceilings).cells[0]
    assert stages.binding(cell) == ("fetch", pytest.approx(0.6))
    rate, fraction = stages.fetch_rate(cell)
    assert rate == pytest.approx(fetched_per_s) and fraction == pytest.approx(0.38)
    assert stages.headline(cell) == "fetch 60 % of the epoch at 38 % of this machine's gather bandwidth"
    assert stages.binding_text(cell) == "fetch 60 %"
    assert stages.total(cell) == pytest.approx(cell.stats.mean)
    assert sum(stages.shares(cell).values()) == pytest.approx(1.0)


def test_fetch_rates_are_per_rank(tmp_path):
    # 2 ranks ran 20 batches together; the slowest rank fetched its 10 in 0.5 s
    info = sr.stage_info(1.0, {"fetch": 0.5, "forward_backward": 0.5}, batches=20)
    cell = one(tmp_path, ws=2, **info)
    assert stages.batches_per_rank(cell) == 10
    assert stages.fetch_rate(cell)[0] == pytest.approx(info["work"]["feature_bytes"] * 10 / 0.5)


def test_copy_against_the_host_to_device_ceiling(tmp_path):
    info = sr.stage_info(1.0, {"copy": 0.5, "forward_backward": 0.5}, copy_bytes=1e6, batches=10)
    ceilings = sr.CEILINGS | {"h2d_pinned_bytes_per_s": 4e7, "h2d_pageable_bytes_per_s": 1e8}
    cell = read(tmp_path, [sr.bench(sr.cell_id(mode="pinned-cuda"), [1.0] * 5, **info)], ceilings).cells[0]
    assert stages.copy_rate(cell) == (pytest.approx(2e7), pytest.approx(0.5))  # 10 MB in 0.5 s against pinned 40 MB/s
    assert "50 % of this machine's pinned host-to-device bandwidth" in stages.headline(cell)


def test_fetch_in_loader_workers_is_not_held_against_the_ceiling(tmp_path):
    info = sr.stage_info(1.0, {"wait": 0.7, "forward_backward": 0.3},
                         loader_worker_s={"sample": 0.4, "fetch": 0.5})
    cell = one(tmp_path, workers=2, **info)
    assert stages.fetch_rate(cell) is None
    assert stages.headline(cell) == "wait 70 % of the epoch"


def test_older_files_have_no_stages(tmp_path):
    cell = one(tmp_path)
    assert stages.shares(cell) is None and stages.binding(cell) is None and stages.headline(cell) is None
    assert stages.fetch_rate(cell) is None and stages.nodes_per_batch(cell) is None
    assert cell.work_flag is None


def worked(backend: str, hop_nodes, hop_edges, *, ws: int = 1, per_seed: dict | None = None,
           seeds_per_epoch: float | None = None, layers: tuple | None = None) -> dict:
    """A measured cell whose work is given: means per batch (`hop_nodes`, `hop_edges`), and as a
    file written since the per-seed figures were recorded, `per_seed` (over full batches) and
    `layers` (nodes, edges per layer, per batch)."""
    info = sr.stage_info(1.0, input_nodes=float(sum(hop_nodes)), hop_nodes=list(hop_nodes))
    info["work"]["hop_edges"] = list(hop_edges)
    if layers is not None:
        info["work"]["layer_nodes"], info["work"]["layer_edges"] = (list(v) for v in layers)
    if per_seed is not None:
        info["work"]["per_seed"] = {"over": "full", "counted": 2.0, **per_seed}
    cell = sr.bench(sr.cell_id(backend, ws=ws), [1.0] * 5, **info, seeds_per_epoch=seeds_per_epoch)
    if seeds_per_epoch is None:  # a file written before it
        del cell["extra_info"]["seeds_per_epoch"]
    return cell


def by_backend(cells) -> dict:
    return {c.backend: c for c in cells}


# rmat-s16-like figures per seed at fanout [10, 5], batch 512: GraphBolt samples hop 2 for the seeds
# again (18 % more edges there); PyG runs both layers over the whole subgraph
PYG_PER_SEED = {"hop_nodes": [1.0, 4.4, 12.6], "hop_edges": [5.2, 21.2], "layer_nodes": [18.0, 18.0],
                "layer_edges": [26.4, 26.4]}
GRAPHBOLT_PER_SEED = {"hop_nodes": [1.0, 4.4, 13.0], "hop_edges": [5.2, 25.0], "layer_nodes": [5.4, 1.0],
                      "layer_edges": [25.0, 5.2]}


def per_batch(per_seed: dict, seeds: float = 512.0):
    return [v * seeds for v in per_seed["hop_nodes"]], [v * seeds for v in per_seed["hop_edges"]]


def test_equal_work_names_graphbolts_extra_second_hop_edges_and_pygs_untrimmed_layers(tmp_path):
    cells = by_backend(read(tmp_path, [
        worked("pyg-neighbor", *per_batch(PYG_PER_SEED), per_seed=PYG_PER_SEED),
        worked("dgl-graphbolt", *per_batch(GRAPHBOLT_PER_SEED), per_seed=GRAPHBOLT_PER_SEED)]).cells)
    graphbolt, pyg = cells["dgl-graphbolt"].work_flag, cells["pyg-neighbor"].work_flag
    assert graphbolt.startswith(f"hop 2: 25.0 edges per seed against 21.2 in {sr.cell_id()} (+18 %): GraphBolt samples")
    assert "hop 2: 13.0 nodes" not in graphbolt  # 3 %: within the tolerance
    assert f"layer 1: 18.0 nodes per seed against 5.40 in {sr.cell_id('dgl-graphbolt')} (+233 %): PyG's layers compute" in pyg
    assert f"layer 2: 18.0 nodes per seed against 1.00 in {sr.cell_id('dgl-graphbolt')} (+1700 %)" in pyg
    assert "layer 2: 26.4 edges per seed against 5.20" in pyg
    assert "layer 1: 26.4 edges" not in pyg  # 6 % more than GraphBolt's 25.0: the same work
    assert "GraphBolt samples" not in pyg  # a cause is named where its framework's figure is the larger
    assert pyg.count("PyG's layers compute") == 1  # once


def test_partial_batches_do_not_flag_unequal_work_but_fewer_seeds(tmp_path):
    """Cora (140 training seeds) at 2 ranks, batch 32: PyG's ranks take 70 seeds each, in batches of
    32, 32 and 6; GraphBolt's DistributedItemSampler keeps 2 full batches a rank and drops the rest.
    Nodes per batch differ by a third (273 against 367), the work per seed does not."""
    per_seed = {"hop_nodes": [1.0, 3.75, 6.7], "hop_edges": [4.04, 14.9], "layer_nodes": [4.75, 1.0],
                "layer_edges": [14.9, 4.04]}
    cells = by_backend(read(tmp_path, [
        worked("pyg-neighbor", [23.3, 87.8, 161.5], [94.2, 347.2], ws=2, per_seed=per_seed, seeds_per_epoch=140.0),
        worked("dgl-graphbolt", [32.0, 119.9, 214.1], [130.5, 480.0], ws=2, per_seed=per_seed,
               seeds_per_epoch=128.0)]).cells)
    assert all(c.work_flag is None for c in cells.values())
    assert cells["pyg-neighbor"].seeds_flag is None
    assert cells["dgl-graphbolt"].seeds_flag == f"12 fewer seeds per epoch (128 against 140 in {sr.cell_id(ws=2)})"


def test_files_before_the_per_seed_figures_compare_per_seed_where_batches_hold_as_many_seeds(tmp_path):
    """A file written before the per-seed figures: derived from the means per batch, compared only
    between cells whose batches held about as many seeds (a partial batch's seeds share fewer
    neighbours); the seeds per epoch from seeds/s times the mean epoch."""
    partial = read(tmp_path, [worked("pyg-neighbor", [23.3, 87.8, 161.5], [94.2, 347.2], ws=2),
                              worked("dgl-graphbolt", [32.0, 119.9, 214.1], [130.5, 580.0], ws=2)]).cells
    assert all(c.work_flag is None for c in partial)  # the old check said 273 against 367 nodes per batch
    full = by_backend(read(tmp_path, [worked("pyg-neighbor", [28.0, 105.8, 195.6], [113.0, 417.9]),
                                      worked("dgl-graphbolt", [28.0, 105.5, 198.7], [113.0, 512.1])]).cells)
    assert full["dgl-graphbolt"].work_flag.startswith("hop 2: 18.3 edges per seed against 14.9")
    assert stages.seeds_per_epoch(full["pyg-neighbor"]) == 1000  # 1,000 seeds/s x 1 s epochs


@pytest.mark.parametrize("recorded", [True, False])
def test_a_directed_against_an_undirected_sampling_is_flagged(tmp_path, recorded):
    """The same graph sampled along its edges one way, and both ways (twice the neighbours): the
    work per seed differs at every hop, in a file written before the per-seed figures too."""
    directed = {"hop_nodes": [1.0, 3.1, 8.0], "hop_edges": [3.4, 11.0]}
    undirected = {"hop_nodes": [1.0, 6.0, 22.0], "hop_edges": [6.5, 29.0]}
    cells = by_backend(read(tmp_path, [
        worked("pyg-neighbor", *per_batch(directed, 64), per_seed=directed if recorded else None),
        worked("dgl-graphbolt", *per_batch(undirected, 64), per_seed=undirected if recorded else None)]).cells)
    flag = cells["pyg-neighbor"].work_flag
    assert flag.startswith(f"hop 1: 3.10 nodes per seed against 6.00 in {sr.cell_id('dgl-graphbolt')} (−48 %)")
    assert "hop 1: 3.40 edges per seed against 6.50" in flag and "hop 2: 11.0 edges per seed against 29.0" in flag
    assert cells["dgl-graphbolt"].work_flag.startswith("hop 1: 6.00 nodes per seed against 3.10")


def test_work_per_seed_within_the_tolerance_is_equal(tmp_path):
    near = {k: [v * 1.09 for v in vals] for k, vals in PYG_PER_SEED.items()}
    near["hop_nodes"][0] = 1.0
    cells = read(tmp_path, [worked("pyg-neighbor", *per_batch(PYG_PER_SEED), per_seed=PYG_PER_SEED),
                            worked("dgl-graphbolt", *per_batch(near), per_seed=near)]).cells
    assert all(c.work_flag is None for c in cells)


def test_cells_without_hops_fall_back_to_nodes_per_batch(tmp_path):
    a = sr.bench(sr.cell_id("pyg-neighbor"), [1.0] * 5, **sr.stage_info(1.0, input_nodes=2000.0))
    b = sr.bench(sr.cell_id("dgl-graphbolt"), [1.0] * 5, **sr.stage_info(1.0, input_nodes=2300.0))
    for cell in (a, b):
        cell["extra_info"]["work"]["hop_nodes"] = cell["extra_info"]["work"]["hop_edges"] = []
    cells = read(tmp_path, [a, b]).cells
    assert cells[0].work_flag == f"2,000 nodes per batch against 2,300 in {sr.cell_id('dgl-graphbolt')}"


def test_other_batch_sizes_are_not_compared_for_work(tmp_path):
    a = sr.bench(sr.cell_id("pyg-neighbor"), [1.0] * 5, **sr.stage_info(1.0, input_nodes=2000.0))
    b = sr.bench(sr.cell_id("dgl-graphbolt"), [1.0] * 5, **sr.stage_info(1.0, input_nodes=4000.0))
    b["extra_info"]["settings"]["batch_size"] = 128
    assert all(c.work_flag is None for c in read(tmp_path, [a, b]).cells)


def test_other_world_sizes_are_not_compared_for_work(tmp_path):
    """More ranks, more partial batches (each rank's share of the seeds): not a sampling difference."""
    a = sr.bench(sr.cell_id("pyg-neighbor"), [1.0] * 5, **sr.stage_info(1.0, input_nodes=2000.0))
    b = sr.bench(sr.cell_id("pyg-neighbor", ws=4), [1.0] * 5, **sr.stage_info(1.0, input_nodes=1500.0))
    assert all(c.work_flag is None for c in read(tmp_path, [a, b]).cells)


# --- the diagnosis -------------------------------------------------------------------------------

def pair(tmp_path, axis="world_size", base=None, slow=None, base_s=1.0, slow_s=1.5, ceilings=sr.CEILINGS):
    """A configuration and the same one with more ranks (or workers), slower: the Slower pair."""
    more = {"ws": 4} if axis == "world_size" else {"workers": 2}
    cells = [sr.bench(sr.cell_id(), [base_s] * 5, **(base or {})),
             sr.bench(sr.cell_id(**more), [slow_s] * 5, **(slow or {}))]
    found = diagnosis.slower_pairs(read(tmp_path, cells, ceilings).cells)
    assert len(found) == 1
    return found[0]


def test_only_slower_configurations_are_diagnosed(tmp_path):
    cells = [sr.bench(sr.cell_id(), [1.0] * 5), sr.bench(sr.cell_id(ws=2), [0.6] * 5),
             sr.bench(sr.cell_id(ws=4), [0.8] * 5), sr.bench(sr.cell_id(workers=2), [1.2] * 5)]
    found = diagnosis.diagnose(read(tmp_path, cells).cells)
    # ws=4 is held against the fastest with fewer ranks (ws=2), workers=2 against workers=0
    assert {(d.slower.cell.id, d.slower.base.id) for d in found} == {
        (sr.cell_id(ws=4), sr.cell_id(ws=2)), (sr.cell_id(workers=2), sr.cell_id())}
    line = next(d.line for d in found if d.slower.axis == "world_size")
    assert line.startswith(f"{sr.cell_id(ws=4)} is 1.33× slower per epoch with 4 ranks than with 2 ranks")
    assert "CPU oversubscribed" in line  # 4 processes on the 2 cores of CEILINGS


def test_oversubscription(tmp_path):
    assert diagnosis.oversubscription(pair(tmp_path, "num_workers")) == (
        "1 rank × (1 thread + 2 workers) = 3 of 2 cores: CPU oversubscribed")
    many = sr.CEILINGS | {"usable_cores": 16}
    assert diagnosis.oversubscription(pair(tmp_path, "num_workers", ceilings=many)) is None


def test_oversubscription_reads_the_machine_cores_in_older_files(tmp_path):
    cores_only = {"usable_cores": None, "notes": []}
    assert "of 2 cores" in diagnosis.oversubscription(pair(tmp_path, ceilings=cores_only))


def test_startup_share(tmp_path):
    # 5 epochs of 1.5 s after 10 s of start-up (1 s with 1 rank): 57 % of the run
    s = pair(tmp_path, base={"startup_s": 1.0}, slow={"startup_s": 10.0})
    assert diagnosis.startup_share(s) == "start-up is 57 % of a 5-epoch run (10.0 s, against 1.0 s with 1 rank)"
    assert diagnosis.startup_share(pair(tmp_path, base={"startup_s": 1.0}, slow={"startup_s": 7.0})) is None  # 48 %
    assert diagnosis.startup_share(pair(tmp_path, base={"startup_s": 12.0}, slow={"startup_s": 10.0})) is None


def test_allreduce_share_from_stages_and_from_comm_s(tmp_path):
    staged = sr.stage_info(1.5, {"forward_backward": 0.5, "allreduce": 0.3, "sample": 0.2})
    assert diagnosis.allreduce_share(pair(tmp_path, slow=staged)) == "all-reduce is 30 % of the epoch (0.450 s)"
    assert diagnosis.allreduce_share(pair(tmp_path, slow={"comm_s": 0.6})) == "all-reduce is 40 % of the epoch (0.600 s)"
    assert diagnosis.allreduce_share(pair(tmp_path, slow={"comm_s": 0.3})) is None  # 20 %


def test_few_batches(tmp_path):
    assert diagnosis.few_batches(pair(tmp_path, slow={"batches_per_epoch": 3})) == (
        "each rank runs 3 batches: too few to amortise the per-epoch costs (loader start, DDP synchronisation)")
    assert diagnosis.few_batches(pair(tmp_path, slow=sr.stage_info(1.5, batches=4))).startswith("each rank runs 1 batch:")  # 4 over 4 ranks
    assert diagnosis.few_batches(pair(tmp_path, slow={"batches_per_epoch": 20})) is None


def test_loader_wait(tmp_path):
    s = pair(tmp_path, "num_workers", base={"loader_stall": 0.1}, slow={"loader_stall": 0.5})
    assert diagnosis.loader_wait(s) == "the training loop waits for the loader 50 % of the epoch (against 10 % with 0 workers)"
    staged = sr.stage_info(1.5, {"wait": 0.45, "forward_backward": 0.55})
    assert "45 % of the epoch" in diagnosis.loader_wait(pair(tmp_path, "num_workers", base={"loader_stall": 0.1}, slow=staged))
    assert diagnosis.loader_wait(pair(tmp_path, "num_workers", base={"loader_stall": 0.1}, slow={"loader_stall": 0.3})) is None
    # waiting as much as with fewer workers is no cause of being slower
    assert diagnosis.loader_wait(pair(tmp_path, "num_workers", base={"loader_stall": 0.45}, slow={"loader_stall": 0.5})) is None


def test_compute_growth(tmp_path):
    s = pair(tmp_path, base={"compute_s": 0.5, "batches_per_epoch": 10}, slow={"compute_s": 0.4, "batches_per_epoch": 4})
    assert diagnosis.compute_growth(s) == ("a batch's compute takes 2.0× as long as with 1 rank "
                                           "(100.0 ms against 50.0 ms): the processes compete for the cores")
    same = pair(tmp_path, base={"compute_s": 0.5, "batches_per_epoch": 10}, slow={"compute_s": 0.28, "batches_per_epoch": 4})
    assert diagnosis.compute_growth(same) is None  # 1.4×


def test_worker_cost(tmp_path):
    base = sr.stage_info(1.0, {"sample": 0.2, "fetch": 0.2, "forward_backward": 0.6})
    slow = sr.stage_info(1.5, {"wait": 0.5, "forward_backward": 0.5}, loader_worker_s={"sample": 0.8, "fetch": 0.4})
    assert diagnosis.worker_cost(pair(tmp_path, "num_workers", base=base, slow=slow)) == (
        "the loader workers spend 1.200 worker-seconds sampling and fetching per epoch, 3.0× what the "
        "training process spends with 0 workers")
    cheap = sr.stage_info(1.5, {"wait": 0.5, "forward_backward": 0.5}, loader_worker_s={"sample": 0.3, "fetch": 0.2})
    assert diagnosis.worker_cost(pair(tmp_path, "num_workers", base=base, slow=cheap)) is None
    assert diagnosis.worker_cost(pair(tmp_path, "num_workers")) is None  # no stages recorded


def test_other_share(tmp_path):
    slow = sr.stage_info(1.5, {"forward_backward": 0.6})  # the remaining 40 % is `other`
    assert diagnosis.other_share(pair(tmp_path, slow=slow)).startswith("40 % of the epoch is outside every measured stage")
    assert diagnosis.other_share(pair(tmp_path, slow=sr.stage_info(1.5))) is None


def test_busy_machine(tmp_path):
    assert "took 60 % of the machine" in diagnosis.busy_machine(pair(tmp_path, slow={"other_load": 0.6}))
    assert diagnosis.busy_machine(pair(tmp_path, slow={"other_load": 0.05})) is None


def test_a_slower_configuration_no_rule_explains_says_so(tmp_path):
    found = diagnosis.diagnose(read(tmp_path, [sr.bench(sr.cell_id(), [1.0] * 5),
                                               sr.bench(sr.cell_id(ws=2), [1.1] * 5, loader_stall=0.1)]).cells)
    assert len(found) == 1 and found[0].causes == ()
    assert found[0].line.endswith("no recorded number explains it.")


def test_the_console_line_puts_the_binding_stage_first():
    assert split_line({"sample": 0.2, "fetch": 0.61, "forward_backward": 0.15, "optimizer": 0.001,
                       "other": 0.04}) == "fetch 61 % · sample 20 % · forward/backward 15 % · other 4 %"
    assert split_line(None) is None and split_line({}) is None


def test_work_counted_on_a_sample_of_batches_says_so(tmp_path):
    from bench.publish.columns import STAGE_COLUMNS, _work_hint

    info = sr.stage_info(1.0, batches=10)
    exact = one(tmp_path, **info)
    assert "means over" not in _work_hint(exact)
    info["work"]["counted"] = 3  # the work budget counted 3 of the 10 batches (bench/backends/stages.py)
    sampled = one(tmp_path, **info)
    assert "means over 3.0 of 10.0 batches per epoch" in _work_hint(sampled)
    hops = next(c for c in STAGE_COLUMNS if c.header == "nodes per hop")  # the Markdown "where the time goes"
    assert "means over 3.0 of 10.0" in hops.markdown_text(sampled) and "means over" not in hops.markdown_text(exact)

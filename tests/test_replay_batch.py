"""`replay_batch` (the model alone): the loader's first batch, sampled once before the first epoch's clock,
trained on again for each of an epoch's batches; its loading stamps are not booked to any step. The cells
themselves run in the smoke suite (make bench, tests/test_bundle.py)."""

from __future__ import annotations

import types

from bench.backends import stages
from bench.run.worker import replayed_batches
from bench.settings import DEFAULTS


class CountingLoader:
    def __init__(self, batches):
        self.batches, self.passes = batches, 0

    def __iter__(self):
        self.passes += 1
        return iter(self.batches)


def pipe_with(batches, replay: bool):
    return types.SimpleNamespace(settings=DEFAULTS.replace(replay_batch=replay), train_loader=CountingLoader(batches))


def test_the_first_batch_stands_for_every_batch_and_the_loader_runs_once():
    batches = [stages.stamp(types.SimpleNamespace(n=i), "sample", 0.5) for i in range(3)]
    pipe = pipe_with(batches, replay=True)
    for _ in range(3):  # three epochs
        epoch = replayed_batches(pipe)
        assert [b.n for b in epoch] == [0, 0, 0] and all(b is batches[0] for b in epoch)
    assert pipe.train_loader.passes == 1
    assert stages.take_stamp(batches[0]) == []  # the sampling before the epoch is no step's stage
    assert stages.take_stamp(batches[1]) != []  # (the others were never trained on)


def test_without_it_the_loader_is_the_epoch():
    pipe = pipe_with([types.SimpleNamespace(n=0)], replay=False)
    assert replayed_batches(pipe) is None and pipe.train_loader.passes == 0


def test_it_is_a_setting_of_trained_cells_alone_shown_in_their_id():
    from bench.run import suite

    cells = suite.expand(suite.load("smoke")[0])
    replayed = [c for c in cells if c.settings.replay_batch]
    assert {c.backend for c in replayed} == {"pyg-neighbor", "dgl-graphbolt"}
    assert all(c.id.endswith("/replay_batch=on") and c.settings.num_workers == 0 for c in replayed)
    assert all(c.settings.replay_batch is None for c in cells if c.settings.model == "none")
    others = [c for c in cells if c.settings.replay_batch is False]
    assert others and not any("replay_batch" in c.id for c in others)


def test_its_seeds_are_not_the_datasets_so_no_cell_reads_fewer_seeds_against_it():
    """A replay_batch cell trains its first full batch again for each batch (more seeds an epoch than the
    dataset has when the last batch is short): the other cells are not flagged "fewer seeds" against it."""
    from bench.publish.stages import fewer_seeds
    from bench.settings import Recorded

    def cell(cell_id, seeds, replay):
        return types.SimpleNamespace(id=cell_id, backend="pyg-neighbor", dataset="g", measured=True, stats=None,
                                     settings=Recorded(batch_size=256, replay_batch=replay),
                                     metrics=types.SimpleNamespace(seeds_per_epoch=seeds, seeds_per_s=None))

    cells = [cell("a", 1767, False), cell("a/replay_batch=on", 1792, True), cell("b", 1700, False)]
    notes = fewer_seeds(cells)
    assert set(notes) == {"b"} and "1,767 in a" in notes["b"], notes


def test_a_framework_pairs_ratio_splits_into_the_model_alone_and_the_rest():
    """The committed smoke run (PyG on pyg-lib): its pipeline pair and model-alone pair, side by side, and the
    seconds add up: the epoch difference is the model alone's plus the rest's."""
    from pathlib import Path

    from bench.publish import report, results, torch_share

    run = results.read(Path(__file__).parents[1] / "results/smoke-cpu/smoke-20261203T034528Z.json")
    [row] = torch_share.split_rows(run)
    assert row["cell"] == "dgl-graphbolt/rmat-s12/mode=cpu-cpu/workers=0/ws=1" and row["against"] == "pyg-neighbor"
    assert row["epoch"].startswith("1.724 (1.468") and row["epoch"].endswith("paired")
    assert row["alone"].startswith("0.929 (0.855")
    seconds = [float(row[k].split(" s")[0]) for k in ("difference", "model_part", "rest")]
    assert abs(seconds[0] - seconds[1] - seconds[2]) <= 0.0015
    assert "### The torch builds' share" in report.render_markdown([run])
    # a run without model-alone cells (the 2 Dec hetero run of IGBH-tiny) has no such section
    older = results.read(Path(__file__).parents[1] / "results/hetero-cpu/hetero-20261202T072831Z.json")
    assert torch_share.split_rows(older) == [] and "torch builds' share" not in report.render_markdown([older])


def test_every_suite_that_pairs_two_frameworks_has_their_model_alone():
    """Each suite whose cells hold PyG against GraphBolt declares a model-alone cell for both on one of them,
    so each framework pair's page can show the torch builds' share (issue 61)."""
    from bench.run import suite

    for name in ("smoke", "scaling", "hetero", "link", "memory", "equal-work"):
        cells = suite.expand(suite.load(name)[0])
        alone = [c for c in cells if c.settings.replay_batch]
        assert len({c.backend for c in alone}) == 2, name
        whole = {c.id for c in cells}
        assert all(c.id.removesuffix("/replay_batch=on") in whole for c in alone), name

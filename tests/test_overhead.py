"""`gnnbench fidelity --clocks` (once `gnnbench overhead`): profile on and off interleaved in one process,
for real, in the stacks."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from bench import cli
from bench.harness_costs import fidelity
from bench.run import suite as suite_mod
from bench.run.prepare import ensure_dataset
from tests.conftest import REPO, require_stacks, tiny_pair_suite

TINY = tiny_pair_suite("tiny-overhead", """\
  - {world_size: 2, backend: pyg-neighbor}
""")


@pytest.fixture(scope="module")
def tiny_suite(tmp_path_factory):
    path = tmp_path_factory.mktemp("ovh") / "tiny.yaml"
    path.write_text(TINY)
    return path


def test_only_one_rank_cells_are_measured(tiny_suite):
    suite, _ = suite_mod.load(tiny_suite)
    cells = suite_mod.expand(suite)
    assert [c.id for c in cells if fidelity.clocks_measurable(c)] == [
        "pyg-neighbor/tiny/mode=cpu-cpu/workers=0/ws=1", "dgl-graphbolt/tiny/mode=cpu-cpu/workers=0/ws=1"]
    assert len(cells) == 3


def test_cli_measures_both_backends_interleaved(tiny_suite, cache_dir, tmp_path):
    require_stacks("pyg", "dgl")
    out = tmp_path / "overhead.json"
    proc = subprocess.run([sys.executable, "-m", "bench.cli", "fidelity", str(tiny_suite), "--clocks", "--rounds", "3",
                           "--out", str(out), "--cache-dir", str(cache_dir)],
                          cwd=REPO, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    # the verdict (exit 0 or 1) depends on this machine's noise; what was measured does not
    assert proc.returncode in (0, 1), proc.stderr
    doc = json.loads(out.read_text())
    assert [c["cell_id"] for c in doc["cells"]] == ["pyg-neighbor/tiny/mode=cpu-cpu/workers=0/ws=1",
                                                    "dgl-graphbolt/tiny/mode=cpu-cpu/workers=0/ws=1"]
    for cell in doc["cells"]:
        assert cell["error"] is None
        assert len(cell["on_epochs"]) == len(cell["off_epochs"]) == 3
        assert all(s > 0 for s in cell["on_epochs"] + cell["off_epochs"])
        assert cell["within_goal"] == (cell["overhead"] <= fidelity.GOAL)
        assert 0 <= cell["other_load"] <= 1
    assert doc["command"].startswith("gnnbench fidelity") and "--clocks" in doc["command"] and "profile on" in proc.stdout
    assert "| `dgl-graphbolt/tiny/mode=cpu-cpu/workers=0/ws=1` | 3 |" in out.with_suffix(".md").read_text()


def test_clocks_is_fidelitys_and_refuses_the_plain_loop_options(tiny_suite, capsys):
    """No `overhead` command: its measurement is `fidelity --clocks`, whose pair runs in one process,
    so the plain-loop options are refused (exit 2, nothing run)."""
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    assert "overhead" not in capsys.readouterr().out
    for extra in (["--side-by-side"], ["--against-itself"], ["--max-rounds", "9"], ["--rounds", "0"]):
        assert cli.main(["fidelity", str(tiny_suite), "--clocks", *extra]) == cli.EXIT_BAD_INPUT
        err = capsys.readouterr().err
        assert ("--clocks and" in err or "--rounds 0" in err) and "Traceback" not in err
    assert cli.main(["fidelity", str(tiny_suite), "--clocks", "-k", "ws=2"]) == cli.EXIT_BAD_INPUT
    assert "no cell of one rank" in capsys.readouterr().err


def test_a_failing_cell_is_recorded_and_named(tiny_suite, cache_dir, tmp_path):
    require_stacks("pyg")
    suite, _ = suite_mod.load(tiny_suite)
    cell = next(c for c in suite_mod.expand(suite) if fidelity.clocks_measurable(c))
    with pytest.raises(fidelity.OverheadError, match=f"{cell.id}: the interleaved run failed"):
        fidelity.run_clocks(cell, tmp_path / "no-such-dataset", cache_dir, 2)
    ensure_dataset(cell.dataset_spec, cache_dir, None)  # the real data: the same cell then runs
    assert len(fidelity.run_clocks(cell, ensure_dataset(cell.dataset_spec, cache_dir, None), cache_dir, 1).on_epochs) == 1


def test_verdict_table_and_file(tmp_path):
    cheap = fidelity.Overhead("a/cell", [1.01, 1.02, 1.0], [1.0, 1.0, 1.0])
    costly = fidelity.Overhead("b/cell", [1.1, 1.1, 1.2], [1.0, 1.0, 1.0], other_load=0.03)
    broken = fidelity.Overhead("c/cell", [], [], error="exit code 1 | boom")
    assert cheap.within_goal and not costly.within_goal and not broken.within_goal
    assert costly.overhead == pytest.approx(0.1) and cheap.overhead == pytest.approx(0.01)
    assert costly.interval == pytest.approx((0.1, 0.2))  # 3 pairs: the interval spans them all
    fidelity.write_clocks([cheap, costly, broken], tmp_path / "o.json", "gnnbench fidelity x --clocks")
    doc = json.loads((tmp_path / "o.json").read_text())
    assert [c["within_goal"] for c in doc["cells"]] == [True, False, False]
    table = (tmp_path / "o.md").read_text()
    assert "| `b/cell` | 3 | 1.1000 s | 1.0000 s | +10.0% | +10.0% to +20.0% | +10.0% | **no** | 3% |" in table
    assert "failed: exit code 1 \\| boom" in table


def test_the_interval_of_many_pairs_is_the_order_statistics_of_the_median():
    # 100 pairs with ratios 1.00 .. 1.99: the 95 % interval of the median runs from the 40th to the 61st
    pairs = fidelity.Overhead("a/cell", [1 + i / 100 for i in range(100)], [1.0] * 100)
    assert pairs.overhead == pytest.approx(0.495)
    assert pairs.interval == pytest.approx((0.39, 0.60))


RESEED_TWICE = """
import json, sys
from pathlib import Path
from bench.datasets import hub
from bench.backends import load_pipeline_class
from bench.settings import CellSettings
cell = json.loads(sys.argv[1])
data = hub.load_dataset("synthetic", Path(sys.argv[2]), features_in_memory=True)
pipe = load_pipeline_class(cell["backend"])(data, CellSettings.from_dict(cell["settings"]))
def seeds_of(b):  # a PyG Data's seeds come first in n_id; a GraphBolt MiniBatch names them
    return (b.n_id[:b.batch_size] if hasattr(b, "n_id") else b.seed_nodes).tolist()
epochs = []
for seed in (7, 7, None):  # the third epoch goes on from where the second left the streams
    if seed is not None:
        pipe.reseed(seed)
    epochs.append([[seeds_of(b), pipe.count(b)[1]] for b in pipe.train_loader])
print(json.dumps(epochs))
"""


@pytest.mark.parametrize("backend", ["pyg-neighbor", "dgl-graphbolt"])
def test_both_epochs_of_a_pair_draw_the_same_batches(tiny_suite, cache_dir, backend):
    """reseed() makes an epoch repeat its batches (PyG: and its samples), so the overhead's pairs do
    (nearly) equal work; GraphBolt's sampling threads keep generators of their own."""
    from bench import stacks
    from bench.run.runner import worker_env

    require_stacks("pyg" if backend == "pyg-neighbor" else "dgl")
    suite, _ = suite_mod.load(tiny_suite)
    cell = next(c for c in suite_mod.expand(suite) if c.backend == backend and fidelity.clocks_measurable(c))
    proc = subprocess.run([str(stacks.get(cell.stack).python), "-c", RESEED_TWICE, cell.to_json(),
                           str(ensure_dataset(cell.dataset_spec, cache_dir, None))],
                          env=worker_env(cache_dir, "reseed-test"), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    first, again, unseeded = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(first) > 1 and [b[0] for b in first] == [b[0] for b in again]  # each batch's seeds
    if backend == "pyg-neighbor":
        assert first == again  # and its sampled edges
    assert [b[0] for b in unseeded] != [b[0] for b in first]  # without reseeding the shuffle differs


def test_cli_refuses_a_suite_without_one_rank_cells(tmp_path):
    path = tmp_path / "ranks.yaml"
    path.write_text(TINY.replace("timeout: 300}", "timeout: 300, world_size: 2}"))
    proc = subprocess.run([sys.executable, "-m", "bench.cli", "fidelity", str(path), "--clocks"],
                          cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 2 and "no cell of one rank" in proc.stderr

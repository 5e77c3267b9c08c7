"""`gnnbench calibrate`: the A/A pairs it reads (disjoint, so independent), the rates it reports, and a
real run of PyG cells with a planted slowdown that its pairs must find."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.commands import calibrate
from tests.conftest import require_stacks

REPO = Path(__file__).resolve().parent.parent
CELLS = [f"pyg-neighbor/g/mode=cpu-cpu/workers={w}/ws=1/lr={lr}" for w in (0, 2)
         for lr in ("0.01", "0.0100001", "0.0100002", "0.0100003")]


def test_disjoint_pairs_never_share_a_cell_and_stay_within_a_group():
    pairs = calibrate.disjoint_pairs(CELLS)
    assert len(pairs) == 4 and len({c for p in pairs for c in p}) == 8
    assert all(a.split("/lr=")[0] == b.split("/lr=")[0] for a, b in pairs)
    assert pairs[0] == (CELLS[0], CELLS[1]) and pairs[1] == (CELLS[2], CELLS[3])


def test_the_summary_counts_what_the_intervals_say():
    def pair(first, second, ratio, low, high, reading):
        return {"axis": "lr", "first": first, "second": second, "paired": True, "ratio": ratio, "ci95": [low, high],
                "launches": 6, "reading": reading}
    pairs = [pair(CELLS[0], CELLS[1], 1.01, 0.99, 1.02, "same"), pair(CELLS[2], CELLS[3], 1.05, 1.04, 1.06, "slower"),
             pair(CELLS[4], CELLS[5], 1.02, 1.005, 1.035, "leans slower"),
             pair(CELLS[6], CELLS[7], None, None, None, None) | {"ci95": None},
             pair(CELLS[0], CELLS[2], 1.3, 1.2, 1.4, "slower")]  # not a disjoint pair: not counted
    found = calibrate.summary([{"gnnbench": {"cells": CELLS, "pairs": pairs}}], None)
    assert found["pairs"] == 3 and found["interval_holds_1"] == 1 and found["differences_claimed"] == 1
    assert found["found"] == 2 and found["readings"]["leans slower"] == 1
    assert "1 of 3" in calibrate.text(found, "quiet, A/A")


def test_bad_options_are_refused(tmp_path):
    for args, said in ((["--runs", "0"], "--runs 0"), (["--planted", "2"], "--planted 2.0"),
                       (["--launches", "2"], "launches: Input should be greater than or equal to 3")):
        done = subprocess.run([sys.executable, "-m", "bench.cli", "calibrate", *args], cwd=REPO, capture_output=True,
                              text=True)
        assert done.returncode == 2 and said in done.stderr, done.stderr


SMALL = """
name: calsmall
datasets:
  tiny: {source: synthetic, params: {scale: 9, edge_factor: 4, feature_dim: 16, num_classes: 3, seed: 1}}
backends: [pyg-neighbor]
settings: {num_workers: 0, batch_size: 64, fanout: [4, 2], epochs: 4, warmup_epochs: 1, hidden: 16, timeout: 300,
           lr: [0.01, 0.0100001, 0.0100002, 0.0100003]}
paired: {by: [lr], launches: 3}
"""


@pytest.mark.stacks
def test_a_calibration_run_plants_its_slowdown_and_reads_its_pairs(tmp_path, cache_dir):
    """Each second cell of a disjoint pair made 30 % slower (a busy-wait of 30 % of each measured epoch):
    the summary, written beside the result file, names the planted cells and reads both pairs
    over their 3 launches. Whether a planted slowdown is found is what a calibration run on a quiet
    machine measures (results/calibration-cpu/); on a busy one these 4-round launches of a tiny graph
    may be too noisy to tell, which is what the words then say."""
    require_stacks("pyg")
    suite = tmp_path / "calsmall.yaml"
    suite.write_text(SMALL)
    done = subprocess.run([sys.executable, "-m", "bench.cli", "calibrate", str(suite), "--planted", "0.3",
                           "--results", str(tmp_path / "r")], cwd=REPO, capture_output=True, text=True, timeout=1500,
                          env={**__import__("os").environ, "GNNBENCH_CACHE": str(cache_dir), "GNNBENCH_FAULT": ""})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    [written] = list((tmp_path / "r").glob("*.calibration.json"))
    found = json.loads(written.read_text())
    assert found["pairs"] == 2 and found["planted"] == 0.3, found
    assert sorted(found["planted_in"]) == [c for c in sorted(json.loads(Path(found["results"][0]).read_text())
                                                              ["gnnbench"]["cells"]) if c.endswith(("0001", "0003"))]
    assert all(r[3] in ("slower", "leans slower", "unresolved", "same", "leans faster", "faster") for r in found["ratios"])
    assert "planted 30% found (reads slower, surely or leaning):" in done.stdout and "of 2" in done.stdout

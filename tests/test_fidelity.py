"""`gnnbench fidelity`: the plain loops run for real in their stacks, and the comparison holds."""

from __future__ import annotations

import json
import subprocess
import sys
from types import SimpleNamespace

import pytest

from bench.backends import BACKENDS
from bench.harness_costs import fidelity
from bench.run import suite as suite_mod
from bench.run.prepare import ensure_dataset
from tests.conftest import REPO, require_stacks, tiny_pair_suite

TINY = tiny_pair_suite("tiny-fidelity", """\
  - {model: none, num_workers: 0}
  - {store: lmdb, backend: pyg-neighbor}
""")


# the node backends with a plain loop: the tiny suite's (typed and link ones: tests/test_fidelity_tasks.py)
NODE_PLAIN = [b for b in fidelity.PLAIN_BACKENDS if BACKENDS[b].task == "node"]


@pytest.fixture(scope="module")
def tiny_cells(tmp_path_factory):
    path = tmp_path_factory.mktemp("fid") / "tiny.yaml"
    path.write_text(TINY)
    suite, _ = suite_mod.load(path)
    return path, suite_mod.expand(suite)


def test_only_cells_with_a_plain_loop_are_compared(tiny_cells):
    _, cells = tiny_cells
    chosen = [c.id for c in cells if fidelity.comparable(c)]
    assert chosen == ["pyg-neighbor/tiny/mode=cpu-cpu/workers=0/ws=1", "dgl-graphbolt/tiny/mode=cpu-cpu/workers=0/ws=1",
                      "pyg-neighbor/tiny/mode=cpu-cpu/workers=0/ws=1/model=none",
                      "dgl-graphbolt/tiny/mode=cpu-cpu/workers=0/ws=1/model=none"]  # loader-only pairs too


@pytest.mark.parametrize("model", ["sage", "none"])
@pytest.mark.parametrize("backend", NODE_PLAIN)
def test_plain_loop_trains_in_its_stack(backend, model, tiny_cells, cache_dir):
    """The training loop, and for a loader-only cell (model: none) the loader iterated alone."""
    require_stacks("pyg", "dgl")
    _, cells = tiny_cells
    cell = next(c for c in cells if c.backend == backend and fidelity.comparable(c) and c.settings.model == model)
    epochs, cpu = fidelity.run_plain(cell, ensure_dataset(cell.dataset_spec, cache_dir, None), cache_dir)
    assert len(epochs) == len(cpu) == 2 and all(e > 0 for e in epochs + cpu)


def test_a_broken_plain_loop_names_the_cell(tiny_cells, cache_dir, tmp_path):
    require_stacks("pyg")
    _, cells = tiny_cells
    cell = next(c for c in cells if fidelity.comparable(c))
    with pytest.raises(fidelity.FidelityError, match=f"{cell.id}: the plain loop failed"):
        fidelity.run_plain(cell, tmp_path / "no-such-dataset", cache_dir)


def rounds_of(cell_id: str, harness: list[float], plain: list[float], **kw) -> fidelity.Comparison:
    """A pair whose every round (a launch) ran one epoch of each side."""
    c = fidelity.Comparison(cell_id, [], [], [], **kw)
    for h, p in zip(harness, plain):
        c.add("harness", [h], [], 0.02)
        c.add("plain", [p], [])
    return c


def test_comparison_verdict_and_file(tmp_path):
    close = rounds_of("a/cell", [1.01, 1.012, 1.011], [1.0, 1.0, 1.0], threads=2)
    close.harness_cpu, close.plain_cpu = [0.5, 0.6, 0.55], [0.5, 0.5, 0.5]
    slow = rounds_of("b/cell", [1.3, 1.2, 1.25], [1.0, 1.0, 1.0], threads=1)
    assert close.faithful and not slow.faithful and slow.differs and slow.ratio == pytest.approx(1.25, abs=0.002)
    fidelity.write([close, slow], tmp_path / "f.json", "gnnbench fidelity x")
    doc = json.loads((tmp_path / "f.json").read_text())
    assert [c["faithful"] for c in doc["cells"]] == [True, False] and doc["command"] == "gnnbench fidelity x"
    assert doc["tolerance"] == 0.03 and [c["threads"] for c in doc["cells"]] == [2, 1]
    assert [c["reading"] for c in doc["cells"]] == ["same", "slower"] and doc["cells"][0]["confidence"] == 0.95
    table = (tmp_path / "f.md").read_text()
    assert ("| cell | threads | gnnbench epoch (median) | plain loop epoch (median) | ratio (rounds' geometric mean) "
            "| 95.0% interval (rounds) | within ±3% | CPU-time ratio |") in table
    assert "| `b/cell` | 1 | 1.2500 s | 1.0000 s | 1.249 | 1.131–1.380 (3) | **no**: 24.9% slower (+13.1% to +38.0%) |" in table
    assert "| yes | 1.100 | 2% |" in table and doc["cells"][0]["cpu_ratio"] == pytest.approx(1.1)
    assert "- `b/cell`: 24.9% slower (+" in table and "- `a/cell`" not in table


@pytest.mark.parametrize("harness,reading", [(0.93, "faster"), (1.07, "slower"), (1.0, "same"), (1.025, "leans slower"),
                                              (0.879, "faster")])
def test_a_pair_is_within_the_band_only_where_its_interval_is(harness, reading):
    """"yes" only where the whole interval lies in the band; a point estimate inside it (1.025) whose
    interval reaches out is not "yes": it leans, and says so."""
    c = rounds_of("x/cell", [harness * f for f in (1.0, 1.01, 0.99, 1.005, 0.995, 1.0)], [1.0] * 6)
    assert c.reading == reading, (c.ratio, c.interval)
    assert (c.verdict == "yes") is (reading == "same")
    assert ("Outside ±3%" in fidelity.table([c])) is (reading in ("faster", "slower"))
    assert c.verdict.startswith("**no**") is (reading in ("faster", "slower"))
    assert "not surely beyond ±3%" in c.verdict if reading.startswith("leans") else True


def test_cli_refuses_a_suite_without_comparable_cells(tmp_path):
    path = tmp_path / "two-ranks.yaml"  # two ranks: no plain loop exists for them
    path.write_text(TINY.replace("num_workers: 0, mode: cpu-cpu", "num_workers: 0, world_size: 2, mode: cpu-cpu"))
    proc = subprocess.run([sys.executable, "-m", "bench.cli", "fidelity", str(path)],
                          cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 2 and "no cell a plain loop exists for" in proc.stderr


def test_the_interval_is_taken_over_rounds_and_says_whether_a_gap_is_resolved():
    """Each round is a launch: the interval is a t interval over the rounds' ratios, so 3 rounds give a
    wide one (2 degrees of freedom) and a round 15 % off keeps a gap from being called."""
    clear = rounds_of("c/cell", [1.10, 1.09, 1.10, 1.11, 1.10, 1.09], [1.0, 0.99, 1.0, 1.01, 1.0, 0.99])
    low, high = clear.interval
    assert 1.03 < low <= clear.ratio <= high and clear.resolved is True and clear.settled == "outside"
    noisy = rounds_of("n/cell", [1.15, 1.0, 1.05], [1.0, 1.0, 1.0])
    assert not noisy.faithful and noisy.interval[0] < 1.0 and noisy.resolved is False and noisy.reading == "unresolved"
    assert "unresolved, leans slower" in noisy.verdict and "Unresolved" in fidelity.table([noisy])
    two = rounds_of("x", [1.0, 1.2], [1.0, 1.0])
    assert two.interval is None and "fewer than the 3 an interval over launches needs" in fidelity.table([two])


def test_a_side_by_side_run_takes_its_ratio_over_back_to_back_epochs():
    """A side-by-side round runs harness and plain epochs back to back: each round's ratio is the median
    of its drift-free sandwiches, so a busy stretch that slows one plain epoch (the third: 1.5 s where
    its neighbours took 1.0) touches the three sandwiches around it and not the round's median. Runs in
    separate processes have no sandwiches and keep each round's medians' ratio."""
    def run(side_by_side):
        c = fidelity.Comparison("p/cell", [], [], [], side_by_side=side_by_side)
        for _ in range(6):
            c.add("harness", [1.02] * 8, [])
            c.add("plain", [1.0, 1.0, 1.5, 1.0, 1.0, 1.0, 1.0, 1.0], [])
        return c
    paired, apart = run(True), run(False)
    assert paired.paired and paired.ratio == pytest.approx(1.02) and paired.ratio_of_medians == pytest.approx(1.02)
    assert paired.interval == pytest.approx((1.02, 1.02)) and paired.settled == "inside"
    assert not apart.paired and apart.ratio == pytest.approx(1.02)
    table = fidelity.table([paired])
    assert "| ratio (paired epochs) | ratio of medians |" in table and "| 1.020 | 1.020 |" in table
    assert "ratio of medians" not in fidelity.table([apart])


def test_an_a_a_run_names_both_sides_plain_loops():
    aa = fidelity.Comparison("a/cell", [1.0, 1.1], [1.0, 1.0], [None], against_itself=True)
    table = fidelity.table([aa])
    assert "| plain loop, A (median) | plain loop, B (median) |" in table and "gnnbench epoch" not in table
    assert "no harness on either side" in table


def test_the_cli_offers_the_a_a_run():
    proc = subprocess.run([sys.executable, "-m", "bench.cli", "fidelity", "--help"], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0 and "--against-itself" in proc.stdout


@pytest.mark.parametrize("backend", NODE_PLAIN)
def test_side_by_side_runs_both_loops_in_one_process(backend, tiny_cells, cache_dir):
    require_stacks("pyg", "dgl")
    _, cells = tiny_cells
    cell = next(c for c in cells if c.backend == backend and fidelity.comparable(c))
    found = fidelity.run_side_by_side(cell, ensure_dataset(cell.dataset_spec, cache_dir, None), cache_dir)
    assert len(found["harness"]) == len(found["epochs"]) == len(found["harness_cpu"]) == len(found["cpu"]) == 2
    assert all(e > 0 for e in found["harness"] + found["epochs"])
    c = fidelity.Comparison(cell.id, found["harness"], found["epochs"], [None], side_by_side=True)
    assert "| gnnbench epoch, same process (median) | plain loop epoch (median) |" in fidelity.table([c])


def test_the_two_kinds_of_control_run_exclude_each_other(tiny_cells):
    path, _ = tiny_cells
    proc = subprocess.run([sys.executable, "-m", "bench.cli", "fidelity", str(path), "--against-itself", "--side-by-side"],
                          cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 2 and "give one of them" in proc.stderr


def test_rounds_are_added_until_each_pair_settles_or_the_cap(monkeypatch, tiny_cells):
    """--max-rounds: a second planned look. A pair whose interval straddles an edge of the band at
    --rounds runs on to --max-rounds and is judged once more there (each look at 97.5 %, so the plan's
    error stays 5 %); one that settles stops at the first look; one still straddling at the cap is
    named with why. The two sides' epochs are
    planted here (the runs themselves are the plain-loop tests' business): what is tested is the policy."""
    _, cells = tiny_cells
    cell = next(c for c in cells if fidelity.comparable(c))
    monkeypatch.setattr(fidelity, "prepared", lambda executor, cell: (cell, SimpleNamespace(dataset_dir=None)))
    planted = {"harness": iter([]), "plain": iter([])}

    def side(name):
        return lambda *a: ([next(planted[name])], [], *([None] if name == "harness" else []))
    monkeypatch.setattr(fidelity, "run_harness", side("harness"))
    monkeypatch.setattr(fidelity, "run_plain", side("plain"))

    # the same ratio every round (1.00): inside at the first planned look (--rounds), no more added
    planted.update(harness=iter([1.0, 1.001, 0.999] * 7), plain=iter([1.0] * 20))
    (steady,) = fidelity.compare([cell], None, None, rounds=3, max_rounds=10, say=lambda *_: None)
    assert len(steady.harness_rounds) == 3 and steady.settled == "inside" and steady.unsettled_reason is None
    assert steady.confidence == 0.975  # two planned looks, each at half of the 5 %
    # rounds swinging ±6 % around 1.0: never settles, stops at the cap and says why
    planted.update(harness=iter([1.06, 0.94] * 10), plain=iter([1.0] * 20))
    (swinging,) = fidelity.compare([cell], None, None, rounds=3, max_rounds=6, say=lambda *_: None)
    assert len(swinging.harness_rounds) == 6 and swinging.settled is None
    assert "still straddles an edge of ±3% after 6 rounds (the cap, --max-rounds 6)" in swinging.unsettled_reason
    assert "Unresolved" in fidelity.table([swinging]) and "after 6 rounds" in fidelity.table([swinging])
    # without a cap: exactly --rounds, an unresolved pair told how to add more
    planted.update(harness=iter([1.06, 0.94] * 10), plain=iter([1.0] * 20))
    (capless,) = fidelity.compare([cell], None, None, rounds=3, say=lambda *_: None)
    assert len(capless.harness_rounds) == 3 and "give --max-rounds" in capless.unsettled_reason


def test_a_pair_interrupted_mid_way_keeps_its_finished_rounds(monkeypatch, tiny_cells):
    """A timeout's SIGINT in a pair's fifth round (the GPU script's FIDELITY_S): the four rounds
    that finished are kept and named as interrupted, the half-done fifth is not counted, and the
    interrupt still reaches the command. Epochs planted: what is tested is what is kept."""
    _, cells = tiny_cells
    cell = next(c for c in cells if fidelity.comparable(c))
    monkeypatch.setattr(fidelity, "prepared", lambda executor, cell: (cell, SimpleNamespace(dataset_dir=None)))
    harness, plain = iter([1.0, 1.1, 1.0, 1.1, 1.0]), iter([1.0] * 4)

    def plain_run(*a):
        try:
            return [next(plain)], []
        except StopIteration:
            raise KeyboardInterrupt from None
    monkeypatch.setattr(fidelity, "run_harness", lambda *a: ([next(harness)], [], None))
    monkeypatch.setattr(fidelity, "run_plain", plain_run)
    found: list = []
    with pytest.raises(KeyboardInterrupt):
        fidelity.compare([cell], None, None, rounds=6, say=lambda *_: None, found=found)
    (kept,) = found
    assert kept.interrupted_after == 4 and len(kept.harness_rounds) == len(kept.plain_rounds) == 4
    assert kept.harness_epochs == [1.0, 1.1, 1.0, 1.1]
    assert "interrupted after 4 of the 6 rounds asked" in (kept.unsettled_reason or "")
    assert "4 of the 6 rounds asked" in fidelity.table([kept])
    assert kept.as_dict()["interrupted_after"] == 4


def test_max_rounds_below_rounds_is_refused(tiny_cells):
    path, _ = tiny_cells
    done = subprocess.run([sys.executable, "-m", "bench.cli", "fidelity", str(path), "--rounds", "4", "--max-rounds", "2"],
                          capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 2 and "--max-rounds 2: give at least --rounds (4)" in done.stderr


def test_an_interrupted_run_keeps_the_pairs_that_finished(monkeypatch, tiny_cells, tmp_path, capsys):
    """Ctrl-C (or SIGTERM) in the second pair of a long fidelity run: the first pair's rounds are
    written, the rest named as not run, exit 130. The pairs' epochs are planted (the runs are the
    plain-loop tests' business): what is tested is what the command keeps."""
    from bench.commands import fidelity as command
    from bench.cli import main

    path, cells = tiny_cells
    chosen = [c for c in cells if fidelity.comparable(c)]
    assert len(chosen) >= 2

    def interrupted_after_one(cells, *args, found, **kwargs):
        done = fidelity.Comparison(cells[0].id, [], [], [])
        for _ in range(3):
            done.add("harness", [1.0], [1.0])
            done.add("plain", [1.0], [1.0])
        found.append(done)
        raise KeyboardInterrupt

    monkeypatch.setattr(command.fidelity, "compare", interrupted_after_one)
    out = tmp_path / "fid.json"
    assert main(["fidelity", str(path), "--out", str(out)]) == 130
    doc = json.loads(out.read_text())
    assert [c["cell_id"] for c in doc["cells"]] == [chosen[0].id]
    assert doc["not_run"] == {"reason": "interrupted", "cells": [c.id for c in chosen[1:]]}
    assert out.with_suffix(".md").read_text().count("Interrupted: not run:") == 1
    assert "1 of" in capsys.readouterr().err


def test_a_failing_pair_is_recorded_and_the_others_still_run(monkeypatch, tiny_cells, tmp_path):
    """A cell (or its plain loop) that fails is data: its error is named in both files, the next
    pair runs and is kept, and the exit code says a pair failed. The pairs' outcomes are planted (the
    runs are the plain-loop tests' business): what is tested is what the command keeps."""
    from bench.cli import main

    path, cells = tiny_cells
    chosen = [c for c in cells if fidelity.comparable(c)]
    assert len(chosen) >= 2

    def one(executor, cell, *args):
        if cell.id == chosen[0].id:
            raise fidelity.FidelityError(f"{cell.id}: the plain loop failed: RuntimeError: out of memory")
        done = fidelity.Comparison(cell.id, [], [], [])
        done.add("harness", [1.0], [1.0])
        done.add("plain", [1.0], [1.0])
        return done

    monkeypatch.setattr(fidelity, "_compare_one", one)
    out = tmp_path / "fid.json"
    assert main(["fidelity", str(path), "--out", str(out)]) == 1
    doc = json.loads(out.read_text())
    assert [c["cell_id"] for c in doc["cells"]] == [c.id for c in chosen[1:]]
    assert doc["failed"] == {chosen[0].id: f"{chosen[0].id}: the plain loop failed: RuntimeError: out of memory"}
    text = out.with_suffix(".md").read_text()
    assert "Failed (no ratio):" in text and f"- `{chosen[0].id}`: " in text and "out of memory" in text


GPU_TINY = tiny_pair_suite("tiny-gpu-fidelity", """\
  - {mode: cpu-cuda, pin_memory: true, backend: pyg-neighbor}
  - {mode: cpu-cuda, amp: bf16, backend: pyg-neighbor}
""")
CUDA_CELL = "pyg-neighbor/tiny/mode=cpu-cuda/workers=0/ws=1/pin_memory=True"


@pytest.fixture(scope="module")
def gpu_cells(tmp_path_factory):
    path = tmp_path_factory.mktemp("gpufid") / "tiny-gpu.yaml"
    path.write_text(GPU_TINY)
    suite, _ = suite_mod.load(path)
    return path, {c.id: c for c in suite_mod.expand(suite)}


def test_a_cpu_cuda_cell_is_paired_and_names_what_differs_by_design(gpu_cells):
    """cpu-cuda cells have a plain loop now (model and batches on the GPU), autocast ones still not;
    a GPU pair's table names what its two sides do differently there, a CPU pair's nothing."""
    _, cells = gpu_cells
    assert [i for i, c in cells.items() if fidelity.comparable(c) and "cuda" in i] == [CUDA_CELL]
    apart = fidelity.gpu_differences(cells[CUDA_CELL], side_by_side=False)
    assert any(d.startswith("threads:") for d in apart) and any("profile: true" in d for d in apart)
    assert not any(d.startswith("threads:") for d in fidelity.gpu_differences(cells[CUDA_CELL], side_by_side=True))
    assert fidelity.gpu_differences(cells["pyg-neighbor/tiny/mode=cpu-cpu/workers=0/ws=1"], side_by_side=False) == []
    pair = fidelity.Comparison(CUDA_CELL, [1.0] * 3, [1.0] * 3, [None], differences=apart)
    assert f"Differences by design (the GPU pairs' sides):\n- `{CUDA_CELL}`: threads:" in fidelity.table([pair])


def test_a_gpu_pair_without_a_gpu_is_skipped_with_why_and_the_run_goes_on(gpu_cells, tmp_path):
    """A real `gnnbench fidelity` on a GPU-less machine: the cpu-cuda pair is named as skipped in
    both files with the reason (before any dataset step), and the CPU pair beside it still runs."""
    require_stacks("pyg")
    from bench.machine import gpus
    if gpus.visible():
        pytest.skip("a GPU is visible here: the cpu-cuda pair runs instead")
    path, _ = gpu_cells
    out = tmp_path / "fid.json"
    proc = subprocess.run([sys.executable, "-m", "bench.cli", "fidelity", str(path), "-k", "backend=pyg-neighbor and "
                           "model=sage", "--stack", "pyg", "--rounds", "1", "--out", str(out)],  # --stack: as the GPU script's
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode in (0, 1), proc.stderr  # 1: the tiny CPU pair's ratio outside ±3 % on a busy machine
    doc = json.loads(out.read_text())
    assert list(doc["skipped"]) == [CUDA_CELL]
    assert "needs a CUDA GPU; this machine shows none" in doc["skipped"][CUDA_CELL]
    assert [c["cell_id"] for c in doc["cells"]] == ["pyg-neighbor/tiny/mode=cpu-cpu/workers=0/ws=1"]
    assert f"Skipped (no ratio):\n- `{CUDA_CELL}`: mode cpu-cuda needs a CUDA GPU" in out.with_suffix(".md").read_text()
    assert "1 of 2 pair(s) skipped here" in proc.stderr


@pytest.mark.parametrize("side_by_side", [False, True])
def test_a_stack_without_cuda_skips_its_gpu_pair_with_its_own_reason(side_by_side, gpu_cells, cache_dir, monkeypatch):
    """A machine that shows a GPU (faked here) but a stack whose torch sees none (or a CPU build of
    its framework): the stack says why, from the cell's worker (apart) or the plain loop's process
    (--side-by-side), and the pair is skipped with that, not failed."""
    require_stacks("pyg")
    from bench.machine import gpus
    monkeypatch.setattr(gpus, "visible", lambda: gpus.Gpus(("a faked GPU",), "faked"))  # the executor asks it
    _, cells = gpu_cells
    skipped, failed = {}, {}
    found = fidelity.compare([cells[CUDA_CELL]], cache_dir, None, rounds=1, say=lambda *_: None,
                             side_by_side=side_by_side, failed=failed, skipped=skipped)
    assert found == [] and failed == {} and list(skipped) == [CUDA_CELL]
    assert "needs a CUDA GPU and a CUDA build of the framework" in skipped[CUDA_CELL]

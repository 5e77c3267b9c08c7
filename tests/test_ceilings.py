"""The machine ceilings (bench/machine/ceilings.py): each probe returns a positive figure, the page
cache eviction takes, and a second probe on the same machine reads the cache instead of
measuring again."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from bench.machine import ceilings
from bench.stores import page_cache


@pytest.fixture
def small(monkeypatch):
    """Smaller arrays and shorter repeats: the test checks the probes, not this machine."""
    monkeypatch.setattr(ceilings, "MEMCPY_BYTES", 16 * ceilings.MIB)
    monkeypatch.setattr(ceilings, "MIN_ARRAY_BYTES", 32 * ceilings.MIB)
    monkeypatch.setattr(ceilings, "MAX_ARRAY_BYTES", 32 * ceilings.MIB)
    monkeypatch.setattr(ceilings, "GATHER_BYTES", 4 * ceilings.MIB)
    monkeypatch.setattr(ceilings, "SECONDS_PER_FIGURE", 0.05)


def features_file(folder, rows=4096, width=64):
    """A hub-like features.npy on a real disk (the test folder), written through to it."""
    path = folder / "features.npy"
    np.save(path, np.random.default_rng(0).random((rows, width), dtype=np.float32))
    fd = os.open(path, os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)
    return path


def test_memory_figures_are_positive(small):
    assert ceilings.memcpy_bandwidth() > 0
    assert ceilings.gather_bandwidth(256) > 0
    assert ceilings.gather_bandwidth(6) > 0  # a width that is no whole number of float32
    with pytest.raises(ValueError, match="row width 0"):
        ceilings.gather_bandwidth(0)


def test_npy_layout_is_the_row_width_and_data_offset(tmp_path):
    path = features_file(tmp_path, rows=10, width=33)
    width, offset = ceilings.npy_layout(path)
    assert width == 33 * 4
    assert os.path.getsize(path) == offset + 10 * 33 * 4


def test_eviction_takes_and_reads_are_measured(tmp_path, small):
    path = features_file(tmp_path)
    ceilings.sequential_read(path)
    cached, pages = page_cache.resident(path)
    assert cached / pages > 0.9  # just read: cached
    page_cache.evict([path])
    cached, pages = page_cache.resident(path)
    assert cached / pages <= ceilings.COLD_RESIDENT_MAX
    width, offset = ceilings.npy_layout(path)
    figures, notes = ceilings.disk_reads(path, width, offset, label="toy/features.npy")
    assert set(figures) == {"seq_cold_bytes_per_s", "seq_warm_bytes_per_s", "random_cold_bytes_per_s",
                            "random_warm_bytes_per_s"}
    assert all(v > 0 for v in figures.values())
    assert not any("stayed in the page cache" in n for n in notes), notes


def test_probe_is_cached_per_machine_width_and_file(tmp_path, small):
    data = tmp_path / "hub" / "toy"
    data.mkdir(parents=True)
    features_file(data, width=48)
    widths, files = ceilings.dataset_targets({"toy": data})
    assert widths == [192] and list(files) == ["toy/features.npy"]
    asked = []

    def interpreters():
        asked.append(1)
        return []
    first = ceilings.probe(tmp_path / "cache", widths, files, interpreters=interpreters)
    assert first["usable_cores"] >= 1 and first["memcpy_bytes_per_s"] > 0
    assert first["gather_bytes_per_s"]["192"] > 0
    assert first["disk"]["toy/features.npy"]["seq_warm_bytes_per_s"] > 0
    if first["h2d_pinned_bytes_per_s"] is None:
        assert any("host-to-device" in n for n in first["notes"])
    cached = ceilings.cache_file(tmp_path / "cache")
    assert cached.is_file()
    # measured again, the figures would differ in their last digits: equal means read from the cache
    again = ceilings.probe(tmp_path / "cache", widths, files, interpreters=interpreters)
    assert again == first
    # the GPU question is asked only where a GPU is visible, and a measured answer is kept (a
    # "not measured" one never is: a machine that gains a GPU, or a driver, is measured next run)
    assert len(asked) <= 1
    # a new width is measured and added; the old ones stay
    wider = ceilings.probe(tmp_path / "cache", [192, 512], files, interpreters=interpreters)
    assert wider["gather_bytes_per_s"]["192"] == first["gather_bytes_per_s"]["192"]
    assert wider["gather_bytes_per_s"]["512"] > 0
    assert set(json.loads(cached.read_text())["gather"]) == {"192", "512"}


def test_a_failed_probe_costs_the_run_nothing(tmp_path):
    broken = tmp_path / "toy"
    broken.mkdir()
    (broken / "features.npy").write_text("not an array")
    out = ceilings.for_run(tmp_path / "cache", {"toy": broken})
    assert out["usable_cores"] >= 1
    assert "ceilings not measured" in out["notes"][0]

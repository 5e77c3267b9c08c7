"""The one core budget (bench/machine/core_budget.py): its arithmetic, the settings that ask for more
than the cores, the cgroup quota, and the places that divide cores through it."""

from __future__ import annotations

import pytest

from bench.machine import core_budget
from bench.run import suite as suite_mod


@pytest.mark.parametrize("cores,ranks,workers,threads,expected", [
    (2, 1, 0, "auto", 2),    # one process alone takes every core
    (2, 2, 0, "auto", 1),    # each rank gets cores ÷ ranks
    (16, 4, 0, "auto", 4),
    (16, 4, 1, "auto", 3),   # a rank's workers take one core each of its share
    (16, 1, 15, "auto", 1),  # at least one thread
    (3, 2, 0, "auto", 1),    # the remainder is left idle, never shared unevenly
])
def test_each_rank_gets_its_share_less_its_workers(cores, ranks, workers, threads, expected):
    budget = core_budget.plan(cores, ranks, workers, threads)
    assert budget.threads == expected and budget.threads_rule == "auto"
    assert budget.used <= cores or workers >= core_budget.share(cores, ranks)
    if workers < core_budget.share(cores, ranks):
        assert not budget.oversubscribed and budget.asked == ()


def test_within_the_policy_threads_times_ranks_plus_workers_never_exceed_the_cores():
    for cores in range(1, 33):
        for ranks in range(1, cores + 1):
            share = cores // ranks
            for workers in range(share):
                budget = core_budget.plan(cores, ranks, workers)
                assert budget.used <= cores and not budget.oversubscribed, (cores, ranks, workers)
                assert budget.threads + budget.workers == share


def test_a_threads_setting_asks_for_oversubscription():
    budget = core_budget.plan(2, 1, 0, 4)
    assert budget.threads == 4 and budget.threads_rule == "set"
    assert budget.used == 4 and budget.oversubscribed
    assert budget.asked == ("threads 4 beyond the share of 2 cores per rank",)
    within = core_budget.plan(4, 2, 0, 2)  # set, and within the share: not oversubscribed
    assert within.threads == 2 and within.threads_rule == "set" and not within.oversubscribed


def test_workers_and_ranks_beyond_the_cores_are_what_the_settings_asked():
    workers = core_budget.plan(2, 1, 2)
    assert workers.threads == 1 and workers.used == 3 and workers.oversubscribed
    assert workers.asked == ("num_workers 2 with a share of 2 cores per rank",)
    ranks = core_budget.plan(2, 4, 0)
    assert ranks.threads == 1 and ranks.used == 4 and ranks.oversubscribed
    assert ranks.asked[0] == "4 ranks on 2 cores"
    assert ranks.describe() == "4 ranks × (1 thread + 0 workers) = 4 of 2 cores"


@pytest.mark.parametrize("cores,ranks,expected", [(16, 1, 15), (16, 4, 3), (2, 1, 1), (2, 8, 1)])
def test_per_gpu_workers_leave_the_rank_a_core(cores, ranks, expected):
    assert core_budget.per_gpu_workers(cores, ranks) == expected
    budget = core_budget.plan(cores, ranks, core_budget.PER_GPU)
    assert budget.workers == expected and budget.threads == 1
    assert suite_mod.PER_GPU == core_budget.PER_GPU


def test_cgroup_v2_quota(tmp_path):
    (tmp_path / "proc").write_text("0::/box\n")
    (tmp_path / "box").mkdir()
    (tmp_path / "box" / "cpu.max").write_text("150000 100000\n")
    assert core_budget.cgroup_quota(tmp_path / "proc", tmp_path) == pytest.approx(1.5)
    (tmp_path / "box" / "cpu.max").write_text("max 100000\n")
    assert core_budget.cgroup_quota(tmp_path / "proc", tmp_path) is None


def test_cgroup_v1_quota(tmp_path):
    (tmp_path / "proc").write_text("5:cpu,cpuacct:/box\n4:memory:/box\n")
    folder = tmp_path / "cpu,cpuacct" / "box"
    folder.mkdir(parents=True)
    (folder / "cpu.cfs_quota_us").write_text("200000\n")
    (folder / "cpu.cfs_period_us").write_text("100000\n")
    assert core_budget.cgroup_quota(tmp_path / "proc", tmp_path) == pytest.approx(2.0)
    (folder / "cpu.cfs_quota_us").write_text("-1\n")
    assert core_budget.cgroup_quota(tmp_path / "proc", tmp_path) is None


def test_usable_cores_is_the_quota_capped_affinity(monkeypatch):
    import os

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    monkeypatch.setattr(core_budget, "cgroup_quota", lambda: 1.5)
    assert core_budget.usable_cores() == 2
    monkeypatch.setattr(core_budget, "cgroup_quota", lambda: None)
    assert core_budget.usable_cores() == 4


def test_threads_is_a_setting_in_the_cell_id_only_when_set(write_suite):
    path = write_suite("""
name: t
datasets: {tiny: {source: synthetic, params: {scale: 8}}}
backends: [pyg-neighbor]
settings: {threads: [auto, 1]}
""")
    suite, _ = suite_mod.load(path)
    ids = [c.id for c in suite_mod.expand(suite)]
    assert ids == ["pyg-neighbor/tiny/mode=cpu-cpu/workers=0/ws=1", "pyg-neighbor/tiny/mode=cpu-cpu/workers=0/ws=1/threads=1"]

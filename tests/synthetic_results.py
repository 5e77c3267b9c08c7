"""Small, valid gnnbench result files for the analysis tests: a measured cell is its rounds plus
the contract's extra_info; a run is cells, unmeasured cells, a date and a machine."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from bench.publish import results
from bench.result_format import SCHEMA_VERSION

DATASET_CARD = {"name": "toy", "num_nodes": 1000, "num_edges": 8000, "feature_dim": 16,
                "num_classes": 4, "source": "synthetic", "num_train": 600, "num_val": 200, "num_test": 1000}


def cell_id(backend: str = "pyg-neighbor", dataset: str = "toy", mode: str = "cpu-cpu",
            workers: int = 0, ws: int = 1) -> str:
    return f"{backend}/{dataset}/mode={mode}/workers={workers}/ws={ws}"


def settings_of(cid: str) -> dict:
    parts = dict(p.split("=", 1) for p in cid.split("/")[2:])
    return {"num_workers": int(parts["workers"]), "mode": parts["mode"], "world_size": int(parts["ws"]),
            "batch_size": 64, "epochs": 5, "model": parts.get("model", "sage"), "seed": 0}


def stats_of(rounds: list[float]) -> dict:
    data = np.asarray(rounds, dtype=float)
    q1, median, q3 = np.percentile(data, [25, 50, 75])
    return {"min": float(data.min()), "max": float(data.max()), "mean": float(data.mean()),
            "stddev": float(data.std(ddof=1)), "rounds": len(data), "median": float(median),
            "iqr": float(q3 - q1), "q1": float(q1), "q3": float(q3), "data": [float(x) for x in data]}


def bench(cid: str, rounds: list[float], **extra) -> dict:
    """One measured cell; `extra` overrides extra_info fields (test_acc, loader_stall, ...)."""
    backend, dataset = cid.split("/")[:2]
    info = {"cell_id": cid, "backend": backend, "stack": backend.split("-")[0], "versions": {"torch": "2.0"},
            "dataset": DATASET_CARD | {"name": dataset}, "settings": settings_of(cid),
            "seeds_per_s": 1000.0, "seeds_per_epoch": 1000.0, "edges_per_s": 10000.0, "loader_stall": 0.2, "compute_s": 0.01,
            "comm_s": 0.0, "peak_rss_bytes": 500 * 2**20, "peak_pss_bytes": 400 * 2**20,
            "total_pss_bytes": 400 * 2**20, "val_acc": 0.80, "test_acc": 0.78, "startup_s": 1.0}
    info.update(extra)
    return {"name": f"test_cell[{cid}]", "group": dataset, "extra_info": info, "stats": stats_of(rounds)}


def stage_info(epoch_s: float, shares: dict[str, float] | None = None, *, batches: int = 10,
               input_nodes: float = 2000.0, feature_bytes: float | None = None, copy_bytes: float = 0.0,
               hop_nodes: list[float] | None = None, loader_worker_s: dict | None = None) -> dict:
    """The stage timings and work counts of the shared contract (extra_info `stages`, `work`,
    `loader_worker_s`, `profile`): `shares` of an `epoch_s` epoch by stage, the rest `other`;
    `batches`: all ranks' batches per epoch, the other work counts per batch."""
    shares = dict(shares or {"sample": 0.2, "fetch": 0.3, "forward_backward": 0.4, "optimizer": 0.05, "wait": 0.05})
    shares.setdefault("other", max(0.0, 1 - sum(shares.values())))
    stages = {s: epoch_s * shares.get(s, 0.0) for s in
              ("sample", "fetch", "copy", "forward_backward", "optimizer", "allreduce", "wait", "other")}
    hops = hop_nodes or [64.0, input_nodes * 0.3, input_nodes * 0.7 - 64.0]
    work = {"batches": batches, "hop_nodes": hops, "hop_edges": [input_nodes * 2, input_nodes * 4],
            "input_nodes": input_nodes,
            "feature_bytes": feature_bytes if feature_bytes is not None else input_nodes * DATASET_CARD["feature_dim"] * 4,
            "copy_bytes": copy_bytes}
    return {"stages": stages, "work": work, "loader_worker_s": loader_worker_s, "profile": True}


CEILINGS = {"usable_cores": 2, "memcpy_bytes_per_s": 8e9, "gather_bytes_per_s": {"64": 2e9},
            "disk": {"toy/features.npy": {"seq_cold_bytes_per_s": 3e8, "seq_warm_bytes_per_s": 2.5e9,
                                          "random_cold_bytes_per_s": 8e7, "random_warm_bytes_per_s": 6e8}},
            "h2d_pinned_bytes_per_s": None, "h2d_pageable_bytes_per_s": None,
            "notes": ["no NVIDIA GPU here (nvidia-smi not found): host-to-device figures not measured"]}


def unmeasured(cid: str, status: str = "failed", reason: str = "RuntimeError: boom") -> dict:
    backend, dataset = cid.split("/")[:2]
    return {"id": cid, "status": status, "reason": reason, "backend": backend, "dataset": dataset,
            "settings": settings_of(cid)}


def run(benchmarks: list[dict], *, unmeasured_cells: list[dict] = (), suite: str = "toy",
        when: str = "2026-01-01T00:00:00+00:00", node: str = "box", cpu: str = "Test CPU",
        commit: str = "abc123", ceilings: dict | None = None) -> dict:
    ours = {"gnnbench": {"cpu_count_logical": 2, "ceilings": ceilings}} if ceilings else {}
    return {"machine_info": {"node": node, "machine": "x86_64", "cpu": {"brand_raw": cpu, "count": 2}, **ours},
            "commit_info": {"id": commit, "dirty": False},
            "datetime": when, "version": "5.1.0", "benchmarks": list(benchmarks),
            "gnnbench": {"schema_version": SCHEMA_VERSION, "suite": suite,
                         "cells": [b["extra_info"]["cell_id"] for b in benchmarks] + [u["id"] for u in unmeasured_cells]},
            "unmeasured": list(unmeasured_cells)}


def write(tmp_path: Path, name: str, data: dict) -> results.RunResult:
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return results.read(path)


def noisy_rounds(rng: np.random.Generator, median_s: float, spread: float, n: int = 10) -> list[float]:
    """Rounds around `median_s`, each off by a lognormal factor of relative spread `spread`."""
    return list(median_s * np.exp(spread * rng.standard_normal(n)))

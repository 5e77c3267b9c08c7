"""The results contract: what each measured cell puts into pytest-benchmark's `extra_info`,
and how result files are read back (by the report, and by anything else).

A result file is pytest-benchmark JSON (so `pytest-benchmark compare` reads it) plus two
top-level keys of ours: `gnnbench` (schema version, suite, baseline, cell order) and
`unmeasured` (cells that failed, timed out or were skipped: id, status, reason).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

SCHEMA_VERSION = 1
DATASET_FIELDS = ("name", "num_nodes", "num_edges", "feature_dim", "num_classes")
REQUIRED_EXTRA = ("backend", "stack", "versions", "dataset", "settings", "seeds_per_s", "edges_per_s",
                  "loader_stall", "peak_rss_bytes", "peak_pss_bytes", "val_acc", "test_acc", "startup_s")


class ResultsError(ValueError):
    pass


def extra_info(outcome, baseline: str | None = None) -> dict:
    """Contract fields of one measured cell, computed from the worker's per-epoch records."""
    rec = outcome.record
    epochs = rec["epochs"]
    seconds = sum(e["seconds"] for e in epochs)
    stall = sum(e["stall_s"] for e in epochs)
    cell = outcome.cell
    card = rec["dataset"]
    return {
        "cell_id": cell.id,
        "backend": cell.backend,
        "stack": cell.stack,
        "versions": rec["versions"],
        "device": rec.get("device"),
        "dataset": {k: card[k] for k in DATASET_FIELDS}
        | {k: card.get(k) for k in ("source", "num_train", "num_val", "num_test")}
        | {k: card[k] for k in ("num_graphs",) if k in card},  # graph-level datasets only
        "settings": cell.settings,
        "seeds_per_s": sum(e["seeds"] for e in epochs) / seconds,
        "edges_per_s": sum(e["edges"] for e in epochs) / seconds,
        "loader_stall": stall / seconds,
        "compute_s": (seconds - stall) / len(epochs),
        "batches_per_epoch": epochs[0]["batches"],
        "peak_rss_bytes": outcome.peak_rss_bytes,
        "peak_pss_bytes": outcome.peak_pss_bytes,
        "total_pss_bytes": outcome.peak_pss_bytes,
        "comm_s": sum(e.get("comm_s", 0.0) for e in epochs) / len(epochs),
        # GPU memory of the busiest rank (PyTorch's allocator peak); None where no GPU was used
        "peak_gpu_bytes": max((r["peak_gpu_bytes"] for r in rec.get("ranks") or [] if r.get("peak_gpu_bytes")), default=None),
        "ranks": ranks(outcome),
        "val_acc": rec["val_acc"],
        "test_acc": rec["test_acc"],
        "startup_s": rec["startup_s"],
        "warmup_epoch_s": [e["seconds"] for e in rec["warmup"]],
        "is_baseline": cell.id == baseline,
        **({"partition": rec["partition"]} if rec.get("partition") else {}),
    }


def ranks(outcome) -> list[dict]:
    """One entry per rank: its process tree's peak memory (sampled on this node; for ranks on
    other nodes only their own peak RSS is known) and where its epochs went."""
    out = []
    for r in outcome.record.get("ranks") or [{"rank": 0}]:
        rss, pss = outcome.rank_peaks.get(r["rank"], (r.get("self_max_rss_bytes"), None))
        out.append({"rank": r["rank"], "peak_rss_bytes": rss, "peak_pss_bytes": pss,
                    "loader_stall": r.get("loader_stall"), "compute_s": r.get("compute_s"),
                    "comm_s": r.get("comm_s"), "epoch_s": r.get("epoch_s"),
                    "peak_gpu_bytes": r.get("peak_gpu_bytes")})
    return out


def add_scaling(benchmarks: list[dict]) -> None:
    """Speedup and efficiency of each cell against world size 1 of the same configuration in
    the same run: speedup = median epoch at 1 rank / at N ranks; efficiency = speedup / N."""
    by_id = {b["extra_info"]["cell_id"]: b for b in benchmarks if "cell_id" in b.get("extra_info", {})}
    for cell_id, bench in by_id.items():
        world = bench["extra_info"]["settings"]["world_size"]
        single = by_id.get(cell_id.replace(f"/ws={world}", "/ws=1"))
        if single is None:
            continue
        speedup = single["stats"]["median"] / bench["stats"]["median"]
        bench["extra_info"]["speedup_vs_ws1"] = speedup
        bench["extra_info"]["scaling_efficiency"] = speedup / world


@dataclass
class ResultFile:
    path: Path
    data: dict

    @property
    def meta(self) -> dict:
        return self.data.get("gnnbench", {})

    @property
    def benchmarks(self) -> list[dict]:
        return self.data["benchmarks"]

    @property
    def unmeasured(self) -> list[dict]:
        return self.data.get("unmeasured", [])


def read(path: Path) -> ResultFile:
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise ResultsError(f"{path}: no such result file") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ResultsError(f"{path}: not a JSON result file ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("benchmarks"), list):
        raise ResultsError(f"{path}: not a pytest-benchmark result (no 'benchmarks' list)")
    version = data.get("gnnbench", {}).get("schema_version")
    if version is None:
        raise ResultsError(f"{path}: no 'gnnbench.schema_version': not written by gnnbench")
    if version > SCHEMA_VERSION:
        raise ResultsError(f"{path}: schema version {version} is newer than this gnnbench reads "
                           f"({SCHEMA_VERSION}); upgrade gnnbench")
    for i, bench in enumerate(data["benchmarks"]):
        missing = [k for k in REQUIRED_EXTRA if k not in bench.get("extra_info", {})]
        if missing:
            raise ResultsError(f"{path}: benchmarks[{i}] ({bench.get('name')}): extra_info lacks {', '.join(missing)}")
    return ResultFile(path, data)

"""How much memory a cell will need, from a dataset's sizes, before anything is loaded.

The estimate counts what each rank process holds: the hub arrays it loads (edges as COO, CSC
pointers, features, labels), the framework's own graph structure on top (each backend's
registry entry says how many bytes per node and edge: bench/backends/__init__.py), and a fixed
overhead for the interpreter and framework. With DDP every rank holds its own copy, so the total
grows with the world size; features in a disk-backed store (LMDB, GraphBolt's on-disk features:
bench.stores.STORES says which) are memory-mapped, shared by all ranks through the page cache and
evictable, so they are not counted per rank. A cell whose total does not fit in the memory
available now is refused before it starts, with these numbers, instead of being killed half-way.
"""

from __future__ import annotations

from bench.backends import BACKENDS
from bench.stores import features_in_memory

# Interpreter + torch + framework per process; the smoke suite measured 335-545 MiB of PSS.
PROCESS_OVERHEAD_BYTES = 600 * 2**20
FIT_FRACTION = 0.9  # leave a tenth of the available memory to the rest of the machine
INT64, FLOAT32 = 8, 4


def hub_parts(stats: dict, store: str = "memory") -> dict[str, int]:
    """The hub's arrays as one process loads them (features only where the store keeps them in it)."""
    n, e, f = stats["num_nodes"], stats["num_edges"], stats["feature_dim"]
    splits = (stats["num_train"] + stats["num_val"] + stats["num_test"]) * INT64
    # a typed graph's features: each type's own width (none for a featureless type)
    features = (sum(t["count"] * t["feature_dim"] for t in stats["node_types"].values()) if "node_types" in stats
                else n * f)
    return {"graph_bytes": 2 * e * INT64 + (n + 1) * INT64,  # COO edge_index + CSC pointers
            "feature_bytes": features * FLOAT32 if features_in_memory(store) else 0,
            "label_bytes": n * INT64 + splits}


def parts(stats: dict, backend: str, store: str = "memory") -> dict[str, int]:
    info = BACKENDS[backend]
    out = hub_parts(stats, store)
    out["graph_bytes"] += (info.structure_bytes_per_node * (stats["num_nodes"] + 1)
                           + info.structure_bytes_per_edge * stats["num_edges"])
    return {**out, "overhead_bytes": PROCESS_OVERHEAD_BYTES}


def estimate(stats: dict, backend: str, world_size: int = 1, store: str = "memory") -> dict[str, int]:
    per_rank = parts(stats, backend, store)
    per_rank["per_rank_bytes"] = sum(per_rank.values())
    per_rank["total_bytes"] = per_rank["per_rank_bytes"] * world_size
    return per_rank


def hub_bytes(stats: dict) -> int:
    return sum(hub_parts(stats).values())


def refusal(needed_bytes: int, available_bytes: int, what: str) -> str | None:
    """The reason to refuse, with the numbers, or None when it fits."""
    if needed_bytes <= FIT_FRACTION * available_bytes:
        return None
    return (f"refused: {what} needs about {gib(needed_bytes)} of memory, and this machine has "
            f"{gib(available_bytes)} available ({int(FIT_FRACTION * 100)} % of it may be used); "
            "use a smaller dataset or world size, or a larger machine")


def gib(n: int) -> str:
    return f"{n / 2**30:.2f} GiB"

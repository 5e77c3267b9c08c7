"""How much memory a cell will need, from a dataset's sizes, before anything is loaded.

The estimate counts what each rank process holds: the hub arrays it loads (edges as COO, CSC
pointers, features, labels), the framework's own graph structure on top, and a fixed overhead
for the interpreter and framework. With DDP every rank holds its own copy, so the total grows
with the world size; features in a disk-backed store (LMDB, GraphBolt's on-disk features) are
memory-mapped, shared by all ranks through the page cache and evictable, so they are not counted
per rank. A cell whose total does not fit in the memory available now is refused
before it starts, with these numbers, instead of being killed half-way.
"""

from __future__ import annotations

# Interpreter + torch + framework per process; the smoke suite measured 335-545 MiB of PSS.
PROCESS_OVERHEAD_BYTES = 600 * 2**20
FIT_FRACTION = 0.9  # leave a tenth of the available memory to the rest of the machine
INT64, FLOAT32 = 8, 4


def parts(stats: dict, backend: str, store: str = "memory") -> dict[str, int]:
    n, e, f = stats["num_nodes"], stats["num_edges"], stats["feature_dim"]
    graph = 2 * e * INT64 + (n + 1) * INT64  # hub: COO edge_index + CSC pointers
    if backend == "pyg-neighbor":
        graph += (n + 1) * INT64 + 2 * e * INT64  # NeighborLoader's CSC: colptr, row, permutation
    elif backend == "dgl-graphbolt":
        graph += (n + 1) * INT64 + e * INT64  # fused CSC sampling graph
    splits = (stats["num_train"] + stats["num_val"] + stats["num_test"]) * INT64
    features = n * f * FLOAT32 if store == "memory" else 0
    return {"graph_bytes": graph, "feature_bytes": features, "label_bytes": n * INT64 + splits,
            "overhead_bytes": PROCESS_OVERHEAD_BYTES}


def estimate(stats: dict, backend: str, world_size: int = 1, store: str = "memory") -> dict[str, int]:
    per_rank = parts(stats, backend, store)
    per_rank["per_rank_bytes"] = sum(per_rank.values())
    per_rank["total_bytes"] = per_rank["per_rank_bytes"] * world_size
    return per_rank


def hub_bytes(stats: dict) -> int:
    p = parts(stats, "hub")
    return p["graph_bytes"] + p["feature_bytes"] + p["label_bytes"]


def refusal(needed_bytes: int, available_bytes: int, what: str) -> str | None:
    """The reason to refuse, with the numbers, or None when it fits."""
    if needed_bytes <= FIT_FRACTION * available_bytes:
        return None
    return (f"refused: {what} needs about {gib(needed_bytes)} of memory, and this machine has "
            f"{gib(available_bytes)} available ({int(FIT_FRACTION * 100)} % of it may be used); "
            "use a smaller dataset or world size, or a larger machine")


def gib(n: int) -> str:
    return f"{n / 2**30:.2f} GiB"

"""How much memory a cell will need, from a dataset's sizes, before anything is loaded: what each
rank holds privately is counted per rank, what the node holds once (the hub's read-only maps,
shared through the page cache, pinned-cuda's one pinned copy) once; features in a disk-backed store
are evictable and not counted. A cell that does not fit in the memory available now is refused
before it starts, with these numbers, instead of being killed half-way."""

from __future__ import annotations

from bench import modes
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


def estimate(stats: dict, backend: str, world_size: int = 1, store: str = "memory",
             mode: str = "cpu-cpu") -> dict[str, int]:
    """The bytes `world_size` ranks on one node need, by part and per rank, shared and in total. What each
    rank holds privately and what the node holds once follows the mode's storage and the backend's registry
    entry (`structure_on_hub_maps`, `host_features_once`); cuda-cuda maps features straight to the GPU."""
    info, storage = BACKENDS[backend], modes.mode(mode).storage
    hub = hub_parts(stats, store)
    structure = (info.structure_bytes_per_node * (stats["num_nodes"] + 1)
                 + info.structure_bytes_per_edge * stats["num_edges"])
    rank = {"graph_bytes": 0 if info.structure_on_hub_maps else structure,
            "feature_bytes": hub["feature_bytes"] if storage == modes.CPU else 0,
            "label_bytes": 0, "overhead_bytes": PROCESS_OVERHEAD_BYTES}
    node = {"graph_bytes": hub["graph_bytes"] + (structure if info.structure_on_hub_maps and storage != modes.CUDA else 0),
            "feature_bytes": hub["feature_bytes"] if storage == modes.PINNED or info.host_features_once else 0,
            "label_bytes": hub["label_bytes"], "overhead_bytes": 0}
    per_rank, shared = sum(rank.values()), sum(node.values())
    return {**{k: rank[k] + node[k] for k in rank}, "per_rank_bytes": per_rank, "shared_bytes": shared,
            "total_bytes": per_rank * world_size + shared}


def hub_bytes(stats: dict) -> int:
    return sum(hub_parts(stats).values())


def refusal(needed_bytes: int, available_bytes: int, what: str) -> str | None:
    return None if needed_bytes <= FIT_FRACTION * available_bytes else (
        f"refused: {what} needs about {gib(needed_bytes)} of memory, and this machine has "
        f"{gib(available_bytes)} available ({int(FIT_FRACTION * 100)} % of it may be used); "
        "use a smaller dataset or world size, or a larger machine")


def gib(n: int) -> str:
    return f"{n / 2**30:.2f} GiB"

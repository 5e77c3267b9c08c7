"""Where a rank's memory goes: its PSS split into what holds it, from /proc/self/smaps snapshots
taken at each phase boundary (PHASES), the peak one broken down. The heap is attributed by the
phase it grew in (PhaseMemory._attribute_heap). Linux only; without smaps the breakdown is None.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

PHASES = ("start", "imports", "dataset", "pipeline", "epochs", "evaluation")
PARTS = ("interpreter_framework", "graph_structure", "features", "loader_sampler", "model_optimizer", "other")
KINDS = ("library", "structure", "features", "shm", "anon")
STRUCTURE_FILES = {f"{name}.npy" for name in ("edge_index", "csc_indptr", "labels", "train_idx", "val_idx", "test_idx",
                                               "graphbolt_indices", "graphbolt_indptr")}
FEATURE_SUFFIXES = (".mdb", ".lmdb", ".npy", ".sqlite", ".db")  # data files of the feature stores
KIB = 1024
STILL_TRIES, STILL_WAIT_S = 20, 0.02  # at most 0.4 s at a phase boundary, outside every measured epoch


def kind_of(path: str) -> str:
    """What a mapping of smaps holds, from its path ("" for anonymous memory)."""
    if not path or path.startswith("[heap]") or path.startswith("[anon"):
        return "anon"
    if path.startswith(("/dev/shm/", "/memfd:", "/SYSV")):  # torch's file_descriptor strategy: memfd
        return "shm"
    name = Path(path.removesuffix(" (deleted)")).name
    if name in STRUCTURE_FILES:
        return "structure"
    if name.endswith(FEATURE_SUFFIXES):
        return "features"
    return "library"  # .so files, [stack], [vdso], ...: the interpreter's and framework's own


def read_smaps(path: str = "/proc/self/smaps") -> dict[str, dict[str, int]] | None:
    """{kind: {"pss", "private", "rss"}} in bytes, summed over the mappings of one process."""
    totals = {k: {"pss": 0, "private": 0, "rss": 0} for k in KINDS}
    try:
        text = Path(path).read_text()
    except OSError:
        return None
    current = totals["anon"]
    for line in text.splitlines():
        head, _, rest = line.partition(" ")
        if "-" in head and not head.endswith(":"):  # a mapping's header: address range, perms, ...
            fields = line.split(None, 5)
            current = totals[kind_of(fields[5] if len(fields) > 5 else "")]
            continue
        key = head.rstrip(":")
        if key == "Pss":
            current["pss"] += int(rest.split()[0]) * KIB
        elif key == "Private_Dirty" and current is not totals["shm"] or key == "Private_Clean" and current is totals["anon"]:
            # a clean file page is still the page cache's (evictable); shared memory is shared by design
            current["private"] += int(rest.split()[0]) * KIB
        elif key == "Rss":
            current["rss"] += int(rest.split()[0]) * KIB
    return totals


def still_within(pss: int) -> int:
    """How far the kernel's PSS may move while smaps is read for a snapshot to count as one moment."""
    return max(4 * 2**20, pss // 100)


def read_rollup_pss(path: str = "/proc/self/smaps_rollup") -> int | None:
    """The process's PSS as the kernel sums it (Linux 4.14+), in bytes; None where unreadable."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path(path).read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) * KIB
    return None


def own_pss(snapshot: dict) -> int:
    """A snapshot's PSS less the libraries' shared pages, which move with whatever else on the
    machine maps them, not with what this phase did: the peak phase is where this is largest."""
    return sum(v["pss"] for k, v in snapshot.items() if k != "library") + snapshot["library"]["private"]


class PhaseMemory:
    """Snapshots of this process's memory at phase boundaries, and the breakdown they give."""

    def __init__(self, smaps: str = "/proc/self/smaps"):
        self.smaps = smaps
        self.snapshots: dict[str, dict | None] = {}
        self.measured: dict[str, int | None] = {}  # the kernel's PSS with each snapshot (smaps_rollup)

    def take(self, phase: str) -> None:
        """A snapshot of a still moment: retaken until the PSS before and after reading smaps agree."""
        rollup = self.smaps + "_rollup"
        for attempt in range(STILL_TRIES):
            if attempt:
                time.sleep(STILL_WAIT_S)
            before = read_rollup_pss(rollup)
            snapshot = read_smaps(self.smaps)
            after = read_rollup_pss(rollup)
            if snapshot is None or before is None or after is None or abs(after - before) <= still_within(after):
                break
        self.snapshots[phase], self.measured[phase] = snapshot, after

    def breakdown(self, model_optimizer_bytes: int = 0) -> dict | None:
        """The peak snapshot's pss_bytes (the parts' sum, exactly), phase, parts {PART: {"shared",
        "private"}}, measured_pss_bytes (smaps_rollup), snapshots and model_optimizer_bytes."""
        if not (taken := [p for p in PHASES if self.snapshots.get(p)]):
            return None
        peak = max(taken, key=lambda p: own_pss(self.snapshots[p]))
        last = self.snapshots[peak]
        parts = {p: {"shared": 0, "private": 0} for p in PARTS}

        def add(part: str, pss: int, private: int) -> None:
            private = max(0, min(private, pss))
            parts[part]["private"] += private
            parts[part]["shared"] += max(0, pss - private)

        for kind, part in (("library", "interpreter_framework"), ("structure", "graph_structure"),
                           ("features", "features")):
            add(part, last[kind]["pss"], last[kind]["private"])
        shm_at_build = min((self.snapshots.get("pipeline") or {}).get("shm", {}).get("pss", 0), last["shm"]["pss"])
        add("graph_structure", shm_at_build, 0)
        add("loader_sampler", last["shm"]["pss"] - shm_at_build, last["shm"]["private"])
        self._attribute_heap(last["anon"], self._heap_growth(peak), model_optimizer_bytes, add)
        total = sum(v["pss"] for v in last.values())
        add("other", max(0, total - sum(v["shared"] + v["private"] for v in parts.values())), 0)
        return {"pss_bytes": total, "phase": peak, "parts": parts, "model_optimizer_bytes": int(model_optimizer_bytes),
                "measured_pss_bytes": self.measured.get(peak),
                "snapshots": [{"phase": p, **{k: sum(v[k] for v in s.values()) for k in ("pss", "private", "rss")},
                               "measured_pss": self.measured.get(p)}
                              for p in PHASES if (s := self.snapshots.get(p))]}

    def _heap_growth(self, until: str) -> dict[str, int]:
        """How much the heap grew in each phase up to `until` (evaluation counts with the epochs)."""
        growth, previous = {}, 0
        for phase in PHASES[:PHASES.index(until) + 1]:
            snap = self.snapshots.get(phase)
            if snap is None:
                continue
            key = "epochs" if phase == "evaluation" else phase
            growth[key] = growth.get(key, 0) + max(0, snap["anon"]["pss"] - previous)
            previous = snap["anon"]["pss"]
        return growth

    @staticmethod
    def _attribute_heap(heap: dict, growth: dict[str, int], model_optimizer_bytes: int, add) -> None:
        """The heap at the peak split by the phase it grew in, capped so the parts sum to it."""
        left = heap["pss"]
        shared_share = max(0, heap["pss"] - heap["private"])  # pages shared after fork: rare
        model = min(model_optimizer_bytes, growth.get("pipeline", 0) + growth.get("epochs", 0))
        order = [("interpreter_framework", growth.get("start", 0) + growth.get("imports", 0)),
                 ("features", growth.get("dataset", 0)),
                 ("model_optimizer", model),
                 ("graph_structure", max(0, growth.get("pipeline", 0) - model)),
                 ("loader_sampler", max(0, growth.get("epochs", 0) - max(0, model - growth.get("pipeline", 0))))]
        for part, amount in order:
            amount = min(amount, left)
            shared = min(shared_share, amount)
            add(part, amount, amount - shared)
            shared_share -= shared
            left -= amount
        add("other", left, max(0, left - shared_share))


def model_optimizer_bytes(pipe) -> int:
    """Bytes of the model's parameters, their gradients and the optimizer's state tensors."""
    model = getattr(pipe, "model", None)
    if model is None:
        return 0
    optimizer = getattr(pipe, "optimizer", None)
    tensors = [t for param in model.parameters() for t in (param, param.grad) if t is not None]
    tensors += [value for state in (optimizer.state.values() if optimizer is not None else ())
                for value in state.values() if hasattr(value, "element_size")]
    return sum(t.numel() * t.element_size() for t in tensors)

"""Where a rank's memory goes: its PSS split into what holds it, from /proc/self/smaps.

The worker takes a snapshot at each phase boundary of a cell (PHASES: after the interpreter
starts, after the framework is imported, after the dataset is loaded, after the pipeline and
model are built, after the training epochs, after evaluation); the breakdown is of the snapshot
with the highest PSS (the rank's peak as far as phase ends see it). Each snapshot is of a still
moment: where the kernel's PSS moved while smaps was read, it is taken again (`take`). A snapshot sums smaps' Pss and Private_* per kind
of mapping:
  library     files mapped by the interpreter and the framework (.so, .py caches, locales)
  structure   the hub's structure files (edge_index, csc_indptr, labels, splits), memory-mapped
  features    the features' files (the hub's features.npy, a store's files), memory-mapped
  shm         shared memory (/dev/shm, memfd): tensors moved there by share_memory_(), and the
              batches DataLoader workers hand over
  anon        the process's own heap (private unless forked)
File-backed kinds name themselves. The heap does not, so it is attributed by when it grew:
  - until the framework is imported: interpreter + framework;
  - while the dataset loads: features read into the process (the in-memory store);
  - while the pipeline is built: the framework's own copy of the graph structure (e.g. a
    sorted CSC) and feature-store conversions, less the model's parameters;
  - during the epochs and evaluation: the loader's and sampler's buffers, less the gradients
    and optimizer state (their bytes are counted from the tensors themselves).
Shared memory that exists once the pipeline is built is the framework's structure copy; what
appears later is the loader's.

The breakdown (`memory_breakdown` in the worker's record, one per rank):
  {"pss_bytes": PSS at the highest snapshot (the sum of the parts, exactly),
   "phase": the phase of that snapshot,
   "parts": {PART: {"shared": bytes, "private": bytes}} for PART in PARTS, where "private" is
            what only this rank can use (its heap: Private_Clean + Private_Dirty; dirty pages of
            files) and "shared" the rest of its PSS: its proportional share of pages other
            processes map too, clean page-cache pages of files (shared with the next rank to map
            them, and evictable), shared memory,
   "measured_pss_bytes": the kernel's own PSS of the rank (smaps_rollup, what the runner's sampler
            reads) read with the highest snapshot, right after it: what the parts add up to,
            measured at the same moment (None where there is no smaps_rollup),
   "snapshots": [{"phase": PHASE, "pss": bytes, "private": bytes, "rss": bytes, "measured_pss": bytes}, ...],
   "model_optimizer_bytes": parameters + gradients + optimizer state, as counted}
Linux only; where /proc/self/smaps cannot be read, snapshots are None and so is the breakdown.
"""

from __future__ import annotations

import time
from pathlib import Path

PHASES = ("start", "imports", "dataset", "pipeline", "epochs", "evaluation")
PARTS = ("interpreter_framework", "graph_structure", "features", "loader_sampler", "model_optimizer", "other")
KINDS = ("library", "structure", "features", "shm", "anon")
STRUCTURE_FILES = {f"{name}.npy" for name in ("edge_index", "csc_indptr", "labels", "train_idx", "val_idx", "test_idx",
                                               "graphbolt_indices", "graphbolt_indptr")}
FEATURE_SUFFIXES = (".mdb", ".lmdb", ".npy", ".sqlite", ".db")  # data files of the feature stores
KIB = 1024


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
            # a clean file page mapped by this process alone is still the page cache's (evictable,
            # shared with the next process to map it); shared memory is shared by design
            current["private"] += int(rest.split()[0]) * KIB
        elif key == "Rss":
            current["rss"] += int(rest.split()[0]) * KIB
    return totals


STILL_TRIES, STILL_WAIT_S = 20, 0.02  # at most 0.4 s at a phase boundary, outside every measured epoch


def still_within(pss: int) -> int:
    """How far the kernel's PSS may move while smaps is read for a snapshot to count as one moment."""
    return max(4 * 2**20, pss // 100)


def read_rollup_pss(path: str = "/proc/self/smaps_rollup") -> int | None:
    """The process's PSS as the kernel sums it (Linux 4.14+), in bytes; None where unreadable."""
    try:
        for line in Path(path).read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) * KIB
    except (OSError, ValueError, IndexError):
        pass
    return None


def own_pss(snapshot: dict) -> int:
    """A snapshot's PSS less the shared pages of the libraries: those divide among every process
    that maps them (other ranks, other cells, anything on the machine using the same stack), so
    they move with the machine, not with what this phase did. The peak phase is the one where the
    rank's own memory (heap, data, mapped dataset files, its private library pages) is largest."""
    return sum(v["pss"] for k, v in snapshot.items() if k != "library") + snapshot["library"]["private"]


class PhaseMemory:
    """Snapshots of this process's memory at phase boundaries, and the breakdown they give."""

    def __init__(self, smaps: str = "/proc/self/smaps"):
        self.smaps = smaps
        self.snapshots: dict[str, dict | None] = {}
        self.measured: dict[str, int | None] = {}  # the kernel's PSS with each snapshot (smaps_rollup)

    def take(self, phase: str) -> None:
        """A snapshot of a still moment: the kernel's PSS read before and after smaps agree. Memory
        can move while smaps is read (a framework's native threads free a batch's buffers just after
        an epoch: 515 MiB before, 483 after, on a busy machine), and a snapshot taken across that
        would not be one moment; it is taken again, a little later, until still (STILL_TRIES)."""
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
        taken = [p for p in PHASES if self.snapshots.get(p)]
        if not taken:
            return None
        peak = max(taken, key=lambda p: own_pss(self.snapshots[p]))
        last = self.snapshots[peak]
        growth = self._heap_growth(peak)
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
        self._attribute_heap(last["anon"], growth, model_optimizer_bytes, add)
        total = sum(v["pss"] for v in last.values())
        attributed = sum(v["shared"] + v["private"] for v in parts.values())
        add("other", max(0, total - attributed), 0)
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
        """The heap at the peak, split by the phase in which it grew (see the module's docstring);
        growth is taken in order and capped by what is there, so the parts sum to it."""
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
    total = 0
    for param in model.parameters():
        total += param.numel() * param.element_size()
        if param.grad is not None:
            total += param.grad.numel() * param.grad.element_size()
    optimizer = getattr(pipe, "optimizer", None)
    for state in (optimizer.state.values() if optimizer is not None else ()):
        for value in state.values():
            if hasattr(value, "element_size"):
                total += value.numel() * value.element_size()
    return total

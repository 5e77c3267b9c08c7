"""Time per stage and work per batch: what `profile: true` (the default) turns on.

Stages (STAGES) split an epoch into disjoint wall-clock parts that add up to it
(docs/reading-results.md). A wrapper around the framework's sampler or feature gather stamps its
seconds on the batch it produced (`stamp`); the training loop reads the stamp off: seconds spent in
its own thread are its stages, the rest of next() is `wait`, seconds spent elsewhere overlapped
training (`loader_worker_s`). Work (`BatchWork`) is counted alike for every backend, within a budget
of the training thread's time, and summed apart over the full batches. Stack side.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field

from bench.settings import WORK_BUDGET  # the share of an epoch counting its batches' work may take

STAGES = ("sample", "fetch", "copy", "forward_backward", "optimizer", "allreduce", "wait", "other")
LABELS = {"forward_backward": "forward/backward", "allreduce": "all-reduce"}


def label(stage: str) -> str:
    """A stage's name as tables show it."""
    return LABELS.get(stage, stage)


def split_line(recorded: dict | None) -> str | None:
    """A recorded `stages` dict as one line, binding stage first: 'fetch 61 % · sample 20 % · ...'."""
    whole = sum(float(recorded.get(s) or 0.0) for s in STAGES) if recorded else 0.0
    if not whole:
        return None
    parts = sorted(((float(recorded.get(s) or 0.0) / whole, s) for s in STAGES), reverse=True)
    return " · ".join(f"{label(s)} {100 * share:.0f} %" for share, s in parts if share >= 0.005)


STAMP = "gnnbench_stamp"  # the attribute a batch carries its loader seconds in
STARTED = "_gnnbench_started"  # perf_counter when a stage timed by start/finish began
BYTES = "_gnnbench_bytes"  # bytes such a stage moves to the device, noted where it began

_perf = time.perf_counter


def here() -> tuple[int, int]:
    """Where code runs: (process, thread)."""
    return os.getpid(), threading.get_ident()


def stamp(batch, stage: str, seconds: float, nbytes: int = 0, carried: list | None = None):
    """Add `seconds` of `stage` (run here) to the batch's stamp; `carried`: an earlier object's
    stamps of the same batch (PyG's SamplerOutput before it became a Data)."""
    entries = carried if carried is not None else (vars(batch).get(STAMP) or [])
    entries.append((stage, here(), seconds, nbytes))
    # in the object's own __dict__, past PyG Data's __setattr__ (which would file it among the graph's
    # attributes); a Data pickles its __dict__, so the stamp still travels from a worker
    object.__setattr__(batch, STAMP, entries)
    return batch


def take_stamp(batch) -> list:
    """The batch's stamp, removed from it (so the model never sees it)."""
    return vars(batch).pop(STAMP, None) or []


def timed(fn, stage: str, sync=None):
    """`fn` timed as `stage` (`sync` before the clock stops): its result carries its argument's stamps too."""

    def run(item, *args, **kwargs):
        started = _perf()
        out = fn(item, *args, **kwargs)
        if sync is not None:
            sync()
        return stamp(out, stage, _perf() - started, carried=vars(item).get(STAMP) if item is not out else None)

    return run


def start(batch):
    """Note when a stage of several framework steps starts (its end: `finish`)."""
    setattr(batch, STARTED, _perf())
    return batch


def finish(stage: str, sync=None):
    """The end of a stage begun with `start`: stamp the seconds since."""

    def run(batch):
        if sync is not None:
            sync()
        return stamp(batch, stage, _perf() - vars(batch).pop(STARTED), vars(batch).pop(BYTES, 0))

    return run


def cuda_sync(device):
    """A function that waits for `device` where it is a GPU, else None (nothing to wait for)."""
    if getattr(device, "type", "cpu") != "cuda":
        return None
    import torch

    return torch.cuda.synchronize


@dataclass
class BatchWork:
    """One batch's work: what a backend's `work` returns."""
    hop_nodes: list[int]  # [seeds, nodes first reached at hop 1, ...]: sum(hop_nodes) == input_nodes
    hop_edges: list[int]  # [sampled edges of hop 1 (ending at the seeds), of hop 2, ...]
    input_nodes: int  # nodes whose features were fetched
    feature_bytes: int  # bytes of features gathered
    # the rows each layer outputs and the edges it aggregates over, input layer first (empty without
    # a model): GraphBolt's block destinations; PyG's whole subgraph, or with trim_to_layer its hops
    layer_nodes: list[int] = field(default_factory=list)
    layer_edges: list[int] = field(default_factory=list)
    typed: dict | None = None  # typed cells: hop_nodes per node type, hop_edges per relation (TYPED)
    # the link task: positive seed edges (a seed; hop_nodes[0] is their unique ends) and negatives
    seed_edges: int | None = None
    negatives: int | None = None


class Work:
    """One epoch's work: `batches` in all, the counted ones' `rows` and the bytes copied; a counted
    batch of `batch_size` seeds is a full one (also summed apart)."""

    def __init__(self, batch_size: int | None = None):
        self.batches = 0
        self.batch_size = batch_size
        self.rows: list[BatchWork] = []
        self.copy_bytes = 0

    def as_dict(self) -> dict:
        """The epoch's sums, as the result file's `work` holds them."""
        links = any(r.seed_edges is not None for r in self.rows)  # a link batch: its seeds are positive edges

        def sums(rows) -> tuple[dict, dict]:
            out, typed = {key: [] for key in LISTS}, {}
            for row in rows:
                for key in LISTS:
                    _add_into(out[key], getattr(row, key))
                if row.typed:
                    add_typed(typed, row.typed)
            out.update({key: sum(int(getattr(r, key) or 0) for r in rows) for key in LINK_COUNTS if links})
            return out, typed

        def seeds(row):
            return row.seed_edges if links else (int(row.hop_nodes[0]) if len(row.hop_nodes) else None)

        full_rows = [r for r in self.rows if self.batch_size is not None and seeds(r) == self.batch_size]
        (lists, typed), (full, full_typed) = sums(self.rows), sums(full_rows)
        out = {"batches": self.batches, "counted": len(self.rows), **lists,
               "input_nodes": sum(int(r.input_nodes) for r in self.rows),
               "feature_bytes": sum(int(r.feature_bytes) for r in self.rows),
               "copy_bytes": self.copy_bytes, "full": {"counted": len(full_rows), **full}}
        if typed:  # a typed cell's breakdown (bench/backends/typed.py): per node type and relation, per hop
            out["typed"], out["full"]["typed"] = typed, full_typed
        return out


# the per-hop and per-layer lists of a Work (summed element by element)
LISTS = ("hop_nodes", "hop_edges", "layer_nodes", "layer_edges")
LINK_COUNTS = ("seed_edges", "negatives")  # a link batch's counts (summed), absent elsewhere


# a typed breakdown: {"hop_nodes": {node type: [per hop]}, "hop_edges": {"src:name:dst": [per hop]}}
TYPED = ("hop_nodes", "hop_edges")


def add_typed(total: dict, typed: dict) -> None:
    """Sum one typed breakdown into another, element by element per type and relation."""
    for key in TYPED:
        into = total.setdefault(key, {})
        for name, values in (typed.get(key) or {}).items():
            _add_into(into.setdefault(name, []), values)


def _add_into(total: list, values) -> None:
    total.extend([0] * (len(values) - len(total)))
    for i, v in enumerate(values):
        total[i] += int(v)


class EpochClock:
    """One epoch's stages, in the training thread: `loaded` after each next(), `begin_step`,
    `mark(stage)` where each of the step's stages ends, `split` at the end."""

    def __init__(self, sync=None, work_budget: float = WORK_BUDGET, batch_size: int | None = None):
        self.sync = sync  # the training device's synchronize, on a GPU
        self.work_budget = work_budget
        self.started = _perf()
        self.counting = 0.0  # seconds spent counting work so far
        self.me = here()
        self.seconds = dict.fromkeys(STAGES, 0.0)
        self.elsewhere = dict.fromkeys(("sample", "fetch"), 0.0)
        self.overlapped = False  # some loader stage ran outside this thread
        self.work = Work(batch_size)
        self.last = 0.0
        self.loads: list[tuple[float, list]] = []  # (seconds blocked in next(), the batch's stamp)

    def loaded(self, blocked: float, batch) -> None:
        """`blocked` seconds in next() produced `batch` (None at the end)."""
        self.loads.append((blocked, take_stamp(batch) if batch is not None else ()))

    def _settle(self) -> None:
        for blocked, entries in self.loads:
            inline = 0.0
            for stage, where, seconds, nbytes in entries:
                self.work.copy_bytes += nbytes
                if where == self.me:
                    self.seconds[stage] += seconds
                    inline += seconds
                else:  # overlapped training
                    self.overlapped = True
                    self.elsewhere[stage] = self.elsewhere.get(stage, 0.0) + seconds
            self.seconds["wait"] += max(blocked - inline, 0.0)
        self.loads = []

    def count(self, work, batch) -> None:
        """Count `batch`'s work unless counting has taken over `work_budget` of the epoch so far
        (the first batch always): reading unreported samples off a batch costs a few percent."""
        now = _perf()
        self.work.batches += 1
        if self.work.rows and self.counting > self.work_budget * (now - self.started):
            return
        self.work.rows.append(work(batch))
        self.counting += _perf() - now

    def begin_step(self) -> None:
        """The step starts now."""
        self.last = _perf()

    def mark(self, stage: str, nbytes: int = 0) -> None:
        """The step's `stage` ends now (after the device has finished it)."""
        if self.sync is not None:
            self.sync()
        now = _perf()
        self.seconds[stage] += now - self.last
        self.work.copy_bytes += nbytes
        self.last = now

    def split(self, epoch_seconds: float, allreduce_seconds: float) -> dict:
        """The epoch's stages, adding up to `epoch_seconds` (all-reduce out of the backward it overlaps)."""
        self._settle()
        out = dict(self.seconds, other=0.0)
        out["allreduce"] = min(allreduce_seconds, out["forward_backward"])
        out["forward_backward"] -= out["allreduce"]
        out["other"] = max(epoch_seconds - sum(out.values()), 0.0)
        return out

    def worker_seconds(self) -> dict | None:
        """Loader seconds spent outside the training thread (overlapping it), or None."""
        self._settle()
        return dict(self.elsewhere) if self.overlapped else None


def layer_work(hop_nodes: list[int], hop_edges: list[int], trimmed: bool) -> tuple[list[int], list[int]]:
    """(layer_nodes, layer_edges) of a model run on a NeighborLoader subgraph: every layer on the
    whole subgraph, or with trim_to_layer layer i (from 0) on hops 0..L-i's nodes and 1..L-i's edges."""
    layers = len(hop_edges)
    if not trimmed:
        return [sum(hop_nodes)] * layers, [sum(hop_edges)] * layers
    return ([sum(hop_nodes[:layers - i + 1]) for i in range(layers)],
            [sum(hop_edges[:layers - i]) for i in range(layers)])


def subgraph_work(hop_nodes, hop_edges, input_nodes: int, feature_bytes: int, modelled: bool, trimmed: bool = False,
                  **extra) -> BatchWork:
    """A NeighborLoader batch's BatchWork: its layers' work by `layer_work` (none without a model)."""
    layers = layer_work(hop_nodes, hop_edges, trimmed) if modelled else ([], [])
    return BatchWork(hop_nodes, hop_edges, input_nodes, feature_bytes, *layers, **extra)


def tensor_bytes(tensors) -> int:
    """The bytes of some tensors (other items skipped)."""
    return sum(int(t.numel()) * t.element_size() for t in tensors if hasattr(t, "element_size"))

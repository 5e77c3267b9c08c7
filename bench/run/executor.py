"""The executor: what runs one cell, for every scheduler (one cell at a time in bench/run/session.py,
cells in turns in bench/run/paired.py): a cell prepared (stacks, dataset, store, memory; or the
outcome that stops it), launched by the runner, its outcome made the result file's entry and kept in
the journal. It holds no plan: which cells, in which groups and order, is the session's."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from bench import modes
from bench.backends import BACKENDS
from bench.backends.stages import split_line
from bench.machine import core_budget, gpus
from bench.machine.core_budget import usable_cores
from bench.machine.load import HIGH_LOAD
from bench.run import record, suite as suite_mod
from bench.run.prepare import Preparation, PreparedCell
from bench.run.runner import Launch, Outcome, launch_cell
from bench.run.suite import Cell


@dataclass(frozen=True)
class Finished:
    """A finished cell as the result file holds it: a benchmark entry (measured) or an `unmeasured` entry."""
    cell_id: str
    status: str
    reason: str
    entry: dict

    @property
    def measured(self) -> bool:
        return self.status == "ok"

    @property
    def epochs(self) -> list[float]:
        return list(self.entry["stats"]["data"]) if self.measured else []

    @classmethod
    def of(cls, outcome: Outcome, baseline: str | None) -> Finished:
        entry = (record.benchmark_entry(outcome, baseline) if outcome.status == "ok"
                 else record.unmeasured_entry(outcome))
        return cls(outcome.cell.id, outcome.status, outcome.reason, entry)


@dataclass
class Executor:
    """Runs cells one by one for a scheduler; `finished` holds every cell's Finished as it ends."""
    selected: list[Cell]
    baseline: str | None
    suite_name: str
    requires_gpu: bool
    cache: Path
    launch: Launch
    preparation: Preparation
    journal: object  # bench.run.session.Journal: append(done, cell), path
    say: Callable[..., None]
    finished: dict[str, Finished] = field(default_factory=dict)
    ran_now: set[str] = field(default_factory=set)  # the cells measured now (not kept from a journal)
    _gpus: gpus.Gpus | None = None

    def run_one(self, cell: Cell) -> Finished:
        """One cell alone: prepared, launched, its outcome kept (the one-at-a-time scheduler)."""
        self.say(f"\n{self.position(cell)}")
        resolved, prepared = self.prepared(cell)
        outcome = prepared if isinstance(prepared, Outcome) else self.start(resolved, prepared)
        return self.after_launch(cell, resolved, outcome)

    def position(self, cell: Cell) -> str:
        """`[3/8] CELL-ID`: the cell's place among those the run selected."""
        ids = [c.id for c in self.selected]
        return f"[{ids.index(cell.id) + 1}/{len(ids)}] {cell.id}" if cell.id in ids else cell.id

    def prepared(self, cell: Cell) -> tuple[Cell, PreparedCell | Outcome]:
        """The cell as it runs here, and it prepared (stacks, memory, dataset, store) or the outcome that stops it."""
        resolved = suite_mod.resolve_workers(cell, usable_cores(), self.launch.nnodes)  # as it runs here
        outcome = self.node_refusal(resolved) or self.gpu_refusal(resolved)
        if outcome is None and resolved is not cell:
            self.say(f"  num_workers: per-gpu -> {resolved.settings.num_workers} on this machine")
        return resolved, outcome or self.preparation.prepare(resolved)

    def after_launch(self, cell: Cell, resolved: Cell, outcome: Outcome) -> Finished:
        """What the cell's outcome leaves: said, with its notes, as the result file's entry, and kept."""
        if outcome.status == "failed" and (label := modes.known_worker_failure(
                resolved.settings.mode, resolved.settings.num_workers, outcome.reason)):
            outcome.reason = f"{label}: {outcome.reason}"
        busy = (f" (other work kept {outcome.other_load:.0%} of the machine busy meanwhile: times suspect)"
                if outcome.other_load is not None and outcome.other_load >= HIGH_LOAD else "")
        self.say(f"\r  -> {outcome.status}"
                 + (f": {outcome.reason.splitlines()[0]}" if outcome.reason else f" in {outcome.wall_s:.1f} s") + busy)
        done = Finished.of(outcome, self.baseline)
        notes = self.cell_notes(resolved)
        for note in notes:
            self.say(f"  note: {note}")
        if notes and done.measured:
            done.entry.setdefault("extra_info", {})["notes"] = notes
        if done.measured and (split := split_line(done.entry.get("extra_info", {}).get("stages"))):
            self.say(f"  where the epoch went: {split}")
        self.keep(cell, done)
        return done

    def keep(self, cell: Cell, done: Finished) -> None:
        self.finished[cell.id] = done
        self.ran_now.add(cell.id)
        try:
            self.journal.append(done, cell)  # survives a crash of this process
        except OSError as exc:
            self.say(f"  journal: cannot write {self.journal.path} ({exc.strerror or exc}); "
                     "the run goes on and keeps its cells for the result file")

    def cell_notes(self, cell: Cell) -> list[str]:
        """What a reader of this cell's numbers must know (oversubscription, a GPU cell's unverified paths)."""
        notes, cores = [], usable_cores()
        local_ranks = max(1, cell.settings.world_size // max(1, self.launch.nnodes))
        budget = core_budget.plan(cores, local_ranks, cell.settings.num_workers, cell.settings.threads)
        if local_ranks > cores:
            notes.append(f"{local_ranks} ranks on {cores} usable core(s): the ranks share cores, so the times "
                         f"show oversubscription as much as scaling ({budget.describe()})")
        elif budget.threads_rule != core_budget.AUTO and budget.oversubscribed:
            notes.append(f"{budget.describe()}: oversubscribed as the settings ask ({'; '.join(budget.asked)})")
        if modes.mode(cell.settings.mode).needs_gpu:
            if cell.settings.profile:
                notes.append("stages timed with the GPU synchronised at each boundary: the overlap of pinned, UVA "
                             "and non_blocking copies is given up here; a profile=off twin gives the speed")
            notes.append("shown on one H100 and one H200 (results/gpu-h100, results/gpu-h200: PyG's node, typed and "
                         "link cells, one rank, sampled by torch-sparse and by pyg-lib): the start "
                         "check against a real driver and GPU, the rank's set_device, the per-phase GPU memory "
                         "peaks, NVML's sampling of GPU utilisation and PCIe traffic (gpu_util) and the NCCL version "
                         "read from the stack's torch")
            notes.append("unverified on a GPU: the CUDA-event all-reduce timer, NCCL's set-up in process_group "
                         "(device_id, barrier) and each rank seeing its own GPU alone beside NCCL (two GPUs or more); "
                         "GraphBolt's GPU modes, overlap_feature_fetch and pinned-cuda's one host copy per node "
                         "pinned in place by every rank (no DGL build for the lent machine's torch); the CUDA "
                         "out-of-memory record (status oom) and each rank's loader workers pinned to its GPU's "
                         "cores (cpu_affinity): tested on CPU with samples or faked facts only")
            if BACKENDS[cell.backend].unverified_on_gpu:
                notes.append(f"unverified on a GPU: {BACKENDS[cell.backend].unverified_on_gpu}")
        return notes

    def gpu_refusal(self, cell: Cell) -> Outcome | None:
        """A cell that cannot have its GPUs here, skipped with the reason before any preparation."""
        if self._gpus is None:
            self._gpus = gpus.visible()
        shown = self._gpus
        if self.requires_gpu and not shown:
            return Outcome(cell, "skipped", f"suite {self.suite_name!r} asks GPU questions (requires: gpu) and "
                                            f"this machine shows no GPU: {shown.how}")
        if modes.mode(cell.settings.mode).needs_gpu:
            local_ranks = max(1, cell.settings.world_size // max(1, self.launch.nnodes))
            if not shown:
                return Outcome(cell, "skipped", f"mode {cell.settings.mode} needs a CUDA GPU; this machine "
                                                f"shows none ({shown.how})")
            if local_ranks > len(shown):
                return Outcome(cell, "skipped", f"{local_ranks} ranks on this node need {local_ranks} GPUs; "
                                                f"{len(shown)} visible ({shown.how})")
        return None

    def node_refusal(self, cell: Cell) -> Outcome | None:
        """A cell whose ranks do not split evenly over --nnodes machines, skipped with that reason."""
        world, nnodes = cell.settings.world_size, self.launch.nnodes
        if nnodes > 1 and world % nnodes:
            return Outcome(cell, "skipped", f"world size {world} does not split over {nnodes} nodes "
                                            f"(--nnodes {nnodes}: every node runs the same number of ranks)")
        return None

    def start(self, cell: Cell, prepared: PreparedCell) -> Outcome:
        return launch_cell(cell, prepared.python, prepared.dataset_dir, self.cache, prepared.memory_limit,
                           on_progress=self._show_epoch, launch=self.launch)

    def _show_epoch(self, event: dict) -> None:
        kind = "to target" if event.get("beyond") else "warm-up" if event.get("warmup") else "epoch"
        self.say(f"\r  {kind} {event['epoch']}/{event['of']}: {event['seconds']:.3f} s   ", end="")

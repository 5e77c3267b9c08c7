"""Time to accuracy: training to a validation-accuracy target, as MLPerf scores GNN training.

A cell whose settings name `target_acc` (bench/run/suite.py) evaluates its model on the validation
split after every `eval_every`-th training epoch, counting from the first (warm-up epochs train the
model too), and goes on training past its measured epochs until an evaluation reaches the target or
`max_epochs` epochs have run. What it records (`summary`):

- `seconds`: the training time to the target: the epochs' own seconds (the slowest rank's, as for
  the measured epochs) summed up to the evaluation that reached it. Evaluation is timed apart
  (`eval_s`) and start-up is not in it, so it adds up what the pipeline spent training.
- `epochs`: the training epochs run when it was reached; `reached: false` with the best validation
  accuracy (and its epoch) where it never was.

Under DDP every rank evaluates with the same weights (what DDP keeps in step) and the counts are
summed over ranks (`Tracker.validation_accuracy`), so every rank stops at the same epoch.
Epoch timing is unchanged: the evaluations fall between epochs, outside their clocks.
"""

from __future__ import annotations

import time

from bench.settings import CellSettings

CLOCK = "training"  # what `seconds` counts: the epochs' own time, evaluation and start-up excluded


def epochs(planned: int, tracker: Tracker | None):
    """The training epochs' indices (0-based): the planned ones (warm-up + measured), then, with a
    tracker, more while it says so (asked after each epoch's evaluation)."""
    epoch = 0
    while epoch < planned or (tracker is not None and tracker.goes_on(epoch, planned)):
        yield epoch
        epoch += 1


class Tracker:
    """Evaluates when due and says when to stop; one per rank."""

    def __init__(self, settings: CellSettings, pipe, world: int):
        self.target = float(settings.target_acc)
        self.every = int(settings.eval_every or 1)
        self.most = int(settings.max_epochs or settings.warmup_epochs + settings.epochs)
        self.pipe, self.world = pipe, world
        self.evaluations: list[dict] = []  # {"epoch", "val_acc", "seconds"} in order
        self.reached_at: int | None = None  # the training epoch whose evaluation reached the target

    @classmethod
    def of(cls, settings: CellSettings, pipe, world: int) -> Tracker | None:
        """A tracker where the cell has a target and a model to train; else None (n/a)."""
        if settings.target_acc is None or getattr(pipe, "model", None) is None:
            return None
        return cls(settings, pipe, world)

    def after_epoch(self, epoch: int) -> None:
        """After training epoch `epoch` (1-based): evaluate where it is due (every `eval_every`-th
        epoch, and the last one allowed) until the target is reached."""
        if self.reached_at is not None or (epoch % self.every and epoch < self.most):
            return
        start = time.perf_counter()
        acc = self.validation_accuracy()
        self.evaluations.append({"epoch": epoch, "val_acc": acc, "seconds": time.perf_counter() - start})
        if acc is not None and acc >= self.target:
            self.reached_at = epoch

    def validation_accuracy(self) -> float | None:
        """The model's accuracy on the validation split, the same figure on every rank. Alone, or
        where the backend sums its ranks' parts itself (`collective_eval`), its own `evaluate`.
        Under DDP each rank counts with the same weights and the counts are summed: a loader over
        datapipes (GraphBolt's) shards the split among the ranks while torch.distributed is up, so
        the parts add up to the whole split; an unsharded loader (PyG's) gives every rank the whole
        split, and the sum is the mean of the ranks' counts. Either way every rank gets one ratio."""
        if self.world == 1 or getattr(self.pipe, "collective_eval", False):
            return self.pipe.evaluate("val")
        import torch.distributed as dist

        counts = [None] * self.world
        dist.all_gather_object(counts, self.pipe.count_correct("val"))
        correct, total = (sum(c[i] for c in counts) for i in (0, 1))
        return correct / max(total, 1)

    def goes_on(self, epochs_run: int, planned: int) -> bool:
        """Whether another epoch runs after `epochs_run`: the planned (warm-up + measured) epochs
        always run; after them, until the target is reached or max_epochs have run."""
        if epochs_run < planned:
            return True
        return self.reached_at is None and epochs_run < self.most

    def summary(self, epoch_seconds: list[float]) -> dict:
        """The record: `epoch_seconds` are every training epoch's seconds in order (warm-up,
        measured, beyond), as the cell counts them (the slowest rank's)."""
        best = max((e for e in self.evaluations if e["val_acc"] is not None), key=lambda e: e["val_acc"],
                   default=None)
        reached = self.reached_at is not None
        return {"target": self.target, "reached": reached, "clock": CLOCK,
                "epochs": self.reached_at,
                "seconds": sum(epoch_seconds[:self.reached_at]) if reached else None,
                "best_val_acc": best["val_acc"] if best else None, "best_epoch": best["epoch"] if best else None,
                "epochs_run": len(epoch_seconds), "train_s": sum(epoch_seconds),
                "eval_s": sum(e["seconds"] for e in self.evaluations), "eval_every": self.every,
                "max_epochs": self.most,
                "evaluations": [{k: e[k] for k in ("epoch", "val_acc")} for e in self.evaluations]}

"""Time to accuracy: training to a validation-accuracy target, as MLPerf scores GNN training
(the settings: bench/run/suite.py). `seconds` sums the epochs' own time up to the evaluation that
reached the target: evaluation (`eval_s`) and start-up are apart, and epoch timing is unchanged.
Under DDP every rank evaluates with the same weights, so every rank stops at the same epoch."""

from __future__ import annotations

import time

from bench.settings import CellSettings

CLOCK = "training"  # what `seconds` counts: the epochs' own time, evaluation and start-up excluded


def epochs(planned: int, tracker: Tracker | None):
    """The training epochs' indices: the planned ones (warm-up + measured), then with a tracker more until
    the target is reached or max_epochs have run."""
    epoch = 0
    while epoch < planned or (tracker is not None and tracker.reached_at is None and epoch < tracker.most):
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
        """The validation accuracy, the same on every rank: alone (or `collective_eval`) the pipeline's own;
        under DDP each rank's counts with the same weights, summed (a sharded loader's parts add up to the
        split; an unsharded one's sum is the mean of the ranks' counts)."""
        if self.world == 1 or getattr(self.pipe, "collective_eval", False):
            return self.pipe.evaluate("val")
        import torch.distributed as dist

        counts = [None] * self.world
        dist.all_gather_object(counts, self.pipe.count_correct("val"))
        correct, total = (sum(c[i] for c in counts) for i in (0, 1))
        return correct / max(total, 1)

    def summary(self, epoch_seconds: list[float]) -> dict:
        """The record; `epoch_seconds`: every training epoch's seconds in order (warm-up, measured, beyond)."""
        best = max((e for e in self.evaluations if e["val_acc"] is not None), key=lambda e: e["val_acc"],
                   default=None)
        reached = self.reached_at is not None
        return {"target": self.target, "reached": reached, "clock": CLOCK, "epochs": self.reached_at,
                "seconds": sum(epoch_seconds[:self.reached_at]) if reached else None,
                "best_val_acc": best["val_acc"] if best else None, "best_epoch": best["epoch"] if best else None,
                "epochs_run": len(epoch_seconds), "train_s": sum(epoch_seconds),
                "eval_s": sum(e["seconds"] for e in self.evaluations), "eval_every": self.every,
                "max_epochs": self.most,
                "evaluations": [{k: e[k] for k in ("epoch", "val_acc")} for e in self.evaluations]}

"""A framework pair's epoch ratio split in two: the model alone (`replay_batch`: one sampled batch trained again, no
loader), which holds the stacks' torch builds and each framework's layers, and the rest of the epoch, the pipelines."""

from __future__ import annotations

from bench import paired_ratio
from bench.publish.results import RunResult

ALONE = "/replay_batch=on"


def _ratio(run: RunResult, first, second) -> str:
    """The two cells' pair where they took turns, else the ratio of their median epochs."""
    pair = next((p for p in run.pairs if (p["first"], p["second"]) == (first.id, second.id)), None)
    return paired_ratio.ratio_text(pair) + " paired" if pair else f"{second.median / first.median:.3f}"


def split_rows(run: RunResult) -> list[dict]:
    """Each two model-alone cells that differ in their backend alone, with both whole-epoch twins measured."""
    measured = {c.id: c for c in run.measured if c.median}
    alone = [c for c in measured.values() if c.id.endswith(ALONE)]
    rows = []
    for i, first_alone in enumerate(alone):
        for second_alone in alone[i + 1:]:
            first, second = (measured.get(c.id.removesuffix(ALONE)) for c in (first_alone, second_alone))
            if first_alone.id.split("/", 1)[1] != second_alone.id.split("/", 1)[1] or not first or not second:
                continue
            rest = [whole.median - model.median for whole, model in ((first, first_alone), (second, second_alone))]
            rows.append({"cell": second.id, "against": first.backend, "epoch": _ratio(run, first, second),
                         "alone": _ratio(run, first_alone, second_alone),
                         "difference": f"{second.median - first.median:+.3f} s",
                         "model_part": f"{second_alone.median - first_alone.median:+.3f} s",
                         "rest": f"{rest[1] - rest[0]:+.3f} s" + (f" ({rest[1] / rest[0]:.3f})" if min(rest) > 0 else "")})
    return rows

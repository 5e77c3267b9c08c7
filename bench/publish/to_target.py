"""Reading a cell's time to accuracy (recorded by bench/run/to_target.py) for the tables, the
diagnosis and the advisor. A cell has a target where its settings name `target_acc`; then it
recorded `to_target` (reached or not), or trained no model (`model: none`): n/a.
"""

from __future__ import annotations

from bench.publish import fmt
from bench.publish.results import CellResult

NOT_APPLICABLE = "n/a"


def target(cell: CellResult) -> float | None:
    """The validation accuracy the cell was to train to; None where the suite set no target."""
    return cell.settings.target_acc


def record(cell: CellResult) -> dict | None:
    return cell.metrics.to_target if cell.metrics else None


def seconds(cell: CellResult) -> float | None:
    """Training seconds to the target (evaluation apart); None where it was not reached or not sought."""
    found = record(cell)
    return found["seconds"] if found and found.get("reached") else None


def reached(cell: CellResult) -> bool:
    return seconds(cell) is not None


def rank_key(cell: CellResult) -> tuple:
    """Sorts cells by time to the target: those that reached it first, soonest first; then those
    that did not, best accuracy first; then those that did not train to one, by epoch time."""
    found = record(cell)
    if reached(cell):
        return 0, seconds(cell)
    if found:
        return 1, -(found.get("best_val_acc") or 0.0)
    return 2, cell.median or 0.0


def text(cell: CellResult) -> str:
    """'1.234 s (4 epochs to 0.83)', 'not reached (best 0.712 in 10 epochs)', 'n/a' (no model), or
    a dash (no target)."""
    if target(cell) is None:
        return fmt.DASH
    found = record(cell)
    if not found:
        return NOT_APPLICABLE
    if found.get("reached"):
        return f"{fmt.seconds(found['seconds'])} s ({epochs(found['epochs'])} to {found['target']:g})"
    return (f"not reached (best {fmt.accuracy(found.get('best_val_acc'))} "
            f"in {epochs(found.get('epochs_run'))}, target {found['target']:g})")


def hint(cell: CellResult) -> str:
    """The evaluations behind it, for the HTML tooltip."""
    found = record(cell)
    if not found:
        return "no model trained: no accuracy to reach" if target(cell) is not None else ""
    seen = ", ".join(f"epoch {e['epoch']}: {fmt.accuracy(e.get('val_acc'))}" for e in found.get("evaluations") or [])
    return (f"validation accuracy every {found.get('eval_every')} epoch(s), at most {found.get('max_epochs')} epochs; "
            f"training time only ({fmt.seconds(found.get('eval_s'))} s of evaluation apart): {seen}")


def epochs(n) -> str:
    return f"{n} epoch{'' if n == 1 else 's'}"


def shown(table: dict) -> bool:
    """A table shows the column where some cell of it had a target."""
    return any(target(r) is not None for r in table["rows"])

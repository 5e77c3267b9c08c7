"""Inside the cell's stack, for `gnnbench fidelity --clocks` (host side: overhead.py): the cell's
pipeline built with the stage clocks on and off, their measured epochs run in interleaved pairs.

    python -m bench.harness_costs.overhead_loop CELL_JSON DATASET_DIR EPOCHS
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from bench.backends import load_pipeline_class
from bench.backends.base import seed_everything
from bench.datasets import hub
from bench.run.lifeline import tie_to_parent
from bench.run.worker import run_epoch
from bench.settings import CellSettings
from bench.stores import features_in_memory


def interleave(cell: dict, dataset_dir: Path, epochs: int) -> dict:
    """{"on": seconds of each epoch with the clocks, "off": without}."""
    settings = CellSettings.from_dict(cell["settings"])
    Pipeline = load_pipeline_class(cell["backend"])
    data = hub.load_dataset(cell["dataset"]["source"], dataset_dir,
                         features_in_memory=features_in_memory(settings.store))
    pipes = {}
    for profile in (True, False):
        seed_everything(settings.seed)  # both models start from the same weights
        pipes[profile] = Pipeline(data, settings.replace(profile=profile))
    for _ in range(settings.warmup_epochs):
        for profile, pipe in pipes.items():
            run_epoch(pipe, profile=profile)
    seconds = {True: [], False: []}
    for i in range(epochs):
        # each epoch follows the other side's (turning the order would run a side twice in a row, cached)
        for profile in (True, False):
            pipes[profile].reseed(settings.seed + 1 + i)  # both epochs of the pair: the same batches
            stats = run_epoch(pipes[profile], profile=profile)
            if ("stages" in stats) != profile:  # the two sides must differ in exactly this
                raise RuntimeError(f"profile {profile}: the epoch {'lacks' if profile else 'has'} a stage split")
            seconds[profile].append(stats["seconds"])
    return {"on": seconds[True], "off": seconds[False]}


def main(argv: list[str]) -> int:
    """`CELL_JSON DATASET_DIR EPOCHS`: prints interleave's JSON."""
    tie_to_parent()
    cell_json, dataset_dir, epochs = argv
    print(json.dumps(interleave(json.loads(cell_json), Path(dataset_dir), int(epochs))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

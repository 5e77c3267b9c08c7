"""Adam's weight decay is one setting, `weight_decay` (bench/settings.py; default 0 as PyG's examples,
DGL's GraphBolt node example uses 5e-4), issue 49: it reaches the optimizer that every training
backend builds (bench/backends/base.py build_model) in each framework's stack, every optimizer in
bench/ (the backends' and the plain loops of `gnnbench fidelity`) is given it, and each cell records
it with its model. A negative one is refused by name (tests/test_bad_inputs.py)."""

from __future__ import annotations

import ast
import json
import subprocess
from pathlib import Path

import pytest

from bench import stacks
from bench.result_format import ModelInfo
from tests.conftest import require_stacks

REPO = Path(__file__).resolve().parents[1]

# the shared build_model, as every training backend runs it, on a small model; what the cell records
BUILD = r"""
import json, sys
from bench.run.worker import model_summary
from tests.small_pipeline import built

for decay in (0.0, float(sys.argv[1])):
    pipe = built(weight_decay=decay)
    print(json.dumps({"optimizer": pipe.optimizer.param_groups[0]["weight_decay"], "recorded": model_summary(pipe)}))
"""


@pytest.mark.stacks
@pytest.mark.parametrize("stack", ["pyg", "dgl"])
def test_the_setting_reaches_the_optimizer_and_the_record(stack):
    require_stacks(stack)
    proc = subprocess.run([str(stacks.get(stack).python), "-c", BUILD, "5e-4"], cwd=REPO,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    default, set_ = (json.loads(line) for line in proc.stdout.splitlines()[-2:])
    assert (default["optimizer"], set_["optimizer"]) == (0.0, 5e-4)
    assert ModelInfo(**set_["recorded"]).weight_decay == 5e-4 and default["recorded"]["weight_decay"] == 0.0


def test_every_optimizer_in_bench_is_given_the_setting():
    """A backend or plain loop that builds its own optimizer (`torch.optim.X(...)`) must pass the
    cell's weight decay: else its side of a comparison trains with another optimizer than the cell says."""
    built = [(path, call) for path in sorted((REPO / "bench").rglob("*.py"))
             for call in ast.walk(ast.parse(path.read_text()))
             if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
             and isinstance(call.func.value, ast.Attribute) and call.func.value.attr == "optim"]
    assert built, "no optimizer found in bench/: the pattern is stale"
    missing = [f"{path.relative_to(REPO)}:{call.lineno}" for path, call in built
               if "weight_decay" not in {k.arg for k in call.keywords}]
    assert not missing, "give these the cell's weight_decay: " + ", ".join(missing)

"""The GPU settings the frameworks' users are advised to use, as suite axes: `pin_memory` (the
loader pins each batch), `amp` (autocast in bf16 or fp16 with a GradScaler) and GraphBolt's
`gpu_cache` (GPUCachedFeature). Each is a cell only where it means something; on a machine
without CUDA those cells are skipped with the reason, and bf16 autocast runs for real on the CPU."""

from __future__ import annotations

import json
import shutil

import pytest

from bench.run import suite as suite_mod
from tests.conftest import require_stacks, run_suite_text

SUITE = """
name: gpu-settings
datasets:
  rmat-s9: {source: synthetic, params: {scale: 9, edge_factor: 8, feature_dim: 16, num_classes: 4}}
backends: [pyg-neighbor, dgl-graphbolt]
settings:
  mode: [cpu-cpu, cpu-cuda, pinned-cuda]
  pin_memory: [false, true]
  amp: [off, bf16, fp16]
  gpu_cache: [0, 0.25]
  batch_size: 64
  fanout: [5, 5]
  epochs: 2
  warmup_epochs: 1
  timeout: 240
"""


def expand(text: str, write_suite) -> list[str]:
    suite, _ = suite_mod.load(write_suite(text))
    return [c.id for c in suite_mod.expand(suite)]


def test_each_setting_is_a_cell_only_where_it_means_something(write_suite):
    ids = expand(SUITE, write_suite)
    pyg = [i for i in ids if i.startswith("pyg-neighbor/")]
    dgl = [i for i in ids if i.startswith("dgl-graphbolt/")]
    # PyG: pinned batches and fp16 only when training on the GPU; bf16 also on the CPU; no GPU cache
    assert sorted(pyg) == sorted(
        [f"pyg-neighbor/rmat-s9/mode=cpu-cpu/workers=0/ws=1/pin_memory=False/amp={a}/gpu_cache=0.0" for a in ("off", "bf16")]
        + [f"pyg-neighbor/rmat-s9/mode=cpu-cuda/workers=0/ws=1/pin_memory={p}/amp={a}/gpu_cache=0.0"
           for p in (False, True) for a in ("off", "bf16", "fp16")])
    # GraphBolt pins through its mode, not a loader flag; its GPU cache needs the seeds on the GPU
    assert not any("pin_memory=True" in i for i in dgl)
    assert sorted(i for i in dgl if "gpu_cache=0.25" in i) == sorted(
        f"dgl-graphbolt/rmat-s9/mode=pinned-cuda/workers=0/ws=1/pin_memory=False/amp={a}/gpu_cache=0.25"
        for a in ("off", "bf16", "fp16"))
    assert len(dgl) == 2 + 3 + 6


@pytest.mark.parametrize("setting, value, expected", [
    ("amp", "fp8", "amp: Input should be 'off', 'bf16' or 'fp16'"),
    ("amp", "true", "amp: Input should be 'off', 'bf16' or 'fp16'"),
    ("pin_memory", "sometimes", "pin_memory: Input should be a valid boolean"),
    ("gpu_cache", "1.5", "gpu_cache: Input should be less than or equal to 1"),
    ("gpu_cache", "-0.1", "gpu_cache: Input should be greater than or equal to 0"),
])
def test_bad_values_are_named(write_suite, setting, value, expected):
    text = SUITE.replace(f"  {setting}:", f"  {setting}: {value}\n  was_{setting}:")
    text = "\n".join(line for line in text.splitlines() if not line.strip().startswith("was_"))
    with pytest.raises(suite_mod.SuiteError) as err:
        suite_mod.load(write_suite(text))
    assert expected in str(err.value) and f"settings.{setting}" in str(err.value)


def test_a_setting_that_means_nothing_anywhere_says_so(write_suite):
    text = SUITE.replace("mode: [cpu-cpu, cpu-cuda, pinned-cuda]", "mode: cpu-cpu").replace(
        "pin_memory: [false, true]", "pin_memory: true")
    with pytest.raises(suite_mod.SuiteError, match="pin_memory, fp16 amp and gpu_cache need a mode that trains on CUDA"):
        suite_mod.load(write_suite(text))


def test_on_a_machine_without_cuda_they_are_skipped_and_bf16_trains_on_the_cpu(tmp_path, cache_dir):
    require_stacks("pyg", "dgl")
    if shutil.which("nvidia-smi"):
        pytest.skip("this machine has an NVIDIA GPU: the GPU cells would run, not be skipped")
    proc, out = run_suite_text(SUITE, tmp_path, cache_dir)
    doc = json.loads(out.read_text())
    measured = {b["extra_info"]["cell_id"]: b["extra_info"] for b in doc["benchmarks"]}
    assert sorted(measured) == sorted(
        f"{b}/rmat-s9/mode=cpu-cpu/workers=0/ws=1/pin_memory=False/amp={a}/gpu_cache=0.0"
        for b in ("pyg-neighbor", "dgl-graphbolt") for a in ("off", "bf16")), proc.stdout[-3000:]
    for cell_id, info in measured.items():
        assert info["settings"]["amp"] in ("off", "bf16") and 0.25 < info["test_acc"] <= 1, cell_id
    skipped = doc["unmeasured"]
    assert len(skipped) == 19 - 4 and all(u["status"] == "skipped" for u in skipped)
    assert all("needs a CUDA GPU" in u["reason"] for u in skipped)

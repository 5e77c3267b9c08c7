"""`memory_limit`: a real memory cgroup around a cell; killed for memory it ends as `oom` with
the limit in its reason, and the cgroup is gone afterwards. Skipped, with the reason, where this
machine cannot make memory cgroups (not root, no controller)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from bench.publish import results
from bench.machine import cgroup
from bench.run import suite as suite_mod
from tests.conftest import require_stacks, run_suite_text

NO_CGROUP = cgroup.unavailable()
needs_cgroup = pytest.mark.skipif(NO_CGROUP is not None, reason=f"no memory cgroup here: {NO_CGROUP}")


@pytest.mark.parametrize("text, size, shown", [
    ("none", None, "none"), (None, None, "none"), ("3GiB", 3 << 30, "3GiB"), ("3G", 3 << 30, "3GiB"),
    ("1536MiB", 1536 << 20, "1536MiB"), ("1.5GiB", 1536 << 20, "1536MiB"), (268435456, 256 << 20, "256MiB")])
def test_limits_are_read_in_binary_units(text, size, shown):
    assert cgroup.parse_limit(text) == size and cgroup.canonical(text) == shown


@pytest.mark.parametrize("bad", ["3GB", "lots", "-1GiB", "1KiB", True])
def test_a_bad_limit_names_the_value_and_the_units(bad, write_suite):
    with pytest.raises(ValueError, match="memory_limit"):
        cgroup.parse_limit(bad)
    path = write_suite(f"""
name: s
datasets: {{g: "synthetic:scale=9"}}
backends: [pyg-neighbor]
settings: {{memory_limit: {bad!r}}}
""".replace("'", '"'))
    with pytest.raises(suite_mod.SuiteError, match=r"settings\.memory_limit: .*(512MiB|smallest)"):
        suite_mod.load(path)


@needs_cgroup
def test_a_process_over_the_limit_is_killed_and_counted():
    group = cgroup.MemoryCgroup.create("test-oom", 64 << 20)
    fd = group.join_fd()
    try:
        proc = subprocess.run([sys.executable, "-c", "x = bytearray(256 << 20); x[::4096] = b'1' * len(x[::4096])"],
                              preexec_fn=cgroup.join_in_child(fd), capture_output=True)
    finally:
        os.close(fd)
        assert group.oom_kills() >= 1 and proc.returncode == -9
        group.remove()
    assert not group.path.exists()


OOM_SUITE = """
name: oom
datasets:
  rmat-s9: {source: synthetic, params: {scale: 9, edge_factor: 8, feature_dim: 16, num_classes: 4}}
backends: [pyg-neighbor]
settings: {store: memory, batch_size: 64, fanout: [5, 5], epochs: 1, warmup_epochs: 0, timeout: 240,
           memory_limit: 128MiB}
"""


@needs_cgroup
def test_a_cell_over_its_limit_ends_as_oom(tmp_path, cache_dir):
    require_stacks("pyg")
    proc, out = run_suite_text(OOM_SUITE, tmp_path, cache_dir, name="oom")
    run = results.read(out)
    [cell] = run.unmeasured
    assert cell.id.endswith("/memory_limit=128MiB")
    assert cell.status == "oom", cell.reason
    assert "memory_limit 128MiB" in cell.reason and "OOM killer" in cell.reason
    assert proc.returncode == 0, proc.stdout[-2000:]  # a budget the cell exceeds is a result
    import re
    from pathlib import Path

    [made] = re.findall(r"in cgroup v\d (\S+);", cell.reason)
    assert not Path(made).exists()  # removed after the cell

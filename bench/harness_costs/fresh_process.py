"""One conversion measured alone in a fresh process: its peak RSS over its whole process tree,
sampled with psutil, and its wall time (the conversion benchmarks of a user's graph,
convert_benchmark.py, and of a typed graph, typed_convert_benchmark.py)."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import threading
import time
from pathlib import Path


def run_sampled(cmd: list[str], env: dict, interval: float = 0.05) -> tuple[int, str, str, int, float]:
    """Run `cmd` in a fresh process: (return code, stdout, stderr, peak RSS of its process tree
    sampled with psutil every `interval` s, wall seconds)."""
    import psutil

    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    peak = [0]
    stop = threading.Event()

    def sample():
        root = psutil.Process(proc.pid)
        while not stop.is_set():
            try:
                tree = [root, *root.children(recursive=True)]
                peak[0] = max(peak[0], sum(p.memory_info().rss for p in tree))
            except psutil.Error:
                pass
            stop.wait(interval)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    started = time.perf_counter()
    streams = {}
    readers = [threading.Thread(target=lambda name=name: streams.__setitem__(name, getattr(proc, name).read()))
               for name in ("stdout", "stderr")]
    for reader in readers:
        reader.start()
    proc.wait()
    wall = time.perf_counter() - started
    for reader in readers:
        reader.join()
    stop.set()
    sampler.join()
    return proc.returncode, streams["stdout"], streams["stderr"], peak[0], wall


def repo_env() -> dict:
    """This process's environment with this checkout first on PYTHONPATH (the converting process
    imports the same bench)."""
    return {**os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(repo_root()), os.environ.get("PYTHONPATH")]))}


def repo_root() -> Path:
    return Path(__file__).resolve().parents[2]


def du(path: Path) -> int:
    path = Path(path)
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def machine() -> dict:
    """What a conversion benchmark's result says of the machine it ran on."""
    import psutil

    return {"cpus": os.cpu_count(), "platform": platform.platform(), "memory_bytes": psutil.virtual_memory().total,
            "load_1min": os.getloadavg()[0]}


def write_result(result: dict, out: Path, text: str) -> None:
    """The benchmark's JSON at `out`, and its table (`text`) with the command beside it as Markdown."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    out.with_suffix(".md").write_text(f"{text}\n\nProduced by: `{result['command']}`\n")

"""The conversion benchmark of a typed graph: peak RSS and time of bringing a typed
(heterogeneous) graph into the hub, per way in, against the hub's own size (issue 36 item 5: within
2x, as for a user's homogeneous graph, bench/harness_costs/convert_benchmark.py).

    python -m bench.harness_costs.convert_benchmark --typed [--scale 100 --feature-dim 128]
        [--formats generator,generator-cli,typed-npy,igbh] --work DIR --out FILE.json

1. The graph: typed-synthetic at IGBH-tiny's structure by default (scale=100: 550 k nodes, 2.4 M
   edges, 4.8 M with the reverses the hub adds; 128 features on every type, 19 classes, IGB's
   60/20/20 split fractions). Its generation is itself measured (`generator`: the materialiser in
   a bare interpreter; `generator-cli`: `gnnbench datasets prepare`, the process the user waits
   on: typed-synthetic is generated in the host process, not in a stack), and the first one's hub
   is the reference.
2. The inputs, written once from the reference hub (not measured): a typed .npy folder
   (bench/datasets/typed_npy.py) and IGB's processed/ layout (bench/datasets/igbh.py), each
   relation given once, its edges in a random order (so the conversion sorts for real).
3. Each conversion runs alone in a fresh process into an empty hub; RSS sampled with psutil every
   50 ms over the process tree, and the process's own high-water mark (VmHWM).
4. Each hub is compared with the reference, array by array (the SHA-256 in checksums.json). IGB's
   layout carries no split: igbh makes IGB's own (the first 60 % of papers train, the next 20 %
   validation), so its splits are checked against that rule instead of the generator's.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

import numpy as np

from bench import datasets
from bench.datasets import hub, igbh, typed_hub
from bench.harness_costs.fresh_process import du, machine, repo_env, run_sampled, write_result

FORMATS = ("generator", "generator-cli", "typed-npy", "igbh")
SPLITS = typed_hub.SPLITS


def reference_name(args) -> str:
    return (f"typed-synthetic:scale={args.scale},feature_dim={args.feature_dim},num_classes=19,seed=0,"
            f"train_frac={igbh.TRAIN_FRAC},val_frac={igbh.VAL_FRAC}")


# --- the inputs (written once, not measured) ---------------------------------------------------

def given_relations(meta: dict) -> list[tuple[str, str, str]]:
    """The relations as a user gives them: each once, the hub's reverses left out."""
    return [typed_hub.relation_of(k) for k, info in meta["relations"].items() if not info["reverse_of"]]


def shuffled(edge_index: np.ndarray, seed: int) -> np.ndarray:
    return np.asarray(edge_index)[:, np.random.default_rng(seed).permutation(edge_index.shape[1])]


def link_or_copy(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)


def write_typed_npy(ref: Path, folder: Path) -> None:
    meta = json.loads((ref / "meta.json").read_text())
    target = meta["target"]
    (folder / "edges").mkdir(parents=True, exist_ok=True)
    counts = {}
    for t, info in meta["node_types"].items():
        (folder / "nodes" / t).mkdir(parents=True, exist_ok=True)
        if info["feature_dim"]:
            link_or_copy(ref / f"features-{t}.npy", folder / "nodes" / t / "features.npy")
        else:
            counts[t] = info["count"]
    for name in ("labels", *SPLITS):
        link_or_copy(ref / f"{name}.npy", folder / "nodes" / target / f"{name}.npy")
    for i, relation in enumerate(given_relations(meta)):
        edges = np.load(ref / f"edge_index-{typed_hub.NAME_SEPARATOR.join(relation)}.npy")
        np.save(folder / "edges" / f"{typed_hub.NAME_SEPARATOR.join(relation)}.npy", shuffled(edges, i))
    (folder / "graph.json").write_text(json.dumps({"target": target, **({"num_nodes": counts} if counts else {})}))


def write_igbh(ref: Path, folder: Path) -> None:
    meta = json.loads((ref / "meta.json").read_text())
    processed = folder / "processed"
    for t, info in meta["node_types"].items():
        (processed / t).mkdir(parents=True, exist_ok=True)
        if not info["feature_dim"]:
            raise SystemExit(f"igbh: IGB's layout has features on every type; {t!r} has none (use features=all)")
        link_or_copy(ref / f"features-{t}.npy", processed / t / "node_feat.npy")
    link_or_copy(ref / "labels.npy", processed / igbh.TARGET / igbh.LABEL_FILES[19])
    for i, relation in enumerate(given_relations(meta)):
        part = typed_hub.NAME_SEPARATOR.join(relation)
        (processed / part).mkdir(exist_ok=True)
        edges = np.load(ref / f"edge_index-{part}.npy")
        np.save(processed / part / "edge_index.npy", np.ascontiguousarray(shuffled(edges, i).T))  # IGB's [E, 2]


WRITERS = {"typed-npy": write_typed_npy, "igbh": write_igbh}


def write_inputs(ref: Path, work: Path, formats: list[str]) -> dict[str, Path]:
    """Each input folder, rewritten when the reference changed (its checksums are the stamp)."""
    stamp = (ref / "checksums.json").read_text()
    paths = {}
    for fmt in [f for f in WRITERS if f in formats]:
        path = work / "inputs" / fmt
        done = path.parent / f".{fmt}.done"
        paths[fmt] = path
        if done.is_file() and done.read_text() == stamp:
            continue
        shutil.rmtree(path, ignore_errors=True)
        print(f"writing the {fmt} input ...", flush=True)
        WRITERS[fmt](ref, path)
        done.write_text(stamp)
    return paths


# --- a measured conversion ---------------------------------------------------------------------

CONVERT = """
import json, sys, time
from pathlib import Path
from bench import datasets
name, cache = sys.argv[1:3]
spec = datasets.parse_name(name)
started = time.perf_counter()
out = datasets.materialiser(spec["source"])(spec, Path(cache))
seconds = time.perf_counter() - started
hwm = next(int(line.split()[1]) * 1024 for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps({"hub": str(out), "seconds": seconds, "vm_hwm_bytes": hwm}))
"""


def dataset_name(fmt: str, args, paths: dict[str, Path]) -> str:
    return reference_name(args) if fmt.startswith("generator") else f"{fmt}:{paths[fmt]}"


def measure(fmt: str, name: str, cache: Path) -> dict:
    """One way in, alone in a fresh process, into the empty hub `cache`."""
    shutil.rmtree(cache, ignore_errors=True)
    cache.mkdir(parents=True)
    if fmt == "generator-cli":  # what the user runs: the CLI's own imports included
        cmd = [sys.executable, "-m", "bench.cli", "datasets", "prepare", name, "--cache-dir", str(cache)]
    else:
        cmd = [sys.executable, "-c", CONVERT, name, str(cache)]
    env = {**repo_env(), "GNNBENCH_CACHE": str(cache)}
    started = time.perf_counter()
    code, out, err, peak, wall = run_sampled(cmd, env)
    if code != 0:
        raise SystemExit(f"{fmt}: the conversion failed ({code}):\n{(err or out)[-3000:]}")
    spec = datasets.parse_name(name)
    hub_dir = hub.dataset_dir(spec, cache)
    if fmt == "generator-cli":  # the CLI says neither its seconds nor its high-water mark: the sampled peak
        done = {"seconds": time.perf_counter() - started, "vm_hwm_bytes": 0}
    else:
        done = json.loads(out.strip().splitlines()[-1])
    return {"format": fmt, "source": spec["source"], "dataset": name, "hub_bytes": hub_bytes(hub_dir),
            "peak_rss_bytes": peak, "vm_hwm_bytes": done["vm_hwm_bytes"], "convert_s": round(done["seconds"], 2),
            "wall_s": round(wall, 2), "hub": str(hub_dir), "arrays": array_digests(hub_dir),
            "phases": json.loads((hub_dir / "meta.json").read_text()).get("convert_phases")}


def hub_bytes(hub_dir: Path) -> int:
    """The hub's own size: every array of the typed dataset (what the 2x bound is against)."""
    return sum(p.stat().st_size for p in Path(hub_dir).glob("*.npy"))


def array_digests(hub_dir: Path) -> dict:
    recorded = json.loads((Path(hub_dir) / "checksums.json").read_text())
    files = recorded.get("files", recorded)
    return {name.removesuffix(".npy"): entry["sha256"] for name, entry in sorted(files.items())}


def compare(fmt: str, r: dict, reference: dict) -> list[str]:
    """The arrays that differ from the reference's (for igbh, its splits against IGB's rule)."""
    names = sorted(set(reference) | set(r["arrays"]))
    if fmt != "igbh":
        return [a for a in names if r["arrays"].get(a) != reference.get(a)]
    differs = [a for a in names if a not in SPLITS and r["arrays"].get(a) != reference.get(a)]
    n = int(np.load(Path(r["hub"]) / "labels.npy", mmap_mode="r").shape[0])
    n_train, n_val = int(n * igbh.TRAIN_FRAC), int(n * igbh.VAL_FRAC)
    rule = {"train_idx": np.arange(n_train), "val_idx": np.arange(n_train, n_train + n_val),
            "test_idx": np.arange(n_train + n_val, n)}
    return differs + [s for s in SPLITS if not np.array_equal(np.load(Path(r["hub"]) / f"{s}.npy"), rule[s])]


# --- the report ----------------------------------------------------------------------------------

def high_water(r: dict) -> int:
    return max(r["peak_rss_bytes"], r["vm_hwm_bytes"])


def peak_phase(r: dict) -> str:
    """The writer's step by whose end the process's high-water mark had reached its final value
    (meta.json's convert_phases; the first step's mark includes what came before it)."""
    phases = [p for p in r.get("phases") or [] if "vm_hwm_bytes" in p]
    if not phases:
        return "n/a"
    top = max(p["vm_hwm_bytes"] for p in phases)
    first = next(p for p in phases if p["vm_hwm_bytes"] == top)
    return first["phase"] + (" (or before: reading or drawing the graph)" if first is phases[0] else "")


def table(result: dict) -> str:
    mib = lambda b: f"{b / 2**20:.0f} MiB"  # noqa: E731
    lines = ["| way in | hub | peak RSS (psutil, every 50 ms) | VmHWM (kernel's peak) | peak / hub | under 2x hub | "
             "time | arrays = generator's | high-water mark reached in |", "|---|---|---|---|---|---|---|---|---|"]
    for r in result["conversions"]:
        hwm = mib(r["vm_hwm_bytes"]) if r["vm_hwm_bytes"] else "n/a"
        lines.append(f"| {r['format']} | {mib(r['hub_bytes'])} | {mib(r['peak_rss_bytes'])} | {hwm} | "
                     f"{high_water(r) / r['hub_bytes']:.2f} | {'yes' if high_water(r) < 2 * r['hub_bytes'] else 'NO'} | "
                     f"{r['convert_s']:.1f} s | {'yes' if r['same_as_reference'] else 'NO: ' + ', '.join(r['differs'])} | "
                     f"{peak_phase(r)} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="python -m bench.harness_costs.convert_benchmark --typed", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", type=int, default=100, help="typed-synthetic's scale (default 100: IGBH-tiny's)")
    parser.add_argument("--feature-dim", type=int, default=128, help="features on every type (default 128)")
    parser.add_argument("--formats", default=",".join(FORMATS), help=f"comma-separated, of {', '.join(FORMATS)}")
    parser.add_argument("--work", type=Path, required=True, help="a folder for the inputs and the hubs")
    parser.add_argument("--out", type=Path, required=True, help="the result JSON (a Markdown table beside it)")
    args = parser.parse_args(argv)
    formats = [f for f in args.formats.split(",") if f]
    unknown = set(formats) - set(FORMATS)
    if unknown:
        parser.error(f"unknown format(s) {', '.join(sorted(unknown))}; allowed: {', '.join(FORMATS)}")
    args.work.mkdir(parents=True, exist_ok=True)
    print("generating the reference (measured: generator) ...", flush=True)
    first = measure("generator", reference_name(args), args.work / "reference")
    ref = Path(first["hub"])
    paths = write_inputs(ref, args.work, formats)
    conversions = []
    for fmt in formats:
        if fmt == "generator":
            r = first
        else:
            print(f"converting {fmt} ...", flush=True)
            r = measure(fmt, dataset_name(fmt, args, paths), args.work / "hubs" / fmt)
            r["input_bytes"] = du(paths[fmt]) if fmt in paths else None
        r["differs"] = compare(fmt, r, first["arrays"])
        r["same_as_reference"] = not r["differs"]
        print(f"  peak RSS {r['peak_rss_bytes'] / 2**20:.0f} MiB (VmHWM {r['vm_hwm_bytes'] / 2**20:.0f}), hub "
              f"{r['hub_bytes'] / 2**20:.0f} MiB, {r['convert_s']} s, same as the generator's: {r['same_as_reference']}",
              flush=True)
        if fmt != "generator":
            shutil.rmtree(args.work / "hubs" / fmt, ignore_errors=True)
        conversions.append(r)
    meta = json.loads((ref / "meta.json").read_text())
    result = {"command": "python -m bench.harness_costs.convert_benchmark --typed " + " ".join(argv),
              "graph": {"name": meta["name"], "num_nodes": meta["num_nodes"], "num_edges": meta["num_edges"],
                        "node_types": meta["node_types"],
                        "relations": {k: v["num_edges"] for k, v in meta["relations"].items()}},
              "machine": machine(),
              "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "conversions": conversions}
    text = table(result)
    write_result(result, args.out, text)
    print(text)
    return 0 if all(high_water(r) < 2 * r["hub_bytes"] and r["same_as_reference"] for r in conversions) else 1


if __name__ == "__main__":
    sys.exit(main())

"""The conversion benchmark: peak RSS and time of bringing a graph into the hub, per way in, against
the hub's own size (within 2x; a benchmark, not a test: it writes a JSON and a Markdown table).

    python -m bench.datasets.convert_benchmark [--scale 21 --edge-factor 19 --feature-dim 100]
        [--formats npy,graphbolt,edge-list,edge-list-csv,pyg-file] [--in-memory] [--pyg-python PATH] --work DIR --out FILE.json
    python -m bench.datasets.convert_benchmark --typed [--scale 100 --feature-dim 128]
        [--formats generator,generator-cli,typed-npy,igbh] --work DIR --out FILE.json

The reference graph (synthetic, products-scale; or typed-synthetic at IGBH-tiny's structure) is
written once per format as a user's input, edges and node rows shuffled; each conversion runs alone
in a fresh process into an empty hub, and its hub is compared with the reference array by array.
`--in-memory`: the whole-array path (hub.write) too. Host only.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

from bench import datasets
from bench.datasets import hub, typed_hub, typed_npy

FORMATS = {"plain": ("npy", "graphbolt", "edge-list", "edge-list-csv", "pyg-file"),
           "typed": ("generator", "generator-cli", "typed-npy", "igbh")}
SOURCE_OF = {"edge-list-csv": "edge-list", "in-memory": "npy"}  # else the format's own name
# a plain hub's own arrays (what the 2x bound is against and the round trip compares); typed: every array
PLAIN_ARRAYS = ("edge_index", "csc_indptr", "features", "labels", "train_idx", "val_idx", "test_idx")
SPLITS = ("train", "val", "test")
BLOCK = 1 << 22


def reference_name(args) -> str:
    if args.typed:
        return (f"typed-synthetic:scale={args.scale},feature_dim={args.feature_dim},num_classes=19,seed=0,"
                f"train_frac={typed_npy.IGBH_TRAIN_FRAC},val_frac={typed_npy.IGBH_VAL_FRAC}")
    return (f"synthetic:scale={args.scale},edge_factor={args.edge_factor},feature_dim={args.feature_dim},"
            "num_classes=47,train_frac=0.08,val_frac=0.01,test_frac=0.01")


def shuffled(edge_index: np.ndarray, seed: int) -> np.ndarray:
    return np.asarray(edge_index)[:, np.random.default_rng(seed).permutation(edge_index.shape[1])]


def link_or_copy(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)


def write_npy(ref: Path, folder: Path, inputs: Path, args) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    np.save(folder / "edge_index.npy", shuffled(np.load(ref / "edge_index.npy", mmap_mode="r"), 1))
    for name in ("features", "labels", *(f"{s}_idx" for s in SPLITS)):
        shutil.copyfile(ref / f"{name}.npy", folder / f"{name}.npy")


def write_graphbolt(ref: Path, folder: Path, inputs: Path, args) -> None:
    import yaml

    (folder / "set").mkdir(parents=True, exist_ok=True)
    link_or_copy(inputs / "npy" / "edge_index.npy", folder / "edges.npy")
    shutil.copyfile(ref / "features.npy", folder / "feat.npy")
    labels = np.load(ref / "labels.npy")
    task = {"name": "node_classification", "num_classes": int(labels.max()) + 1}
    for split, key in zip(SPLITS, ("train_set", "validation_set", "test_set")):
        ids = np.load(ref / f"{split}_idx.npy")
        np.save(folder / f"set/{split}.npy", ids)
        np.save(folder / f"set/{split}_labels.npy", labels[ids])
        task[key] = [{"data": [{"name": "seeds", "format": "numpy", "path": f"set/{split}.npy"},
                               {"name": "labels", "format": "numpy", "path": f"set/{split}_labels.npy"}]}]
    meta = {"dataset_name": "products-scale", "graph": {"nodes": [{"num": int(labels.shape[0])}],
                                                         "edges": [{"format": "numpy", "path": "edges.npy"}]},
            "feature_data": [{"domain": "node", "name": "feat", "format": "numpy", "path": "feat.npy", "in_memory": False},
                             {"domain": "node", "name": "label", "format": "numpy", "path": "label.npy"}],
            "tasks": [task]}
    np.save(folder / "label.npy", labels)  # every node's label (the sets alone label only theirs)
    (folder / "metadata.yaml").write_text(yaml.safe_dump(meta, sort_keys=False))


def write_edge_list(ref: Path, folder: Path, inputs: Path, args, csv: bool = False) -> None:
    import pyarrow as pa
    import pyarrow.csv as pcsv
    import pyarrow.parquet as pq

    folder.mkdir(parents=True, exist_ok=True)
    ei = np.load(inputs / "npy" / "edge_index.npy", mmap_mode="r")
    features = np.load(ref / "features.npy", mmap_mode="r")
    labels = np.load(ref / "labels.npy")
    n, width = features.shape
    split = np.full(n, "", dtype=object)
    for s in SPLITS:
        split[np.load(ref / f"{s}_idx.npy")] = s
    order = np.random.default_rng(2).permutation(n)
    edge_schema = pa.schema([("src", pa.int64()), ("dst", pa.int64())])
    feature_cols = [f"f{j}" for j in range(width)]
    node_schema = pa.schema([("id", pa.int64()), ("label", pa.int64()), ("split", pa.string())]
                            + ([(c, pa.float32()) for c in feature_cols] if csv
                               else [("feat", pa.list_(pa.float32(), width))]))
    writer_of = (lambda name, schema: pcsv.CSVWriter(folder / f"{name}.csv", schema)) if csv else \
        (lambda name, schema: pq.ParquetWriter(folder / f"{name}.parquet", schema))
    with writer_of("edges", edge_schema) as writer:
        for start in range(0, ei.shape[1], BLOCK):
            writer.write_table(pa.table({"src": np.asarray(ei[0, start:start + BLOCK]),
                                         "dst": np.asarray(ei[1, start:start + BLOCK])}, schema=edge_schema))
    step = 1 << 18
    with writer_of("nodes", node_schema) as writer:
        for start in range(0, n, step):
            rows = order[start:start + step]
            block = np.asarray(features[np.sort(rows)])[np.argsort(np.argsort(rows))]
            cols = {"id": rows, "label": labels[rows], "split": pa.array(split[rows].tolist(), pa.string())}
            if csv:
                cols.update({c: block[:, j] for j, c in enumerate(feature_cols)})
            else:
                cols["feat"] = pa.FixedSizeListArray.from_arrays(pa.array(block.reshape(-1)), width)
            writer.write_table(pa.table(cols, schema=node_schema))


PYG_WRITER = """
import sys, numpy as np, torch
from torch_geometric.data import Data
npy = sys.argv[1]
n = np.load(npy + '/labels.npy').shape[0]
masks = {}
for s in ('train', 'val', 'test'):
    m = torch.zeros(n, dtype=torch.bool); m[torch.from_numpy(np.load(npy + f'/{s}_idx.npy'))] = True
    masks[f'{s}_mask'] = m
data = Data(x=torch.from_numpy(np.load(npy + '/features.npy')), y=torch.from_numpy(np.load(npy + '/labels.npy')),
            edge_index=torch.from_numpy(np.load(npy + '/edge_index.npy')), **masks)
torch.save(data, sys.argv[2])
"""


def write_pyg_file(ref: Path, folder: Path, inputs: Path, args) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    subprocess.run([str(args.pyg_python), "-c", PYG_WRITER, str(inputs / "npy"), str(folder / "graph.pt")], check=True)


def given_relations(meta: dict) -> list[str]:
    """The relations as a user gives them (each once, the hub's reverses left out), by their file names."""
    return [typed_hub.NAME_SEPARATOR.join(typed_hub.relation_of(k))
            for k, info in meta["relations"].items() if not info["reverse_of"]]


def write_typed_npy(ref: Path, folder: Path, inputs: Path, args) -> None:
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
    for name in ("labels", *typed_hub.SPLITS):
        link_or_copy(ref / f"{name}.npy", folder / "nodes" / target / f"{name}.npy")
    for i, part in enumerate(given_relations(meta)):
        np.save(folder / "edges" / f"{part}.npy", shuffled(np.load(ref / f"edge_index-{part}.npy"), i))
    (folder / "graph.json").write_text(json.dumps({"target": target, **({"num_nodes": counts} if counts else {})}))


def write_igbh(ref: Path, folder: Path, inputs: Path, args) -> None:
    meta = json.loads((ref / "meta.json").read_text())
    processed = folder / "processed"
    for t, info in meta["node_types"].items():
        (processed / t).mkdir(parents=True, exist_ok=True)
        if not info["feature_dim"]:
            raise SystemExit(f"igbh: IGB's layout has features on every type; {t!r} has none (use features=all)")
        link_or_copy(ref / f"features-{t}.npy", processed / t / "node_feat.npy")
    link_or_copy(ref / "labels.npy", processed / typed_npy.IGBH_TARGET / typed_npy.IGBH_LABEL_FILES[19])
    for i, part in enumerate(given_relations(meta)):
        (processed / part).mkdir(exist_ok=True)
        edges = shuffled(np.load(ref / f"edge_index-{part}.npy"), i)
        np.save(processed / part / "edge_index.npy", np.ascontiguousarray(edges.T))  # IGB's [E, 2]


# each input's writer, in the order they are written (graphbolt and the edge lists reuse npy's shuffled edges)
WRITERS = {"npy": write_npy, "graphbolt": write_graphbolt, "edge-list": write_edge_list,
           "edge-list-csv": lambda *a: write_edge_list(*a, csv=True), "pyg-file": write_pyg_file,
           "typed-npy": write_typed_npy, "igbh": write_igbh}
INPUT_FILE = {"pyg-file": "graph.pt"}  # an input that is a file in its folder


def write_inputs(ref: Path, work: Path, formats: list[str], args) -> dict[str, Path]:
    """Each input, rewritten when the reference changed (its checksums are the stamp)."""
    stamp = (ref / "checksums.json").read_text()
    inputs, paths = work / "inputs", {}
    needed = set(formats) | ({"npy"} if not args.typed else set())
    for fmt in [f for f in WRITERS if f in needed]:
        folder, done = inputs / fmt, inputs / f".{fmt}.done"
        paths[fmt] = folder / INPUT_FILE.get(fmt, "")
        if done.is_file() and done.read_text() == stamp:
            continue
        shutil.rmtree(folder, ignore_errors=True)
        print(f"writing the {fmt} input ...", flush=True)
        started = time.perf_counter()
        WRITERS[fmt](ref, folder, inputs, args)
        done.write_text(stamp)
        print(f"  {time.perf_counter() - started:.1f} s", flush=True)
    paths["in-memory"] = paths.get("npy")
    return paths


CONVERT = """
import json, sys, time
from pathlib import Path
from bench import datasets
name, cache, mode = sys.argv[1:4]
spec = datasets.parse_name(name)
started = time.perf_counter()
if mode == "in-memory":
    import numpy as np
    from bench.datasets import hub
    p = Path(name.partition(":")[2])
    ei = np.load(p / "edge_index.npy")
    n = np.load(p / "features.npy", mmap_mode="r").shape[0]
    edge_index, indptr = hub.csc_from_coo(np.concatenate([ei[0], ei[1]]), np.concatenate([ei[1], ei[0]]), n)
    del ei
    names = ("features", "labels", "train_idx", "val_idx", "test_idx")
    arrays = {"edge_index": edge_index, "csc_indptr": indptr, **{k: np.load(p / f"{k}.npy") for k in names}}
    out = hub.write(spec, Path(cache), arrays)
else:
    out = datasets.materialiser(spec["source"])(spec, Path(cache))
seconds = time.perf_counter() - started
# VmHWM, not ru_maxrss: that would carry the parent's size over from the fork
hwm = next(int(line.split()[1]) * 1024 for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps({"hub": str(out), "seconds": seconds, "vm_hwm_bytes": hwm}))
"""


def run_sampled(cmd: list[str], env: dict, interval: float = 0.05) -> tuple[int, str, str, int, float]:
    """Run `cmd`: (return code, stdout, stderr, its process tree's peak RSS, wall seconds)."""
    import psutil

    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    peak, stop = [0], threading.Event()

    def sample():
        root = psutil.Process(proc.pid)
        while not stop.is_set():
            with contextlib.suppress(psutil.Error):
                peak[0] = max(peak[0], sum(p.memory_info().rss for p in [root, *root.children(recursive=True)]))
            stop.wait(interval)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    started = time.perf_counter()
    out, err = proc.communicate()
    wall = time.perf_counter() - started
    stop.set()
    sampler.join()
    return proc.returncode, out, err, peak[0], wall


def measure(fmt: str, name: str, cache: Path, args) -> dict:
    """One way in, alone in a fresh process, into the empty hub `cache`."""
    shutil.rmtree(cache, ignore_errors=True)
    cache.mkdir(parents=True)
    python = str(args.pyg_python) if fmt == "pyg-file" else sys.executable
    if fmt == "generator-cli":  # what the user runs: the CLI's own imports included
        cmd = [python, "-m", "bench.cli", "datasets", "prepare", name, "--cache-dir", str(cache)]
    else:
        cmd = [python, "-c", CONVERT, name, str(cache), "in-memory" if fmt == "in-memory" else "stream"]
    # this checkout first on PYTHONPATH: the converting process imports the same bench
    path = os.pathsep.join(filter(None, [str(Path(__file__).resolve().parents[2]), os.environ.get("PYTHONPATH")]))
    code, out, err, peak, wall = run_sampled(cmd, {**os.environ, "PYTHONPATH": path, "GNNBENCH_CACHE": str(cache)})
    if code != 0:
        raise SystemExit(f"{fmt}: the conversion failed ({code}):\n{(err or out)[-3000:]}")
    if fmt == "generator-cli":  # the CLI says neither its seconds nor its high-water mark: the sampled peak
        done = {"hub": hub.dataset_dir(datasets.parse_name(name), cache), "seconds": wall, "vm_hwm_bytes": 0}
    else:
        done = json.loads(out.strip().splitlines()[-1])
    hub_dir, arrays = Path(done["hub"]), None if args.typed else PLAIN_ARRAYS
    return {"format": fmt, "source": datasets.parse_name(name)["source"], "dataset": name,
            "hub_bytes": sum((hub_dir / f"{a}.npy").stat().st_size for a in arrays) if arrays
            else sum(p.stat().st_size for p in hub_dir.glob("*.npy")),
            "peak_rss_bytes": peak, "vm_hwm_bytes": done["vm_hwm_bytes"], "convert_s": round(done["seconds"], 2),
            "wall_s": round(wall, 2), "hub": str(hub_dir), "arrays": array_digests(hub_dir, arrays),
            "phases": json.loads((hub_dir / "meta.json").read_text()).get("convert_phases")}


def array_digests(hub_dir: Path, arrays: tuple[str, ...] | None) -> dict:
    """Each array's SHA-256 as checksums.json records it (of `arrays` only, where given)."""
    recorded = json.loads((Path(hub_dir) / "checksums.json").read_text())
    files = recorded.get("files", recorded)
    return {name.removesuffix(".npy"): entry["sha256"] for name, entry in sorted(files.items())
            if arrays is None or name.removesuffix(".npy") in arrays}


def compare(fmt: str, r: dict, reference: dict) -> list[str]:
    """The arrays that differ from the reference's (for igbh, its splits against IGB's rule)."""
    names = sorted(set(reference) | set(r["arrays"]))
    if fmt != "igbh":
        return [a for a in names if r["arrays"].get(a) != reference.get(a)]
    differs = [a for a in names if a not in typed_hub.SPLITS and r["arrays"].get(a) != reference.get(a)]
    rule = typed_npy.igbh_splits(int(np.load(Path(r["hub"]) / "labels.npy", mmap_mode="r").shape[0]))
    return differs + [s for s in typed_hub.SPLITS if not np.array_equal(np.load(Path(r["hub"]) / f"{s}.npy"), rule[s])]


def high_water(r: dict) -> int:
    return max(r["peak_rss_bytes"], r["vm_hwm_bytes"])


def peak_phase(r: dict) -> str:
    """The writer's step by whose end the high-water mark was reached (meta.json's convert_phases)."""
    phases = [p for p in r.get("phases") or [] if "vm_hwm_bytes" in p]
    if not phases:
        return "n/a"
    top = max(p["vm_hwm_bytes"] for p in phases)
    first = next(p for p in phases if p["vm_hwm_bytes"] == top)
    return first["phase"] + (" (or before: reading or drawing the graph)" if first is phases[0] else "")


def table(result: dict, typed: bool) -> str:
    size = (lambda b: f"{b / 2**20:.0f} MiB") if typed else (lambda b: f"{b / 2**30:.2f} GiB")
    lines = ["| way in | input on disk | hub | peak RSS (psutil, every 50 ms) | VmHWM (kernel's peak) | peak / hub | "
             "under 2x hub | time | arrays = reference's | high-water mark reached in |", "|---" * 10 + "|"]
    for r in result["conversions"]:
        lines.append(f"| {r['format']} | {size(r['input_bytes']) if r.get('input_bytes') else 'n/a'} | "
                     f"{size(r['hub_bytes'])} | {size(r['peak_rss_bytes'])} | "
                     f"{size(r['vm_hwm_bytes']) if r['vm_hwm_bytes'] else 'n/a'} | {high_water(r) / r['hub_bytes']:.2f} | "
                     f"{'yes' if high_water(r) < 2 * r['hub_bytes'] else 'NO'} | {r['convert_s']:.1f} s | "
                     f"{'yes' if r['same_as_reference'] else 'NO: ' + ', '.join(r['differs'])} | {peak_phase(r)} |")
    return "\n".join(lines)


def du(path: Path) -> int:
    return path.stat().st_size if path.is_file() else sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def graph_summary(meta: dict, typed: bool) -> dict:
    if typed:
        return {"name": meta["name"], "num_nodes": meta["num_nodes"], "num_edges": meta["num_edges"],
                "node_types": meta["node_types"], "relations": {k: v["num_edges"] for k, v in meta["relations"].items()}}
    return {k: meta[k] for k in ("name", "num_nodes", "num_edges", "feature_dim", "num_classes")}


def parse_args(argv: list[str]):
    parser = argparse.ArgumentParser(prog="python -m bench.datasets.convert_benchmark", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--typed", action="store_true", help="a typed graph (typed-synthetic and its ways in)")
    parser.add_argument("--scale", type=int, help="plain: 2^scale nodes (default 21: products-scale); "
                        "typed: typed-synthetic's scale (default 100: IGBH-tiny's)")
    parser.add_argument("--edge-factor", type=int, default=19, help="plain: RMAT edges per node (default 19: 64 M directed)")
    parser.add_argument("--feature-dim", type=int, help="default 100 (plain), 128 on every type (typed)")
    parser.add_argument("--formats", help=f"comma-separated, of {', '.join(FORMATS['plain'])} (plain; default: all, "
                        f"pyg-file where --pyg-python is given), of {', '.join(FORMATS['typed'])} (typed; default: all)")
    parser.add_argument("--in-memory", action="store_true", help="plain: also measure the in-memory path (hub.write)")
    parser.add_argument("--pyg-python", type=Path, help="the pyg stack's interpreter, for pyg-file (`gnnbench stacks list`)")
    parser.add_argument("--work", type=Path, required=True, help="a folder for the graph, the inputs and the hubs")
    parser.add_argument("--out", type=Path, required=True, help="the result JSON (a Markdown table beside it)")
    args = parser.parse_args(argv)
    shape = "typed" if args.typed else "plain"
    args.scale = args.scale or (100 if args.typed else 21)
    args.feature_dim = args.feature_dim or (128 if args.typed else 100)
    allowed = FORMATS[shape]
    formats = [f for f in (args.formats or ",".join(f for f in allowed if f != "pyg-file" or args.pyg_python)).split(",") if f]
    if unknown := set(formats) - set(allowed):
        parser.error(f"unknown format(s) for a {shape} graph: {', '.join(sorted(unknown))}; allowed: {', '.join(allowed)}")
    if "pyg-file" in formats and not (args.pyg_python and args.pyg_python.is_file()):
        parser.error("pyg-file is written and converted in the pyg stack: --pyg-python PATH, its interpreter "
                     "(`gnnbench stacks list` shows it; `gnnbench stacks install pyg` makes it)")
    if args.typed and args.in_memory:
        parser.error("--in-memory is the plain graph's (a typed graph has no in-memory path)")
    return args, formats


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args, formats = parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    name = reference_name(args)
    first = None
    if args.typed:  # the generator's run is measured, and its hub is the reference
        print("generating the reference (measured: generator) ...", flush=True)
        first = measure("generator", name, args.work / "reference", args)
        ref = Path(first["hub"])
    else:
        spec = datasets.parse_name(name)
        if not hub.is_materialised(spec, args.work / "cache"):
            print(f"generating {spec['name']} ...", flush=True)
        ref = datasets.materialiser("synthetic")(spec, args.work / "cache")
    reference = first["arrays"] if first else array_digests(ref, PLAIN_ARRAYS)
    paths = write_inputs(ref, args.work, formats, args)
    conversions = []
    for fmt in formats + (["in-memory"] if args.in_memory else []):
        if fmt == "generator":
            r = first
        else:
            print(f"converting {fmt} ...", flush=True)
            r = measure(fmt, f"{SOURCE_OF.get(fmt, fmt)}:{paths[fmt]}" if fmt in paths else name, args.work / "hubs" / fmt, args)
            r["input_bytes"] = du(paths[fmt]) if fmt in paths else None
        r["differs"] = compare(fmt, r, reference)
        shutil.rmtree(args.work / "hubs" / fmt, ignore_errors=True)  # the reference (generator's) is elsewhere
        r["same_as_reference"] = not r["differs"]
        print(f"  peak RSS {r['peak_rss_bytes'] / 2**20:.0f} MiB (VmHWM {r['vm_hwm_bytes'] / 2**20:.0f}), hub "
              f"{r['hub_bytes'] / 2**20:.0f} MiB, {r['convert_s']} s, same as the reference: {r['same_as_reference']}",
              flush=True)
        conversions.append(r)
    import psutil

    result = {"command": "python -m bench.datasets.convert_benchmark " + " ".join(argv),
              "graph": graph_summary(json.loads((ref / "meta.json").read_text()), args.typed),
              "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                          "memory_bytes": psutil.virtual_memory().total, "load_1min": os.getloadavg()[0]},
              "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "conversions": conversions}
    text = table(result, args.typed)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    args.out.with_suffix(".md").write_text(f"{text}\n\nProduced by: `{result['command']}`\n")
    print(text)
    return 0 if all(high_water(r) < 2 * r["hub_bytes"] and r["same_as_reference"]
                    for r in conversions if r["format"] != "in-memory") else 1


if __name__ == "__main__":
    sys.exit(main())

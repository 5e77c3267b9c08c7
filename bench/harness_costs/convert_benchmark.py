"""The conversion benchmark: peak RSS and time of converting a user's graph into the hub, per
input format, against the hub's own size (a benchmark, not a test: it writes a JSON and a
Markdown table).

    python -m bench.harness_costs.convert_benchmark [--scale 21 --edge-factor 19 --feature-dim 100]
        [--formats npy,graphbolt,edge-list,edge-list-csv,pyg-file] [--in-memory] --work DIR --out FILE.json
    python -m bench.harness_costs.convert_benchmark --typed ...   (a typed graph: typed_convert_benchmark.py)

1. The graph: the synthetic generator's (products-scale by default: 2,097,152 nodes, 64 M directed
   edges after symmetrising, 100 features, 47 classes), generated once into DIR/cache.
2. The inputs, written once per format under DIR/inputs (not measured): its directed edges in a
   random order (so the conversion sorts for real), its features, labels and splits. The
   edge-list's node table has its rows in a random order too (so feature rows are scattered).
   The PyG file is written in the pyg stack.
3. Each conversion runs alone in a fresh process (the pyg stack's interpreter for pyg-file, this
   one for the others), into an empty hub; its RSS is sampled with psutil every 50 ms over the
   whole process tree, and the kernel's high-water mark (ru_maxrss) is read when it exits.
   `--in-memory` adds today's other path for comparison: the arrays loaded whole, edges
   de-duplicated with hub.csc_from_coo's one np.unique, written by hub.write.
4. Each converted hub is compared with the synthetic graph's own hub (the SHA-256 of each array
   in checksums.json): the conversion at full size is a round trip too.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from bench.datasets import SOURCES, user_files
from bench import datasets
from bench.datasets import hub
from bench import stacks
from bench.harness_costs import typed_convert_benchmark
from bench.harness_costs.fresh_process import du, machine, repo_env, run_sampled, write_result

# one input per source of a user's own graph (the registry's sources with USER_FILES), the edge list
# also as CSV, and today's in-memory path (npy read whole)
SOURCE_OF = {**{s: s for s in SOURCES if user_files(s)}, "edge-list-csv": "edge-list", "in-memory": "npy"}
FORMATS = tuple(f for f in SOURCE_OF if f != "in-memory")
SPLITS = ("train", "val", "test")
BLOCK = 1 << 22


def synthetic_spec(args) -> dict:
    return datasets.parse_name(f"synthetic:scale={args.scale},edge_factor={args.edge_factor},"
                               f"feature_dim={args.feature_dim},num_classes=47,train_frac=0.08,val_frac=0.01,"
                               "test_frac=0.01")


def reference(args, work: Path) -> Path:
    spec = synthetic_spec(args)
    if not hub.is_materialised(spec, work / "cache"):
        print(f"generating {spec['name']} ...", flush=True)
    return datasets.materialiser("synthetic")(spec, work / "cache")


# --- the inputs (written once, not measured) ---------------------------------------------------

def shuffled_edges(ref: Path, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    ei = np.load(ref / "edge_index.npy", mmap_mode="r")
    order = np.random.default_rng(seed).permutation(ei.shape[1])
    return np.asarray(ei[0])[order], np.asarray(ei[1])[order]


def write_npy(ref: Path, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    src, dst = shuffled_edges(ref)
    np.save(folder / "edge_index.npy", np.stack([src, dst]))
    del src, dst
    for name in ("features", "labels", *(f"{s}_idx" for s in SPLITS)):
        shutil.copyfile(ref / f"{name}.npy", folder / f"{name}.npy")


def write_graphbolt(ref: Path, folder: Path, npy: Path) -> None:
    import yaml

    (folder / "set").mkdir(parents=True, exist_ok=True)
    os.link(npy / "edge_index.npy", folder / "edges.npy") if not (folder / "edges.npy").exists() else None
    shutil.copyfile(ref / "features.npy", folder / "feat.npy")
    labels = np.load(ref / "labels.npy")
    task = {"name": "node_classification", "num_classes": int(labels.max()) + 1}
    for split, key in zip(SPLITS, ("train_set", "validation_set", "test_set")):
        ids = np.load(ref / f"{split}_idx.npy")
        np.save(folder / f"set/{split}.npy", ids)
        np.save(folder / f"set/{split}_labels.npy", labels[ids])
        task[key] = [{"data": [{"name": "seeds", "format": "numpy", "path": f"set/{split}.npy"},
                               {"name": "labels", "format": "numpy", "path": f"set/{split}_labels.npy"}]}]
    n = int(labels.shape[0])
    meta = {"dataset_name": "products-scale", "graph": {"nodes": [{"num": n}], "edges": [{"format": "numpy", "path": "edges.npy"}]},
            "feature_data": [{"domain": "node", "name": "feat", "format": "numpy", "path": "feat.npy", "in_memory": False},
                             {"domain": "node", "name": "label", "format": "numpy", "path": "label.npy"}],
            "tasks": [task]}
    np.save(folder / "label.npy", labels)  # every node's label (the sets alone label only theirs)
    (folder / "metadata.yaml").write_text(yaml.safe_dump(meta, sort_keys=False))


def write_edge_list(ref: Path, folder: Path, npy: Path, csv: bool) -> None:
    import pyarrow as pa
    import pyarrow.csv as pcsv
    import pyarrow.parquet as pq

    folder.mkdir(parents=True, exist_ok=True)
    ei = np.load(npy / "edge_index.npy", mmap_mode="r")
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
    edges_file = folder / ("edges.csv" if csv else "edges.parquet")
    nodes_file = folder / ("nodes.csv" if csv else "nodes.parquet")
    writer = pcsv.CSVWriter(edges_file, edge_schema) if csv else pq.ParquetWriter(edges_file, edge_schema)
    with writer:
        for start in range(0, ei.shape[1], BLOCK):
            writer.write_table(pa.table({"src": np.asarray(ei[0, start:start + BLOCK]),
                                         "dst": np.asarray(ei[1, start:start + BLOCK])}, schema=edge_schema))
    writer = pcsv.CSVWriter(nodes_file, node_schema) if csv else pq.ParquetWriter(nodes_file, node_schema)
    step = 1 << 18
    with writer:
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


def pyg_python() -> Path:
    stack = stacks.get("pyg")
    if not stack.installed:
        raise SystemExit("the pyg stack is not installed (gnnbench stacks install pyg): pyg-file needs it")
    return Path(stack.python)


def write_inputs(args, work: Path, ref: Path, formats: list[str]) -> dict[str, Path]:
    inputs = work / "inputs"
    paths = {"npy": inputs / "npy", "graphbolt": inputs / "graphbolt", "edge-list": inputs / "edge-list",
             "edge-list-csv": inputs / "edge-list-csv", "pyg-file": inputs / "pyg" / "graph.pt",
             "in-memory": inputs / "npy"}
    needed = set(formats) | {"npy"}
    for fmt in [f for f in FORMATS if f in needed]:
        path, done = paths[fmt], paths[fmt].parent / f".{paths[fmt].name}.done"
        if done.exists():
            continue
        print(f"writing the {fmt} input ...", flush=True)
        started = time.perf_counter()
        if fmt == "npy":
            write_npy(ref, path)
        elif fmt == "graphbolt":
            write_graphbolt(ref, path, paths["npy"])
        elif fmt in ("edge-list", "edge-list-csv"):
            write_edge_list(ref, path, paths["npy"], csv=fmt == "edge-list-csv")
        elif fmt == "pyg-file":
            path.parent.mkdir(parents=True, exist_ok=True)
            subprocess.run([str(pyg_python()), "-c", PYG_WRITER, str(paths["npy"]), str(path)], check=True)
        done.touch()
        print(f"  {time.perf_counter() - started:.1f} s", flush=True)
    return paths


# --- a measured conversion ---------------------------------------------------------------------

CONVERT = """
import json, sys, time
from pathlib import Path
from bench import datasets
source, path, cache, mode = sys.argv[1:5]
spec = datasets.parse_name(f"{source}:{path}")
started = time.perf_counter()
if mode == "in-memory":
    import numpy as np
    from bench.datasets import hub
    p = Path(path)
    ei = np.load(p / "edge_index.npy")
    n = np.load(p / "features.npy", mmap_mode="r").shape[0]
    edge_index, indptr = hub.csc_from_coo(np.concatenate([ei[0], ei[1]]), np.concatenate([ei[1], ei[0]]), n)
    del ei
    arrays = {"edge_index": edge_index, "csc_indptr": indptr, "features": np.load(p / "features.npy"),
              "labels": np.load(p / "labels.npy"),
              **{f"{s}_idx": np.load(p / f"{s}_idx.npy") for s in ("train", "val", "test")}}
    out = hub.write({**spec, "source": "npy"}, Path(cache), arrays)
else:
    out = datasets.materialiser(source)(spec, Path(cache))
seconds = time.perf_counter() - started
# this process's own high-water mark: VmHWM is its memory map's (ru_maxrss would carry the parent's
# size over from the fork that started it)
hwm = next(int(line.split()[1]) * 1024 for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps({"hub": str(out), "seconds": seconds, "vm_hwm_bytes": hwm}))
"""


def measure(fmt: str, path: Path, work: Path, interval: float = 0.05) -> dict:
    cache = work / "hubs" / fmt
    shutil.rmtree(cache, ignore_errors=True)
    cache.mkdir(parents=True)
    python = pyg_python() if fmt == "pyg-file" else Path(sys.executable)
    mode = "in-memory" if fmt == "in-memory" else "stream"
    code, out, err, peak, wall = run_sampled([str(python), "-c", CONVERT, SOURCE_OF[fmt], str(path), str(cache), mode],
                                             repo_env(), interval)
    if code != 0:
        raise SystemExit(f"{fmt}: the conversion failed ({code}):\n{err[-3000:]}")
    done = json.loads(out.strip().splitlines()[-1])
    hub_dir = Path(done["hub"])
    return {"format": fmt, "source": SOURCE_OF[fmt], "input": str(path), "input_bytes": du(path),
            "hub_bytes": hub_bytes(hub_dir), "peak_rss_bytes": peak, "vm_hwm_bytes": done["vm_hwm_bytes"],
            "convert_s": round(done["seconds"], 2), "wall_s": round(wall, 2), "hub": str(hub_dir),
            "arrays": array_digests(hub_dir),
            "phases": json.loads((hub_dir / "meta.json").read_text()).get("convert_phases")}


HUB_ARRAYS = ("edge_index", "csc_indptr", "features", "labels", "train_idx", "val_idx", "test_idx")


def hub_bytes(hub_dir: Path) -> int:
    """The hub's own size: its arrays (what the 2x bound is against)."""
    return sum((hub_dir / f"{a}.npy").stat().st_size for a in HUB_ARRAYS)


def array_digests(hub_dir: Path) -> dict:
    recorded = json.loads((hub_dir / "checksums.json").read_text())
    files = recorded.get("files", recorded)
    return {a: files[f"{a}.npy"]["sha256"] for a in HUB_ARRAYS if f"{a}.npy" in files}


# --- the report ----------------------------------------------------------------------------------

def table(result: dict) -> str:
    gib = lambda b: f"{b / 2**30:.2f} GiB"  # noqa: E731
    lines = ["| format | input on disk | hub | peak RSS (psutil, every 50 ms) | VmHWM (kernel's peak) | peak / hub | under 2x hub | time | arrays = synthetic's |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in result["conversions"]:
        high = max(r["peak_rss_bytes"], r["vm_hwm_bytes"])
        ratio = high / r["hub_bytes"]
        lines.append(f"| {r['format']} | {gib(r['input_bytes'])} | {gib(r['hub_bytes'])} | {gib(r['peak_rss_bytes'])} | "
                     f"{gib(r['vm_hwm_bytes'])} | {ratio:.2f} | {'yes' if high < 2 * r['hub_bytes'] else 'NO'} | "
                     f"{r['convert_s']:.1f} s | {'yes' if r['same_as_synthetic'] else 'NO: ' + ', '.join(r['differs'])} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    if "--typed" in (sys.argv[1:] if argv is None else argv):  # a typed graph: its own module, its own inputs
        return typed_convert_benchmark.main([a for a in (sys.argv[1:] if argv is None else argv) if a != "--typed"])
    parser = argparse.ArgumentParser(prog="python -m bench.harness_costs.convert_benchmark", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", type=int, default=21, help="2^scale nodes (default 21: products-scale)")
    parser.add_argument("--edge-factor", type=int, default=19, help="RMAT edges per node (default 19: 64 M directed)")
    parser.add_argument("--feature-dim", type=int, default=100)
    parser.add_argument("--formats", default=",".join(FORMATS), help=f"comma-separated, of {', '.join(FORMATS)}")
    parser.add_argument("--in-memory", action="store_true", help="also measure today's in-memory path (hub.write)")
    parser.add_argument("--work", type=Path, required=True, help="a folder for the graph, the inputs and the hubs")
    parser.add_argument("--out", type=Path, required=True, help="the result JSON (a Markdown table beside it)")
    args = parser.parse_args(argv)
    formats = [f for f in args.formats.split(",") if f]
    unknown = set(formats) - set(FORMATS)
    if unknown:
        parser.error(f"unknown format(s) {', '.join(sorted(unknown))}; allowed: {', '.join(FORMATS)}")
    args.work.mkdir(parents=True, exist_ok=True)
    ref = reference(args, args.work)
    paths = write_inputs(args, args.work, ref, formats)
    ref_digests = array_digests(ref)
    runs = formats + (["in-memory"] if args.in_memory else [])
    conversions = []
    for fmt in runs:
        print(f"converting {fmt} ...", flush=True)
        r = measure(fmt, paths[fmt], args.work)
        r["differs"] = [a for a in HUB_ARRAYS if r["arrays"].get(a) != ref_digests.get(a)]
        r["same_as_synthetic"] = not r["differs"]
        print(f"  peak RSS {r['peak_rss_bytes'] / 2**30:.2f} GiB (VmHWM {r['vm_hwm_bytes'] / 2**30:.2f}), "
              f"hub {r['hub_bytes'] / 2**30:.2f} GiB, {r['convert_s']} s, same as synthetic: {r['same_as_synthetic']}",
              flush=True)
        shutil.rmtree(args.work / "hubs" / fmt, ignore_errors=True)
        conversions.append(r)
    meta = json.loads((ref / "meta.json").read_text())
    result = {"command": "python -m bench.harness_costs.convert_benchmark " + " ".join(argv if argv is not None else sys.argv[1:]),
              "graph": {k: meta[k] for k in ("name", "num_nodes", "num_edges", "feature_dim", "num_classes")},
              "machine": machine(),
              "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "conversions": conversions}
    text = table(result)
    write_result(result, args.out, text)
    print(text)
    return 0 if all(max(r["peak_rss_bytes"], r["vm_hwm_bytes"]) < 2 * r["hub_bytes"] and r["same_as_synthetic"]
                    for r in conversions if r["format"] != "in-memory") else 1


if __name__ == "__main__":
    sys.exit(main())

"""Your own graph as a PyG file (source `pyg-file`; docs/own-graph.md): a `Data` saved with
`torch.save`, or an InMemoryDataset's file of one graph, read in the pyg stack. A pickle can run
code: the file is loaded with `torch.load(weights_only=True)` once its pickle is checked to name
nothing a graph file does not hold; anything else needs `unsafe_load: true`, for a file you trust.
A zip-format file is memory-mapped, read a block at a time. Checks and conversion: user_graph.py.
"""

from __future__ import annotations

import pickle
import re
from pathlib import Path

import numpy as np

from bench.datasets import user_graph as ug

USER_FILES = True
PARAMS, DEFAULTS = ug.params_of({"unsafe_load": (bool, {})}, {"unsafe_load": False})
SIZES_NOTE = ("pyg-file:PATH     your own graph: a PyG Data (or InMemoryDataset file) saved with torch.save; "
              "docs/own-graph.md")
ESTIMATE_ORIGIN = "known once converted (reading a PyG file needs the pyg stack)"
UNSAFE_HINT = "unsafe_load: true in the dataset's params (pyg-file:path=PATH,unsafe_load=true)"
# What the pickle of a PyG graph file names. torch's weights_only load allows more, some of which
# builds objects as large as the pickle asks (bytearray(3e9) from 952 bytes): refused before torch reads it.
GRAPH_GLOBALS = {
    "collections.OrderedDict", "torch._utils._rebuild_tensor_v2", "torch._utils._rebuild_tensor_v3",
    "torch._utils._rebuild_tensor", "torch.Size",
    "torch_geometric.data.data.Data", "torch_geometric.data.data.DataEdgeAttr",
    "torch_geometric.data.data.DataTensorAttr", "torch_geometric.data.storage.BaseStorage",
    "torch_geometric.data.storage.NodeStorage", "torch_geometric.data.storage.EdgeStorage",
    "torch_geometric.data.storage.GlobalStorage", "torch_geometric.data.hetero_data.HeteroData",
}
# torch.FloatStorage..., and the dtypes newer torch names beside an untyped storage (torch.uint16...)
STORAGE_GLOBAL = re.compile(r"torch\.(?:[A-Z][A-Za-z0-9]*Storage|storage\.UntypedStorage|u?int\d+|float\d+|bfloat16|bool"
                            r"|complex\d+|float8_\w+)")
PICKLES_READ = 5  # a legacy file: magic number, protocol, system info, the object, the storage keys
SPLIT_NAMES = {"train": ("train_mask", "train_idx"), "val": ("val_mask", "valid_mask", "val_idx", "valid_idx"),
               "test": ("test_mask", "test_idx")}


def source_files(params: dict) -> list[Path]:
    return [Path(params["path"])]


def load_file(path: Path, unsafe: bool):
    """The file's object and whether its tensors are mapped: weights_only, or (unsafe) a full unpickle."""
    import torch
    import torch_geometric  # noqa: F401 - registers PyG's classes as safe globals for weights_only

    if not path.is_file():
        raise ug.fail(f"{path}: no such file; allowed: a file written by torch.save (a PyG Data or an "
                      "InMemoryDataset's processed file)")
    if unsafe:
        try:
            return torch.load(path, weights_only=False, map_location="cpu"), False
        except Exception as exc:  # noqa: BLE001 - whatever the unpickler raises
            raise ug.fail(f"{path}: cannot be loaded ({type(exc).__name__}: {' '.join(str(exc).split())[:200]})") from None
    refuse_unneeded_globals(path)
    for mmap in (True, False):  # a zip-format file is mapped; an old-format one is read whole
        try:
            with torch.serialization.safe_globals(data_containers()):
                return torch.load(path, weights_only=True, mmap=mmap, map_location="cpu"), mmap
        except pickle.UnpicklingError as exc:
            text = " ".join(str(exc).split())
            if "weights_only" in text or "GLOBAL" in text or "global" in text:
                detail = text[text.find("Unsupported global"):][:160] if "Unsupported global" in text else text[:160]
                raise ug.fail(f"{path}: it holds objects a safe load does not build ({detail}); a pickle can run "
                              f"code, so it was not loaded; allowed: a Data, or an InMemoryDataset's (data, slices) "
                              f"file, saved with torch.save; or, for a file you trust, {UNSAFE_HINT}") from None
            last = exc
        except RuntimeError as exc:  # not a zip file: read it without the map
            last = exc
        except Exception as exc:  # noqa: BLE001 - a file torch cannot read at all
            last = exc
            break
    raise ug.fail(f"{path}: not a file torch.save wrote ({type(last).__name__}: "
                  f"{' '.join(str(last).split())[:200]}); allowed: a PyG Data or InMemoryDataset file")


def pickle_globals(path: Path) -> set[str]:
    """Every `module.name` the file's pickle names (read with pickletools, nothing built)."""
    import io
    import pickletools
    import zipfile

    found: set[str] = set()

    def scan(stream, count: int) -> None:
        for _ in range(count):
            for op, arg, _ in pickletools.genops(stream):
                if op.name == "GLOBAL":
                    found.add(str(arg).replace(" ", "."))
                elif op.name in ("STACK_GLOBAL", "INST", "OBJ"):
                    raise ValueError(f"it names a class with {op.name}, which torch's safe load does not read "
                                     "(torch.save's default pickle protocol 2 never writes it)")

    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as archive:
            records = [i for i in archive.infolist() if i.filename == "data.pkl" or i.filename.endswith("/data.pkl")]
            if not records:
                raise ValueError("a zip file without data.pkl")
            size = path.stat().st_size
            for record in records:
                if record.file_size > size:  # a compressed record that unpacks larger than the file: a zip bomb
                    raise ValueError(f"{record.filename} unpacks to {record.file_size:,} bytes, more than the file")
                with archive.open(record) as stream:
                    scan(io.BufferedReader(stream), 1)
    else:
        with open(path, "rb") as stream:
            try:
                scan(stream, PICKLES_READ)
            except ValueError as exc:  # fewer pickles than a legacy file has: what torch makes of it is said below
                if not found and "exhausted" not in str(exc):
                    raise
    return found


def refuse_unneeded_globals(path: Path) -> None:
    """Refuse a file whose pickle names anything a PyG graph file does not, before torch reads it."""
    try:
        names = pickle_globals(path)
    except (ValueError, EOFError, OSError, KeyError, RuntimeError) as exc:
        raise ug.fail(f"{path}: not a file torch.save wrote (its pickle cannot be read: "
                      f"{' '.join(str(exc).split())[:160]}); allowed: a PyG Data or InMemoryDataset file") from None
    if extra := sorted(n for n in names if n not in GRAPH_GLOBALS and not STORAGE_GLOBAL.fullmatch(n)):
        raise ug.fail(f"{path}: its pickle asks for {', '.join(extra[:3])}{' ...' if len(extra) > 3 else ''}, which a "
                      "graph file does not hold; a pickle can build objects as large as it asks, or run code, so it "
                      f"was not loaded; allowed: a Data, or an InMemoryDataset's (data, slices) file, saved with "
                      f"torch.save; or, for a file you trust, {UNSAFE_HINT}")


def data_containers() -> list:
    """PyG's plain containers a saved Data pickles, which PyG does not register as safe."""
    from torch_geometric.data import data as data_module
    from torch_geometric.data import storage

    names = [(data_module, "DataEdgeAttr"), (data_module, "DataTensorAttr"), (storage, "BaseStorage"),
             (storage, "NodeStorage"), (storage, "EdgeStorage"), (storage, "GlobalStorage")]
    return [getattr(module, name) for module, name in names if hasattr(module, name)]


def drop_pages(array: np.ndarray) -> None:
    """Give back the pages of a block read from the file's private map (MADV_DONTNEED)."""
    import ctypes
    import mmap

    if not array.size:
        return
    page = mmap.PAGESIZE
    address = array.__array_interface__["data"][0]
    start = address // page * page
    stop = -(-(address + array.nbytes) // page) * page
    libc = ctypes.CDLL(None, use_errno=True)
    libc.madvise(ctypes.c_void_p(start), ctypes.c_size_t(stop - start), 4)  # MADV_DONTNEED


def as_data(obj, path: Path):
    """The one graph in what the file held (a Data, a (data, slices) pair, a dict of tensors...)."""
    from torch_geometric.data import Data, InMemoryDataset
    from torch_geometric.data.data import BaseData

    slices = None
    if isinstance(obj, InMemoryDataset):
        if len(obj) != 1:
            raise ug.fail(f"{path}: a dataset of {len(obj)} graphs; allowed: one graph (node classification)")
        return obj[0]
    if isinstance(obj, tuple) and len(obj) in (2, 3):
        data, slices = obj[0], obj[1]
        cls = obj[2] if len(obj) == 3 else Data
        obj = cls.from_dict(data) if isinstance(data, dict) else data
    elif isinstance(obj, dict) and "edge_index" in obj:
        obj = Data.from_dict(obj)
    if not isinstance(obj, BaseData):
        raise ug.fail(f"{path}: holds a {type(obj).__name__}; allowed: a PyG Data, or an InMemoryDataset's "
                      "(data, slices) file")
    if isinstance(slices, dict):
        if many := [(k, len(v) - 1) for k, v in slices.items() if hasattr(v, "__len__") and len(v) > 2]:
            key, count = many[0]
            raise ug.fail(f"{path}: an InMemoryDataset of {count} graphs (slices of {key}); allowed: one graph "
                          "(node classification)")
    return obj


def open_graph(label: str, params: dict) -> ug.UserGraph:
    import torch

    path = Path(params["path"])
    loaded, mapped = load_file(path, params["unsafe_load"])
    data = as_data(loaded, path)
    done = drop_pages if mapped else (lambda array: None)
    keys = set(data.keys()) if callable(getattr(data, "keys", None)) else set(data.keys)
    notes = [f"{k} ignored: gnnbench trains on the graph's structure, not its edge attributes"
             for k in ("edge_weight", "edge_attr") if k in keys]
    for needed, rule in (("edge_index", "edge_index [2, E]"), ("x", "x [N, D]"), ("y", "y [N]")):
        if needed not in keys or getattr(data, needed) is None:
            raise ug.fail(f"{path}: the Data has no {needed} (it has {', '.join(sorted(keys)) or 'nothing'}); "
                          f"allowed: {rule}, with train/val/test masks or indices")

    def array(name: str) -> np.ndarray:
        value = getattr(data, name)
        if not isinstance(value, torch.Tensor):
            raise ug.fail(f"{path}: {name} is a {type(value).__name__}; allowed: a tensor")
        return value.detach().numpy()

    edge_index, x = array("edge_index"), array("x")
    if edge_index.ndim != 2 or edge_index.shape[0] != 2:
        raise ug.fail(f"{path}: edge_index has shape {list(edge_index.shape)}; allowed: [2, E]")
    if x.ndim != 2:
        raise ug.fail(f"{path}: x has shape {list(x.shape)}; allowed: [N, D]")
    n = x.shape[0]
    split_names = {}
    for split, names in SPLIT_NAMES.items():
        found = [k for k in names if k in keys and getattr(data, k) is not None]
        if not found:
            raise ug.fail(f"{path}: the Data has no {split} split ({' or '.join(names)}); allowed: a boolean mask "
                          "[N] or node ids for each of train, val and test")
        split_names[split] = found[0]
        value = array(found[0])
        if value.dtype == np.bool_ and value.ndim == 2:
            raise ug.fail(f"{path}: {found[0]} has shape {list(value.shape)} (several splits); allowed: one "
                          "split, a mask [N] (save data.train_mask[:, k] as train_mask)")

    def edge_chunks():
        for start in range(0, edge_index.shape[1], ug.EDGE_CHUNK):
            stop = start + ug.EDGE_CHUNK
            src, dst = edge_index[0, start:stop], edge_index[1, start:stop]
            yield ug.EdgeChunk(src, dst, start, lambda i, end: f"[{end}, {i}]")
            done(src)  # converted by now: the mapped pages read leave this process
            done(dst)

    def feature_blocks():
        step = ug.rows_per_block(x.shape[1], x.dtype.itemsize)
        for start in range(0, n, step):
            rows = x[start:start + step]
            yield start, np.array(rows), start
            done(rows)

    return ug.UserGraph(
        label=label, num_nodes=n, nodes_from="the rows of x",
        edges=ug.Input(path, "edge_index"), edge_dtype=edge_index.dtype, num_input_edges=edge_index.shape[1],
        edge_chunks=edge_chunks,
        features=ug.Input(path, "x"), feature_shape=x.shape, feature_dtype=x.dtype, feature_blocks=feature_blocks,
        labels=ug.Input(path, "y"), read_labels=lambda: array("y"),
        splits={s: ug.Input(path, k) for s, k in split_names.items()}, read_split=lambda s: array(split_names[s]),
        notes=notes)


def expected_stats(params: dict) -> dict:
    try:
        import torch  # noqa: F401
    except ImportError:  # the host: the sizes are known once the pyg stack converted it
        from bench.datasets import hub  # hub imports the registry, which imports this module: a cycle at the top

        raise hub.DatasetError(f"{params.get('path')}: a PyG file's sizes are read in the pyg stack; check and "
                               "convert it first (gnnbench datasets check pyg-file:PATH)") from None
    return ug.expected_stats(open_graph("?", params), params)


canonical_params, fingerprint, _, materialise = ug.source_hooks("pyg-file", source_files, open_graph)

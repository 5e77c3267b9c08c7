"""Planetoid citation graphs (Cora, CiteSeer, PubMed) through PyG's own `Planetoid` class, and
(REDDIT, the source `reddit`) Reddit through PyG's `Reddit` (pyg stack); where the raw files are
looked for: docs/datasets.md. Planetoid's are copied into a scratch folder (PyG never writes into a
shared data root) and checked against the official files' hashes first: they are pickles, which run code.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from bench.datasets import hub

# Published sizes (PyG's documentation), known before any download; edges are directed pairs.
KNOWN_STATS = {  # hub.sizes(nodes, edges, feature_dim, classes, train, val, test)
    "Cora": hub.sizes(2708, 10556, 1433, 7, 140, 500, 1000),
    "CiteSeer": hub.sizes(3327, 9104, 3703, 6, 120, 500, 1000),
    "PubMed": hub.sizes(19717, 88648, 500, 3, 60, 500, 1000),
}


# SHA-256 of the official raw files PyG's Planetoid downloads: github.com/kimiyoung/planetoid, data/ at
# commit af6abf468a772cc0 (MIT licence, Zhilin Yang); Cora's and CiteSeer's are also ../shared's copies.
RAW_SHA256 = {
    "ind.cora.x": "23cfa55d91c6f624233f5eb7b6e3f141f1bd2b2ae39608a63cf5d084bb27baab",
    "ind.cora.tx": "b9afbaa4a400df991f6f02ef677e1e44da55ffc04801fd02f9e673987829226a",
    "ind.cora.allx": "9419ba2f26f5c35243db64aba110e0f35a04851609e0dc5433450676ca6b8543",
    "ind.cora.y": "94465c14eb53e04ca262198dcbb2521ee8af60fb3f3d546cd6ca24a511b0e7d1",
    "ind.cora.ty": "41f5ac76596a1699cc33f53084a2419e92961c42bb75f36fc38e616d348532ad",
    "ind.cora.ally": "2b998f5cc7fedc86e7f97ca2498f47a1ffc1462c29e2d578b23bf3f62b6e7d71",
    "ind.cora.graph": "58f13302f39dde8852dad6fe6d15b89b077b6d7f837626bce671ef80344b383d",
    "ind.cora.test.index": "297ce89af2b51a6a194181c7dbe1796c6a1cf9cd9349a88383b1b1e227867875",
    "ind.citeseer.x": "d20de19150741e555de0ed037195630fc194114ebc7fd72ced62810148aa22f6",
    "ind.citeseer.tx": "539a8906a2da97628d212f2fdd668c109a8b3f0d36574b59e5d3fd5b5303da21",
    "ind.citeseer.allx": "2ac30345d95c9ec933a817ee0bdd6a5f077f8c184a20e696910192d534414668",
    "ind.citeseer.y": "8ba87e515d8e3ee3cf52f6d2c5b86aa73f11ecad825a808455209ec26cd54924",
    "ind.citeseer.ty": "55e5bd1ba1e733a04598753ad1a8d57957f4b8f89e74519f41f4f4938767e4ce",
    "ind.citeseer.ally": "f704b2d986dde6c2669934de1f3ae5696a6cf9455c0f6b2646a2d135ea0a1c95",
    "ind.citeseer.graph": "d79a4ef9d3e7169aee8946145f6b7306e35bc79bffad26346cfb94e10e9912a7",
    "ind.citeseer.test.index": "2af990671580b6b2df5d158d1038f8292e30c9cd821b5453f399659b25b723d4",
    "ind.pubmed.x": "fbe9cb5c47200d1b7769a26e579be3b7130b556831f9d850e77c4c74f2599b33",
    "ind.pubmed.tx": "4eb5f5d0f30f26497eb0ac6ac9719d09c67e284f1ed0385c93f3ef27a671da3d",
    "ind.pubmed.y": "e6c807633307a07ed659249006536a147c7999c797f11a2560752990181b41b3",
    "ind.pubmed.ty": "ee2e0d4819d9fbcc403689c3bf2e49face401b605932f093bc58ab6461130fdd",
    "ind.pubmed.ally": "0c37bbe3b5014ec365e9d393cf4791925e5ed94fb194305d74f064a8d7b50f0e",
    "ind.pubmed.graph": "5b89f0036ca22909471f1e6558eb42fa06e0c730a577bde5b058b40638f81dc9",
    "ind.pubmed.test.index": "b101d421688bbaecbd82e8a18f1e282378d6830f3a37666f28ebc47f844341b5",
}
# ind.pubmed.allx's content was not in the snapshot hashed: its git blob id (`git hash-object`) stands in.
RAW_GIT_BLOB = {"ind.pubmed.allx": "3b86bccf08111c37c632a9dd8ab63db25ea76361"}
OFFICIAL = "github.com/kimiyoung/planetoid, data/ (what PyG downloads)"


def raw_digest(path: Path) -> tuple[str, str, str]:
    """(kind, the file's digest, the official one's) for a raw file: SHA-256, or the git blob id."""
    data = path.read_bytes()
    if path.name in RAW_GIT_BLOB:
        return "git blob id", hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest(), RAW_GIT_BLOB[path.name]
    return "SHA-256", hashlib.sha256(data).hexdigest(), RAW_SHA256[path.name]


def check_raw(folder: Path, name: str, shown: Path | None = None) -> None:
    """Each raw file of `name` in `folder` is the official one (`shown`: the folder to name)."""
    for file in raw_files(name):
        kind, got, official = raw_digest(folder / file)
        if got != official:
            raise hub.DatasetError(
                f"{(shown or folder) / file}: not the official Planetoid file ({kind} {got[:16]}..., the official "
                f"{official[:16]}...); a Planetoid raw file is a pickle, which can run code, so it was not read; "
                f"allowed: the files from {OFFICIAL}: replace them, or remove them to download")


def raw_files(name: str) -> list[str]:
    return [f"ind.{name.lower()}.{part}" for part in ("x", "tx", "allx", "y", "ty", "ally", "graph", "test.index")]


def materialise(spec: dict, cache: Path, data_root: Path | None) -> Path:
    from torch_geometric.datasets import Planetoid  # the pyg stack only

    name = spec["params"]["name"]
    raw = hub.find_raw(data_root, "planetoid", f"{name}/raw", raw_files(name))
    if downloaded := raw is None:
        from torch_geometric.data import download_url

        def fetch(root: Path) -> Path:  # the raw files only (PyG's downloader); processed below, once checked
            for file in raw_files(name):
                download_url(f"{Planetoid.url}/{file}", str(root / name / "raw"))
            return root / name / "raw"

        raw = hub.download(spec["name"], cache, data_root, "planetoid", f"{name}/raw", raw_files(name), fetch)
    with tempfile.TemporaryDirectory(dir=cache) as scratch:
        shutil.copytree(raw, Path(scratch) / name / "raw")
        check_raw(Path(scratch) / name / "raw", name, shown=raw)  # the copies PyG reads, named as the user's
        with hub.reading_raw(spec["name"], raw):
            data = Planetoid(scratch, name)[0]
    return hub.write(spec, cache, pyg_arrays(data), expected=KNOWN_STATS.get(name) if downloaded else None)


def pyg_arrays(data) -> dict[str, np.ndarray]:
    """A PyG Data with train/val/test masks (Planetoid's, Reddit's) as hub.write takes it."""
    ei = data.edge_index.numpy()
    edge_index, indptr = hub.csc_from_coo(ei[0], ei[1], data.num_nodes)
    return {"edge_index": edge_index, "csc_indptr": indptr, "features": data.x.numpy().astype(np.float32),
            "labels": data.y.numpy().astype(np.int64),
            **{f"{s}_idx": np.flatnonzero(getattr(data, f"{s}_mask").numpy()).astype(np.int64)
               for s in ("train", "val", "test")}}


REDDIT_RAW = ["reddit_data.npz", "reddit_graph.npz"]
REDDIT_STATS = hub.sizes(232965, 114615892, 602, 41, 153431, 23831, 55703)  # PyG's documentation


def materialise_reddit(spec: dict, cache: Path, data_root: Path | None) -> Path:
    from torch_geometric.datasets import Reddit  # the pyg stack only

    raw = hub.find_raw(data_root, "reddit", "Reddit/raw", REDDIT_RAW)
    if downloaded := raw is None:
        def fetch(root: Path) -> Path:
            Reddit(str(root))  # PyG's own download
            return root / "raw"

        raw = hub.download(spec["name"], cache, data_root, "reddit", "Reddit/raw", REDDIT_RAW, fetch)
    with tempfile.TemporaryDirectory(dir=cache) as scratch:
        (Path(scratch) / "raw").symlink_to(raw, target_is_directory=True)
        with hub.reading_raw(spec["name"], raw):
            data = Reddit(scratch)[0]
    return hub.write(spec, cache, pyg_arrays(data), expected=REDDIT_STATS if downloaded else None)


# the source `reddit` (bench.datasets.SOURCES names it by attribute)
REDDIT = SimpleNamespace(expected_stats=lambda params: REDDIT_STATS, materialise=materialise_reddit)

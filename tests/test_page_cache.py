"""`page_cache: cold`: the store's files really leave the page cache (mincore before and after),
also while the store keeps them mapped, and reads stay bit for bit; the setting makes cells only
for stores read from files."""

from __future__ import annotations

import numpy as np
import pytest

from bench.datasets import hub, synthetic
from bench.run import suite as suite_mod
from bench.stores import files_of, lmdb_features, page_cache
from bench.stores.lmdb_features import LmdbFeatures


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    cache = tmp_path_factory.mktemp("hub")
    spec = {"name": "s11", "source": "synthetic",
            "params": synthetic.canonical_params({"scale": 11, "feature_dim": 256, "num_classes": 4})}
    synthetic.materialise(spec, cache)
    return hub.dataset_dir(spec, cache)


def test_eviction_empties_the_cache_of_a_plain_file(tmp_path):
    path = tmp_path / "blob"
    path.write_bytes(np.random.default_rng(0).bytes(8 << 20))
    path.read_bytes()  # cached now
    cached, pages = page_cache.resident(path)
    assert pages == (8 << 20) // page_cache.PAGE and cached > pages // 2
    assert page_cache.evict([path]) == 0.0
    assert page_cache.resident(path) == (0, pages)


def test_a_cold_lmdb_store_leaves_the_cache_while_mapped_and_reads_the_same(dataset):
    store = LmdbFeatures(lmdb_features.build(dataset), lmdb_features.fingerprint(dataset))
    files = files_of("lmdb", "node", dataset)
    assert files == [lmdb_features.store_dir(dataset) / "data.mdb"]
    every = np.arange(store.rows)
    first = store.gather(every)  # every page read, and mapped by LMDB in this process
    assert page_cache.resident_share(files) > 0.9
    assert page_cache.evict(files) == 0.0  # LMDB's own map of the file no longer holds its pages
    assert page_cache.resident_share(files) == 0.0
    again = store.gather(every[::-1])  # read back from the disk through the same open map
    assert again.tobytes() == first[::-1].tobytes() == np.load(dataset / "features.npy")[::-1].tobytes()
    assert page_cache.resident_share(files) > 0.9


def test_graphbolt_disk_and_sqlite_name_their_files_memory_none(dataset):
    assert files_of("graphbolt-disk", "node", dataset) == [dataset / "features.npy"]
    assert files_of("memory", "node", dataset) == []


def test_cold_cells_only_for_stores_read_from_files(write_suite):
    path = write_suite("""
name: s
datasets: {g: "synthetic:scale=9"}
backends: [dgl-graphbolt]
settings: {store: [memory, lmdb, graphbolt-disk], page_cache: [warm, cold]}
""")
    ids = sorted(c.id.split("/ws=1/")[1] for c in suite_mod.expand(suite_mod.load(path)[0]))
    # warm stays out of the ids (the default), cold is named; no cold in-memory cell
    assert ids == ["store=graphbolt-disk", "store=graphbolt-disk/page_cache=cold", "store=lmdb",
                   "store=lmdb/page_cache=cold", "store=memory"]

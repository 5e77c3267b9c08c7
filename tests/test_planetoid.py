"""Planetoid through PyG's own class, from an offline data root (GNNBENCH_DATA_ROOT)."""

from __future__ import annotations


import numpy as np

from bench.datasets import hub
from bench.run.runner import ensure_dataset
from tests.conftest import offline_data_root, require_stacks


data_root = offline_data_root


def test_cora_statistics_and_split(cache_dir):
    require_stacks("pyg")
    spec = {"name": "cora", "source": "planetoid", "params": {"name": "Cora"}}
    data = hub.load(ensure_dataset(spec, cache_dir, data_root()))
    card = data.card()
    assert (card["num_nodes"], card["num_edges"], card["feature_dim"], card["num_classes"]) == (2708, 10556, 1433, 7)
    assert (card["num_train"], card["num_val"], card["num_test"]) == (140, 500, 1000)
    src, dst = data.edge_index
    assert np.all(np.diff(dst) >= 0)  # CSC order: sorted by destination
    assert np.array_equal(np.diff(data.csc_indptr), np.bincount(dst, minlength=2708))

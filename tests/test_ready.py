"""bench/datasets/ready.py, the one entry that prepares a dataset: built once and kept after, the link
task's edge split beside it, a build refused before anything is written where the host says it
cannot fit, a stack's source refused where the host has no such stack, and a run's preparation
asking once per dataset and task."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import datasets
from bench.datasets import hub, link_split
from bench.datasets.ready import DatasetError, ready, sizes, stack_needed
from bench.run.prepare import Preparation, StackHost

SPEC = datasets.parse_name("synthetic:scale=8,edge_factor=4")


class Host:
    """A host with no stacks and a memory check that answers as told (counting what it was asked)."""

    def __init__(self, refuse: bool = False):
        self.refuse, self.asked = refuse, []

    def python(self, stack: str) -> Path | None:
        return None

    def env(self) -> dict[str, str]:
        return {}

    def refusal(self, stats: dict, copies: int, what: str) -> str | None:
        self.asked.append((stats["num_edges"], copies))
        return f"refused: {what} needs more than this test allows" if self.refuse else None


def test_built_once_then_kept_and_the_link_split_beside_it(tmp_path):
    host = Host()
    first = ready(SPEC, tmp_path, host=host, say=lambda line: None)
    assert first.built and first.folder == hub.dataset_dir(SPEC, tmp_path) and first.link_split is None
    assert host.asked == [(sizes(SPEC, tmp_path / "none")["num_edges"], 2)]  # twice the hub's arrays, before the build
    again = ready(SPEC, tmp_path, host=host, task="link")
    assert not again.built and again.folder == first.folder and len(host.asked) == 1
    assert again.link_split == link_split.split_dir(first.folder) and link_split.load(first.folder).train_pos.shape[1] == 2
    assert stack_needed(SPEC, tmp_path) is None


def test_a_build_the_host_refuses_writes_nothing(tmp_path):
    with pytest.raises(DatasetError, match="refused: preparing dataset 'synthetic:scale=8,edge_factor=4' needs"):
        ready(SPEC, tmp_path, host=Host(refuse=True))
    assert not hub.is_materialised(SPEC, tmp_path)


def test_a_source_of_a_stack_the_host_lacks_is_named(tmp_path):
    spec = datasets.parse_name("planetoid:Cora")
    assert stack_needed(spec, tmp_path) == "pyg"
    with pytest.raises(DatasetError, match="prepared in the pyg stack, which is not installed"):
        ready(spec, tmp_path, host=Host())


def test_a_run_prepares_each_dataset_once_per_task_and_knows_its_folders(tmp_path):
    said = []
    prep = Preparation(tmp_path, None, say=said.append)
    node = prep.dataset("s8", SPEC, "node")
    assert prep.dataset("s8", SPEC, "node") is node  # asked again: the same answer, nothing redone
    link = prep.dataset("s8", SPEC, "link")
    assert link.folder == node.folder and link.link_split is not None
    assert prep.known("s8") and not prep.known("other") and prep.folders() == {"s8": node.folder}
    bad = datasets.parse_name(f"npy:{tmp_path / 'missing'}")  # a user's graph with no folder: its error is
    # kept, not tried again for another task
    with pytest.raises(DatasetError) as first:
        prep.dataset("bad", bad, "node")
    with pytest.raises(DatasetError) as second:
        prep.dataset("bad", bad, "link")
    assert second.value is first.value
    assert isinstance(StackHost(tmp_path).env(), dict) and StackHost(tmp_path).env()["GNNBENCH_CACHE"] == str(tmp_path)

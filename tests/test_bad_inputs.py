"""The bad-input catalogue: each case is one thing a user can get wrong, run through the real
`gnnbench` entry (bench.cli.main, in-process; a few as subprocesses), which must exit 2 with one
message naming the input (file, key path, option or variable) and what is wrong, and no
traceback. Nothing runs: every case fails before a stack or a cell is started."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from bench import cli
from tests import own_graphs, synthetic_results as sr

# --- suites: each is a valid suite with one thing wrong --------------------------------------

GOOD_SUITE = """\
name: good
datasets:
  g: "synthetic:scale=8"
backends: [pyg-neighbor]
settings:
  epochs: 2
"""


def suite_text(**replace) -> str:
    text = GOOD_SUITE
    for old, new in replace.items():
        text = text.replace(old.replace("_", " "), new)
    return text


def with_settings(line: str) -> str:
    return GOOD_SUITE.replace("  epochs: 2\n", f"  epochs: 2\n  {line}\n")


# (case id, suite text or bytes, substrings the message must hold: key path and what is wrong)
SUITES = [
    ("fanout-empty", with_settings("fanout: []"), ["settings.fanout", "at least 1 item"]),
    ("fanout-empty-inner", with_settings("fanout: [[]]"), ["settings.fanout.0", "at least 1 item"]),
    ("fanout-zero", with_settings("fanout: [0, 5]"), ["settings.fanout", "greater than or equal to 1"]),
    ("fanout-too-deep", with_settings("fanout: [1, 1, 1, 1, 1, 1]"), ["settings.fanout", "at most 5"]),
    ("fanout-huge", with_settings("fanout: [100000]"), ["settings.fanout", "less than or equal to 10000"]),
    ("fanout-text", with_settings("fanout: abc"), ["settings.fanout", "valid list"]),
    ("epochs-empty-sweep", with_settings("batch_size: []"), ["settings.batch_size", "at least 1 item"]),
    ("epochs-zero", GOOD_SUITE.replace("epochs: 2", "epochs: 0"), ["settings.epochs", "greater than or equal to 1"]),
    ("epochs-absurd", GOOD_SUITE.replace("epochs: 2", "epochs: 1000000"), ["settings.epochs", "less than or equal to 10000"]),
    ("epochs-text", GOOD_SUITE.replace("epochs: 2", "epochs: many"), ["settings.epochs", "valid integer"]),
    ("epochs-fraction", GOOD_SUITE.replace("epochs: 2", "epochs: 2.5"), ["settings.epochs", "valid integer", "2.5"]),
    ("lr-nan", with_settings("lr: .nan"), ["settings.lr", "finite number"]),
    ("lr-inf", with_settings("lr: .inf"), ["settings.lr", "finite number"]),
    ("lr-zero", with_settings("lr: 0"), ["settings.lr", "greater than 0"]),
    ("lr-negative", with_settings("lr: -0.1"), ["settings.lr", "greater than 0"]),
    ("lr-absurd", with_settings("lr: 1000.0"), ["settings.lr", "less than or equal to 10"]),
    ("lr-sweep-nan", with_settings("lr: [0.1, .nan]"), ["settings.lr.1", "finite number"]),
    ("weight-decay-negative", with_settings("weight_decay: -0.0005"), ["settings.weight_decay", "greater than or equal to 0"]),
    ("timeout-inf", with_settings("timeout: .inf"), ["settings.timeout", "finite number"]),
    ("timeout-nan", with_settings("timeout: .nan"), ["settings.timeout", "finite number"]),
    ("timeout-zero", with_settings("timeout: 0"), ["settings.timeout", "greater than 0"]),
    ("timeout-absurd", with_settings("timeout: 1.0e+12"), ["settings.timeout", "less than or equal to 604800"]),
    ("seed-negative", with_settings("seed: -1"), ["settings.seed", "greater than or equal to 0"]),
    ("seed-too-big", with_settings("seed: 99999999999"), ["settings.seed", "less than or equal to 4294967295"]),
    ("workers-negative", with_settings("num_workers: -1"), ["settings.num_workers", "greater than or equal to 0"]),
    ("world-size-zero", with_settings("world_size: 0"), ["settings.world_size", "greater than or equal to 1"]),
    ("batch-zero", with_settings("batch_size: 0"), ["settings.batch_size", "greater than or equal to 1"]),
    ("hidden-absurd", with_settings("hidden: 10000000"), ["settings.hidden", "less than or equal to 65536"]),
    ("warmup-negative", with_settings("warmup_epochs: -2"), ["settings.warmup_epochs", "greater than or equal to 0"]),
    ("mode-unknown", with_settings("mode: gpu-gpu"), ["settings.mode", "cpu-cpu"]),
    ("store-unknown", with_settings("store: floppy"), ["settings.store", "memory"]),
    ("model-unknown", with_settings("model: gat"), ["settings.model", "sage"]),
    ("stack-unknown", with_settings("stack: nope"), ["settings.stack", "unknown stack 'nope'"]),
    ("setting-unknown", with_settings("epoch: 3"), ["settings.epoch", "unknown key", "epochs"]),
    ("name-escapes", GOOD_SUITE.replace("name: good", "name: ../../x"), ["name", "'../../x' is not a plain file name"]),
    ("name-absolute", GOOD_SUITE.replace("name: good", "name: /tmp/x"), ["name", "not a plain file name"]),
    ("name-hidden", GOOD_SUITE.replace("name: good", "name: .hidden"), ["name", "not a plain file name"]),
    ("name-space", GOOD_SUITE.replace("name: good", "name: 'my suite'"), ["name", "not a plain file name"]),
    ("name-missing", GOOD_SUITE.replace("name: good\n", ""), ["name", "required key is missing"]),
    ("name-number", GOOD_SUITE.replace("name: good", "name: 12"), ["name", "valid string"]),
    ("dataset-key-slash", GOOD_SUITE.replace("  g:", "  a/b:"), ["datasets", "dataset key 'a/b'", "plain file name"]),
    ("datasets-empty", GOOD_SUITE.replace('datasets:\n  g: "synthetic:scale=8"', "datasets: {}"), ["datasets", "at least 1 item"]),
    ("dataset-scale-negative", GOOD_SUITE.replace("scale=8", "scale=-1"), ["datasets.g.params.scale", "greater than or equal to 4"]),
    ("dataset-train-frac", GOOD_SUITE.replace("scale=8", "scale=8,train_frac=2"), ["datasets.g.params.train_frac", "less than"]),
    ("dataset-classes-one", GOOD_SUITE.replace("scale=8", "scale=8,num_classes=1"), ["datasets.g.params.num_classes", "greater than or equal to 2"]),
    ("dataset-source-unknown", GOOD_SUITE.replace('"synthetic:scale=8"', "{source: nope}"), ["datasets.g", "nope"]),
    ("dataset-own-graph-no-path", GOOD_SUITE.replace('"synthetic:scale=8"', "{source: npy}"), ["datasets.g.params", "required key is missing"]),
    ("dataset-own-graph-duplicates-word", GOOD_SUITE.replace('"synthetic:scale=8"', "{source: npy, params: {path: /x, duplicates: drop}}"),
     ["datasets.g", "duplicates", "'remove' or 'keep'"]),
    ("dataset-planetoid-unknown", GOOD_SUITE.replace('"synthetic:scale=8"', '"planetoid:Nope"'), ["datasets.g", "Nope"]),
    ("backend-unknown", GOOD_SUITE.replace("[pyg-neighbor]", "[pyg-nope]"), ["backends", "unknown backend 'pyg-nope'"]),
    ("backends-empty", GOOD_SUITE.replace("[pyg-neighbor]", "[]"), ["backends", "at least 1 item"]),
    ("top-key-unknown", GOOD_SUITE + "setings: {}\n", ["setings", "unknown key", "settings"]),
    ("baseline-unknown", GOOD_SUITE + "baseline: nope\n", ["baseline", "'nope' is not a cell id"]),
    ("exclude-key-unknown", GOOD_SUITE + "exclude:\n  - {colour: red}\n", ["exclude.0.colour", "unknown key"]),
    ("include-backend-unknown", GOOD_SUITE + "include:\n  - {backend: nope}\n", ["include.0.backend", "unknown backend 'nope'"]),
    ("include-setting-bad", GOOD_SUITE + "include:\n  - {epochs: 0}\n", ["include.0.epochs", "greater than or equal to 1"]),
    # time to accuracy (bench/run/suite.py: target_acc, eval_every, max_epochs)
    ("target-zero", with_settings("target_acc: 0"), ["settings.target_acc", "greater than 0"]),
    ("target-above-one", with_settings("target_acc: 1.5"), ["settings.target_acc", "less than or equal to 1"]),
    ("target-percent", with_settings("target_acc: 85"), ["settings.target_acc", "less than or equal to 1"]),
    ("target-nan", with_settings("target_acc: .nan"), ["settings.target_acc", "finite number"]),
    ("target-text", with_settings("target_acc: high"), ["settings.target_acc", "valid number"]),
    ("target-sweep", with_settings("target_acc: [0.5, 0.8]"), ["settings.target_acc", "valid number"]),
    ("eval-every-zero", with_settings("target_acc: 0.5\n  eval_every: 0"), ["settings.eval_every", "greater than or equal to 1"]),
    ("eval-every-fraction", with_settings("target_acc: 0.5\n  eval_every: 1.5"), ["settings.eval_every", "valid integer"]),
    ("max-epochs-below-epochs", with_settings("target_acc: 0.5\n  max_epochs: 2"),
     ["settings.max_epochs", "2 is fewer than the warm-up and measured epochs (1 + 2)", "integer >= 3"]),
    ("max-epochs-zero", with_settings("target_acc: 0.5\n  max_epochs: 0"), ["settings.max_epochs", "greater than or equal to 1"]),
    ("max-epochs-without-target", with_settings("max_epochs: 10"), ["settings.max_epochs", "set without target_acc"]),
    ("eval-every-without-target", with_settings("eval_every: 2"), ["settings.eval_every", "set without target_acc"]),
    ("include-max-epochs-below", GOOD_SUITE + "include:\n  - {target_acc: 0.5, epochs: 5, max_epochs: 4}\n",
     ["include.0.max_epochs", "4 is fewer", "integer >= 6"]),
    ("include-target-bad", GOOD_SUITE + "include:\n  - {target_acc: 2}\n", ["include.0.target_acc", "less than or equal to 1"]),
    ("not-a-mapping", "- a\n- b\n", ["a suite is a mapping"]),
    ("empty-file", "", ["a suite is a mapping"]),
    ("not-yaml", "name: [unclosed\n", ["not valid YAML"]),
    ("not-utf8", GOOD_SUITE.encode() + b"description: caf\xe9\n", ["not UTF-8 text", "0xe9"]),
    ("utf16", GOOD_SUITE.encode("utf-16"), ["not UTF-8 text"]),
]


@pytest.mark.parametrize("text, expected", [pytest.param(t, e, id=i) for i, t, e in SUITES])
def test_bad_suite(tmp_path, capsys, text, expected):
    path = tmp_path / "bad.yaml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    message = refused(capsys, ["run", str(path), "--results", str(tmp_path / "r"), "--cache-dir",
                               str(tmp_path / "c"), "--no-install"])
    assert str(path) in message
    for part in expected:
        assert part in message
    assert not (tmp_path / "r").exists()  # nothing was run, nothing written


# --- command-line options --------------------------------------------------------------------

def good_suite(tmp: Path) -> Path:
    path = tmp / "good.yaml"
    path.write_text(GOOD_SUITE)
    return path


def a_file(tmp: Path) -> Path:
    path = tmp / "a-file"
    path.write_text("x")
    return path


def run_args(tmp: Path, *options: str) -> list[str]:
    return ["run", str(good_suite(tmp)), "--no-install", "--results", str(tmp / "r"), *options]


# (case id, argv from a tmp folder, substrings of the message)
OPTIONS = [
    ("cache-dir-is-file", lambda t: run_args(t, "--cache-dir", str(a_file(t))), ["--cache-dir", "is a file, not a folder"]),
    ("cache-dir-under-file", lambda t: run_args(t, "--cache-dir", str(a_file(t) / "sub")), ["--cache-dir", "read-only"]),
    ("data-root-is-file", lambda t: run_args(t, "--data-root", str(a_file(t))), ["--data-root", "is a file, not a folder"]),
    ("results-is-file", lambda t: ["run", str(good_suite(t)), "--results", str(a_file(t))], ["a-file", "cannot write results there", "--results"]),
    ("nnodes-zero", lambda t: run_args(t, "--nnodes", "0"), ["--nnodes 0", "1 to 1024"]),
    ("node-rank-too-big", lambda t: run_args(t, "--nnodes", "2", "--node-rank", "2", "--rdzv-endpoint", "h:29500"), ["--node-rank 2", "0 to 1"]),
    ("node-rank-negative", lambda t: run_args(t, "--node-rank", "-1"), ["--node-rank -1", "0 to 0"]),
    ("nnodes-without-endpoint", lambda t: run_args(t, "--nnodes", "2"), ["--nnodes > 1 needs --rdzv-endpoint"]),
    ("endpoint-no-port", lambda t: run_args(t, "--rdzv-endpoint", "host"), ["--rdzv-endpoint 'host'", "HOST:PORT"]),
    ("endpoint-bad-port", lambda t: run_args(t, "--rdzv-endpoint", "host:99999"), ["--rdzv-endpoint", "1 to 65535"]),
    ("select-bad", lambda t: run_args(t, "-k", "pyg and"), ["-k 'pyg and'"]),
    ("resume-missing", lambda t: run_args(t, "--resume", str(t / "x.cells.jsonl")), ["--resume", "no such journal"]),
    ("resume-not-journal", lambda t: run_args(t, "--resume", str(a_file(t))), ["--resume", "expected the .cells.jsonl journal"]),
    ("suite-unknown", lambda t: ["run", "no-such-suite"], ["suite 'no-such-suite' not found", "known:"]),
    ("suite-is-folder", lambda t: ["run", str(t)], ["not found: not a file"]),
    ("nnodes-not-a-number", lambda t: run_args(t, "--nnodes", "two"), ["--nnodes", "invalid int value: 'two'"]),
    ("command-unknown", lambda t: ["runn"], ["invalid choice: 'runn'"]),
    ("report-no-files", lambda t: ["report"], ["the following arguments are required: files"]),
    ("floor-nan", lambda t: ["compare", "a.json", "b.json", "--floor", "nan"], ["--floor", "'nan' is out of range"]),
    ("floor-negative", lambda t: ["compare", "a.json", "b.json", "--floor", "-0.1"], ["--floor", "out of range"]),
    ("floor-text", lambda t: ["compare", "a.json", "b.json", "--floor", "ten"], ["--floor", "'ten' is not a number"]),
    ("fail-on-unknown", lambda t: ["compare", "a.json", "b.json", "--fail-on", "anything"], ["--fail-on", "invalid choice"]),
    ("history-floor-nan", lambda t: ["history", "a.json", "--floor", "nan"], ["--floor", "'nan' is out of range"]),
    ("history-recent-zero", lambda t: ["history", "a.json", "--recent", "0"], ["--recent", "0 is below 1"]),
    ("history-recent-text", lambda t: ["history", "a.json", "--recent", "few"], ["--recent", "'few' is not a whole number"]),
    ("history-no-paths", lambda t: ["history"], ["the following arguments are required: FILE|DIR"]),
    # gnnbench slurm / k8s (bench/commands/): the script or manifest is not written
    ("slurm-nodes-zero", lambda t: cluster_args(t, "slurm", "--nodes", "0"), ["--nodes 0", "1 to 1024"]),
    ("slurm-gpus-negative", lambda t: cluster_args(t, "slurm", "--gpus-per-node", "-1"), ["--gpus-per-node -1", "0 to 64"]),
    ("slurm-no-cell-fits", lambda t: cluster_args(t, "slurm", world_size=1), ["suite 'good': no cell fits 2 node(s) x 0 GPU(s)",
                                                                "world size 1 does not split over 2 nodes"]),
    ("slurm-time-text", lambda t: cluster_args(t, "slurm", "--time", "soon"), ["--time 'soon'", "H:M:S"]),
    ("slurm-partition-space", lambda t: cluster_args(t, "slurm", "--partition", "a b"), ["--partition 'a b'"]),
    ("slurm-run-args-nnodes", lambda t: cluster_args(t, "slurm", "--run-args=--nnodes 2"), ["--run-args '--nnodes 2'", "--nnodes"]),
    ("slurm-run-args-unclosed", lambda t: cluster_args(t, "slurm", "--run-args=-k 'ws=2"), ["--run-args", "No closing quotation"]),
    ("k8s-image-missing", lambda t: cluster_args(t, "k8s")[:-2] + ["--nodes", "2"], ["the following arguments are required: --image"]),
    ("k8s-name-upper", lambda t: cluster_args(t, "k8s", "--name", "Big"), ["--name 'Big'", "lower-case"]),
    ("k8s-shm-text", lambda t: cluster_args(t, "k8s", "--shm-size", "lots"), ["--shm-size 'lots'", "16Gi"]),
    ("k8s-kind-unknown", lambda t: cluster_args(t, "k8s", "--kind", "mpijob"), ["--kind", "invalid choice: 'mpijob'"]),
]


def cluster_args(tmp: Path, command: str, *options: str, world_size: int = 2) -> list[str]:
    """`gnnbench slurm|k8s` on 2 nodes for a suite of one cell of `world_size` ranks, `options` after
    (a repeated option's last value counts)."""
    path = tmp / "cluster.yaml"
    path.write_text(with_settings(f"world_size: {world_size}"))
    image = ["--image", "img"] if command == "k8s" else []
    return [command, str(path), "--nodes", "2", "--gpus-per-node", "0", *image, *options]


@pytest.mark.parametrize("argv, expected", [pytest.param(a, e, id=i) for i, a, e in OPTIONS])
def test_bad_option(tmp_path, capsys, argv, expected):
    message = refused(capsys, argv(tmp_path))
    for part in expected:
        assert part in message


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
@pytest.mark.parametrize("command", [["run", "GOOD", "--no-install"], ["datasets", "prepare", "synthetic:scale=8"]])
def test_read_only_cache_dir(tmp_path, capsys, command):
    cache = tmp_path / "ro"
    cache.mkdir()
    cache.chmod(0o555)
    argv = [str(good_suite(tmp_path)) if a == "GOOD" else a for a in command]
    message = refused(capsys, [*argv, "--cache-dir", str(cache)])
    assert f"--cache-dir {cache}" in message and "read-only" in message


# --- dataset names and parameters (datasets info / prepare) ----------------------------------

DATASETS = [
    ("scale-negative", "synthetic:scale=-1", ["synthetic:scale=-1", "scale", "greater than or equal to 4"]),
    ("scale-too-big", "synthetic:scale=40", ["scale", "less than or equal to"]),
    ("scale-nan", "synthetic:scale=nan", ["scale", "valid integer", "nan"]),
    ("scale-inf", "synthetic:scale=1e400", ["scale", "valid integer", "inf"]),
    ("scale-fraction", "synthetic:scale=12.5", ["scale", "valid integer", "12.5"]),
    ("scale-text", "synthetic:scale=big", ["scale='big' is not a number"]),
    ("train-frac-two", "synthetic:train_frac=2", ["train_frac", "less than"]),
    ("train-frac-negative", "synthetic:train_frac=-0.5", ["train_frac", "greater than"]),
    ("fracs-over-one", "synthetic:train_frac=0.6,val_frac=0.3,test_frac=0.3", ["synthetic:train_frac=0.6", "frac"]),
    ("classes-one", "synthetic:num_classes=1", ["num_classes", "greater than or equal to 2"]),
    ("feature-dim-zero", "synthetic:feature_dim=0", ["feature_dim", "greater than or equal to 1"]),
    ("param-unknown", "synthetic:foo=1", ["unknown synthetic parameter(s) foo", "allowed: scale"]),
    ("param-not-key-value", "synthetic:scale", ["'scale' is not key=value"]),
    ("param-empty-value", "synthetic:scale=", ["'scale=' is not key=value"]),
    ("source-unknown", "nope:x", ["unknown dataset source 'nope'", "sources: synthetic"]),
    ("planetoid-unknown", "planetoid:Nope", ["unknown planetoid dataset 'Nope'", "known: Cora"]),
    ("planetoid-no-name", "planetoid", ["unknown planetoid dataset ''"]),
    ("ogb-unknown", "ogb:ogbn-nope", ["unknown ogb dataset 'ogbn-nope'"]),
    ("molecules-count-zero", "molecules:count=0", ["molecules", "count"]),
    ("molecules-nodes-inverted", "molecules:min_nodes=30,max_nodes=10", ["molecules", "min_nodes"]),
    ("own-graph-no-path", "npy", ["dataset 'npy'", "path: Field required"]),
    ("own-graph-self-loops-word", "npy:path=/x,self_loops=maybe", ["self_loops", "'remove' or 'keep'", "maybe"]),
    ("own-graph-param-unknown", "edge-list:path=/x,colour=red", ["unknown edge-list parameter(s) colour", "allowed: path"]),
    ("own-graph-num-classes-one", "graphbolt:path=/x,num_classes=1", ["num_classes", "greater than or equal to 2"]),
    ("own-graph-unsafe-word", "pyg-file:path=/x,unsafe_load=perhaps", ["unsafe_load='perhaps' is not true or false"]),
]


@pytest.mark.parametrize("command", ["info", "prepare"])
@pytest.mark.parametrize("name, expected", [pytest.param(n, e, id=i) for i, n, e in DATASETS])
def test_bad_dataset_name(tmp_path, capsys, command, name, expected):
    message = refused(capsys, ["datasets", command, name, "--cache-dir", str(tmp_path / "hub")])
    for part in expected:
        assert part in message
    assert not (tmp_path / "hub").exists()  # nothing prepared


@pytest.mark.parametrize("command", [["list"], ["info", "synthetic:scale=8"], ["prepare", "synthetic:scale=8"]])
def test_dataset_cache_dir_is_a_file(tmp_path, capsys, command):
    path = a_file(tmp_path)
    message = refused(capsys, ["datasets", *command, "--cache-dir", str(path)])
    assert f"--cache-dir {path}" in message and "is a file, not a folder" in message


def test_dataset_data_root_is_a_file(tmp_path, capsys):
    path = a_file(tmp_path)
    message = refused(capsys, ["datasets", "prepare", "synthetic:scale=8", "--cache-dir", str(tmp_path / "hub"),
                               "--data-root", str(path)])
    assert f"--data-root {path}" in message and "is a file, not a folder" in message


# --- your own graph's files (gnnbench datasets check SOURCE:PATH, and any run that uses one) ----
# Each case writes the small graph of tests/own_graphs.py in one format with one thing wrong: one
# line naming the file, the array and what is allowed, exit 2, and nothing in the hub (not even
# a half-written folder). Self-loops and duplicate edges are no error: counted, then removed or
# kept (tests/test_own_graph.py).

def npy_with(change):
    """An npy folder of the small graph, then `change(folder, ref)`; returns the folder."""
    def build(ref, folder):
        own_graphs.write_npy(ref, folder)
        change(folder, ref)
        return f"npy:{folder}"
    return build


def npy_array(name: str, edit):
    """Rewrite one .npy of the folder: edit(array, ref) returns the new array."""
    return npy_with(lambda folder, ref: np.save(folder / f"{name}.npy", edit(np.load(folder / f"{name}.npy"), ref)))


def at(array, index, value, dtype=None):
    array = array.astype(dtype) if dtype else array.copy()
    array[index] = value
    return array


def truncated(folder, ref):
    data = (folder / "features.npy").read_bytes()
    (folder / "features.npy").write_bytes(data[:len(data) // 2])


def edge_list_with(change, fmt="csv", ids="str"):
    def build(ref, folder):
        own_graphs.write_edge_list(ref, folder, fmt, ids)
        change(folder / f"edges.{fmt}", folder / f"nodes.{fmt}")
        return f"edge-list:{folder}"
    return build


def csv_edit(old: str, new: str, count: int = 1):
    def change(path):
        text = path.read_text()
        assert old in text, old
        path.write_text(text.replace(old, new, count))
    return change


def first_field(path, row: int, value: str):
    """A CSV table's first column at data row `row` (0-based, the header aside) set to `value`."""
    lines = path.read_text().splitlines(keepends=True)
    lines[row + 1] = value + "," + lines[row + 1].split(",", 1)[1]
    path.write_text("".join(lines))


def with_column(path, name, values):
    import pyarrow as pa
    import pyarrow.csv as pcsv

    pcsv.write_csv(pcsv.read_csv(path).append_column(name, pa.array(values)), path)


def graphbolt_with(change, **kwargs):
    def build(ref, folder):
        own_graphs.write_graphbolt(ref, folder, **kwargs)
        meta = yaml.safe_load((folder / "metadata.yaml").read_text())
        change(meta, folder)
        (folder / "metadata.yaml").write_text(yaml.safe_dump(meta))
        return f"graphbolt:{folder}"
    return build


def gb_task(meta):
    return meta["tasks"][0]


# (case id, builder(ref, folder) -> SOURCE:PATH, substrings of the message)
OWN_GRAPHS = [
    ("npy-no-folder", lambda ref, folder: f"npy:{folder}", ["no such folder", "edge_index.npy"]),
    ("npy-missing-labels", npy_with(lambda f, r: (f / "labels.npy").unlink()),
     ["no labels array", "labels.npy or y.npy"]),
    ("npy-missing-split", npy_with(lambda f, r: (f / "val_idx.npy").unlink()), ["no val array", "val_idx.npy"]),
    ("npy-two-edge-arrays", npy_with(lambda f, r: np.save(f / "edges.npy", np.zeros((2, 1), dtype=np.int64))),
     ["both edge_index.npy and edges.npy", "allowed: one"]),
    ("npy-truncated", npy_with(truncated), ["features.npy", "is truncated"]),
    ("npy-pickle", npy_array("labels", lambda a, r: a.astype(object)), ["labels.npy", "Python objects", "never loaded"]),
    ("edges-shape", npy_array("edge_index", lambda a, r: a[:1]), ["edge_index.npy", "shape (1,", "[2, E] or [E, 2]"]),
    ("edges-dtype", npy_array("edge_index", lambda a, r: a.astype(np.float64)),
     ["edge_index.npy", "dtype float64", "integer dtype"]),
    ("edge-id-out-of-range", npy_array("edge_index", lambda a, r: at(a, (1, 17), 300)),
     ["edge_index.npy: edge_index[1, 17] = 300 is out of range", "node ids 0..255", "256 nodes: the rows of features.npy"]),
    ("edge-id-negative", npy_array("edge_index", lambda a, r: at(a, (0, 3), -1)),
     ["edge_index[0, 3] = -1 is out of range"]),
    ("features-dtype", npy_array("features", lambda a, r: a.astype(np.complex64)),
     ["features.npy", "dtype complex64", "float dtype"]),
    ("features-shape", npy_array("features", lambda a, r: a[:, 0]), ["features.npy", "shape (256,)", "[N, D]"]),
    ("features-nan", npy_array("features", lambda a, r: at(a, (5, 2), np.nan)),
     ["features.npy: features[5, 2] is nan", "finite numbers"]),
    ("features-inf", npy_array("features", lambda a, r: at(a, (7, 0), -np.inf)), ["features[7, 0] is -inf"]),
    ("features-beyond-float32", npy_array("features", lambda a, r: at(a, (9, 1), 1e300)),
     ["features[9, 1] is 1e+300", "beyond float32"]),
    ("labels-length", npy_array("labels", lambda a, r: a[:-3]),
     ["labels.npy", "253 labels for 256 nodes", "the rows of features.npy", "one label per node"]),
    ("labels-out-of-range", npy_array("labels", lambda a, r: at(a, 3, -5)),
     ["labels.npy: labels[3] is -5", "-1 for a node without one"]),
    ("labels-beyond-num-classes", lambda ref, folder: npy_array("labels", lambda a, r: at(a, 11, 7))(ref, folder)
     .replace("npy:", "npy:path=") + ",num_classes=4", ["labels[11] is 7", "0..3 (num_classes 4)"]),
    ("labels-fraction", npy_array("labels", lambda a, r: at(a, 2, 1.5, np.float64)), ["labels[2] is 1.5", "whole numbers"]),
    ("labels-one-class", npy_array("labels", lambda a, r: np.zeros_like(a)), ["labels.npy", "1 class", "at least 2"]),
    ("split-empty", npy_array("val_idx", lambda a, r: a[:0]), ["val_idx.npy", "the val split is empty"]),
    ("split-overlap", npy_array("test_idx", lambda a, r: np.append(a, r.train_idx[0])),
     ["test_idx.npy", "is in the test split and in the train split", "train_idx.npy", "one split at most"]),
    ("split-repeat", npy_array("train_idx", lambda a, r: np.append(a, a[4])), ["train_idx.npy", "twice", "each node once"]),
    ("split-out-of-range", npy_array("train_idx", lambda a, r: at(a, 0, 999)),
     ["train_idx.npy: train_idx[0] = 999 is out of range", "node ids 0..255"]),
    ("split-dtype", npy_array("train_idx", lambda a, r: a.astype(np.float32)), ["train_idx.npy", "dtype float32"]),
    ("split-unlabelled", npy_array("labels", lambda a, r: at(a, int(r.train_idx[2]), -1)),
     ["train_idx.npy", "of the train split has no label", "labelled nodes only"]),
    ("split-mask-length", npy_with(lambda f, r: ((f / "val_idx.npy").unlink(), np.save(f / "val_mask.npy", np.ones(9, bool)))),
     ["val_mask.npy", "a mask of shape (9,) for 256 nodes"]),
    ("edge-list-unknown-id", edge_list_with(lambda e, n: csv_edit('"n00', '"x00')(e)),
     ["edges.csv: row 0 (line 2), column src", "not an id of nodes.csv"]),
    ("edge-list-unknown-int-id", edge_list_with(lambda e, n: first_field(e, 2, "999999"), ids="0..N-1"),
     ["edges.csv: row 2 (line 4), column src is 999999, not an id of nodes.csv"]),
    ("edge-list-unknown-dense-id", edge_list_with(lambda e, n: first_field(e, 2, "108"), ids="int"),
     ["edges.csv: row 2 (line 4), column src is 108, not an id of nodes.csv"]),
    ("edge-list-unknown-sparse-id", edge_list_with(lambda e, n: first_field(e, 2, "5"), ids="sparse"),
     ["edges.csv: row 2 (line 4), column src is 5, not an id of nodes.csv"]),
    ("edge-list-duplicate-id", edge_list_with(lambda e, n: n.write_text(n.read_text() + n.read_text().splitlines()[1] + "\n")),
     ["nodes.csv", "twice", "each id once"]),
    ("edge-list-split-word", edge_list_with(lambda e, n: n.write_text(n.read_text().replace('"train"', '"training"', 1))),
     ["nodes.csv", "column split is 'training'", "train, val (or valid), test"]),
    ("edge-list-no-label-column", edge_list_with(lambda e, n: n.write_text(n.read_text().replace('"label"', '"class"', 1))),
     ["nodes.csv: no column label", "allowed: columns id, label, split"]),
    ("edge-list-text-feature", edge_list_with(lambda e, n: with_column(n, "colour", ["red"] * 256)),
     ["nodes.csv: column colour has type string", "numbers, or one list column"]),
    ("edge-list-empty-id", edge_list_with(lambda e, n: first_field(e, 3, "")),
     ["edges.csv: row 3 (line 5), column src is empty"]),
    ("graphbolt-no-metadata", lambda ref, folder: (folder.mkdir(), f"graphbolt:{folder}")[1],
     ["metadata.yaml: no such file"]),
    ("graphbolt-heterogeneous", graphbolt_with(lambda m, f: m["graph"]["nodes"].append({"type": "user", "num": 3})),
     ["metadata.yaml", "heterogeneous", "homogeneous graph"]),
    ("graphbolt-torch-format", graphbolt_with(lambda m, f: m["feature_data"][0].update(format="torch")),
     ["metadata.yaml", "format 'torch'", "allowed: numpy"]),
    ("graphbolt-no-seeds", graphbolt_with(lambda m, f: gb_task(m)["train_set"][0]["data"][0].update(name="nodes")),
     ["train_set has no node ids", "seeds (DGL 2.2+) or seed_nodes (DGL 2.1)"]),
    ("graphbolt-preprocessed", graphbolt_with(lambda m, f: (m.pop("graph"), m.update(
        graph_topology={"type": "FusedCSCSamplingGraph", "path": "preprocessed/g.pt"}))),
     ["metadata.yaml: no `graph`", "preprocessed graph_topology"]),
    ("graphbolt-feature-name", graphbolt_with(lambda m, f: m["feature_data"][0].update(name="emb")),
     ["no node feature named 'feat'", "feature=NAME"]),
    ("graphbolt-set-label-range", graphbolt_with(lambda m, f: np.save(f / "set/val_labels.npy", at(np.load(f / "set/val_labels.npy"), 1, 99)),
                                                 label_feature=False),
     ["val_labels.npy: validation_set labels[1] is 99", "0..3 (num_classes in metadata.yaml)"]),
    ("graphbolt-csv-edge-range", graphbolt_with(lambda m, f: (f / "edges.csv").write_text("0,1\n5,4096\n"), edge_format="csv"),
     ["edges.csv: edges (csv) line 2, column 2 = 4096 is out of range", "graph.nodes[0].num"]),
    ("graphbolt-csv-not-numbers", graphbolt_with(lambda m, f: (f / "edges.csv").write_text("0,1\na,b\n"), edge_format="csv"),
     ["edges.csv: cannot be read as CSV"]),
]


@pytest.mark.parametrize("command", ["check", "run"])
@pytest.mark.parametrize("build, expected", [pytest.param(b, e, id=i) for i, b, e in OWN_GRAPHS])
def test_bad_own_graph(tmp_path, capsys, own_ref, command, build, expected):
    name = build(own_ref, tmp_path / "graph")
    hub_dir = tmp_path / "hub"
    if command == "check":
        message = refused(capsys, ["datasets", "check", name, "--cache-dir", str(hub_dir)])
    else:
        suite = tmp_path / "suite.yaml"
        suite.write_text(f"name: own\ndatasets:\n  mine: {json.dumps(name)}\nbackends: [pyg-neighbor]\n")
        message = refused(capsys, ["run", str(suite), "--cache-dir", str(hub_dir), "--results", str(tmp_path / "r"),
                                   "--no-install"])
        assert "dataset 'mine'" in message
        assert not (tmp_path / "r").exists() or not any((tmp_path / "r").iterdir())  # no cell, no result
    assert message.count("\n") == 1, message  # one line
    assert str(tmp_path / "graph") in message  # the file (or folder) is named
    for part in expected:
        assert part in message, part
    assert not (hub_dir / "datasets").exists() or not any((hub_dir / "datasets").iterdir())  # nothing half-converted


@pytest.fixture(scope="module")
def own_ref(tmp_path_factory):
    return own_graphs.reference(tmp_path_factory.mktemp("synthetic"))


# --- environment variables -------------------------------------------------------------------

ENVIRONMENT = [
    ("cache-is-file", "GNNBENCH_CACHE", "FILE", ["GNNBENCH_CACHE=", "is a file, not a folder"]),
    ("stacks-dir-is-file", "GNNBENCH_STACKS_DIR", "FILE", ["GNNBENCH_STACKS_DIR=", "is a file, not a folder"]),
    ("data-root-is-file", "GNNBENCH_DATA_ROOT", "FILE", ["GNNBENCH_DATA_ROOT=", "is a file, not a folder"]),
    ("map-size-text", "GNNBENCH_LMDB_MAP_SIZE", "lots", ["GNNBENCH_LMDB_MAP_SIZE='lots'", "not a byte count"]),
    ("map-size-float", "GNNBENCH_LMDB_MAP_SIZE", "1e9", ["GNNBENCH_LMDB_MAP_SIZE='1e9'", "whole number of bytes"]),
    ("map-size-negative", "GNNBENCH_LMDB_MAP_SIZE", "-5", ["GNNBENCH_LMDB_MAP_SIZE='-5'", "from 1,048,576"]),
    ("map-size-tiny", "GNNBENCH_LMDB_MAP_SIZE", "10", ["GNNBENCH_LMDB_MAP_SIZE='10'", "not a byte count"]),
    ("fault-bad-rank", "GNNBENCH_FAULT", "crash:ws=2@one", ["GNNBENCH_FAULT='crash:ws=2@one'", "RANK a whole number"]),
    ("fault-empty-kind", "GNNBENCH_FAULT", ":pyg", ["GNNBENCH_FAULT=':pyg'", "KIND one of crash, hang"]),
    ("offline-word", "GNNBENCH_OFFLINE", "false", ["GNNBENCH_OFFLINE='false'", "not a switch", "1 (on), 0 or unset"]),
    ("offline-yes", "GNNBENCH_OFFLINE", "yes", ["GNNBENCH_OFFLINE='yes'", "not a switch"]),
    ("in-container-word", "GNNBENCH_IN_CONTAINER", "true", ["GNNBENCH_IN_CONTAINER='true'", "not a switch"]),
]


@pytest.mark.parametrize("command", [["datasets", "list"], ["report", "none.json"]])
@pytest.mark.parametrize("variable, value, expected", [pytest.param(v, x, e, id=i) for i, v, x, e in ENVIRONMENT])
def test_bad_environment_variable(tmp_path, capsys, monkeypatch, command, variable, value, expected):
    monkeypatch.setenv(variable, str(a_file(tmp_path)) if value == "FILE" else value)
    message = refused(capsys, command)
    for part in expected:
        assert part in message


# --- result files given to report and compare ------------------------------------------------

A = sr.cell_id()
B = sr.cell_id(workers=1)


def good_result() -> dict:
    return sr.run([sr.bench(A, [1.0, 1.1, 0.9, 1.0]), sr.bench(B, [2.0, 2.1, 1.9, 2.0])],
                  unmeasured_cells=[sr.unmeasured(sr.cell_id(ws=2))])


def setting(keys: str, value):
    """A change to a result file: the value at a dotted key path (`benchmarks.0.stats.median`)."""
    def change(data):
        *parents, last = [int(k) if k.isdigit() else k for k in keys.split(".")]
        target = data
        for key in parents:
            target = target[key]
        target[last] = value
    return change


def removing(keys: str):
    def change(data):
        *parents, last = [int(k) if k.isdigit() else k for k in keys.split(".")]
        target = data
        for key in parents:
            target = target[key]
        del target[last]
    return change


# (case id, change to a good result file, substrings of the message after the file's path)
RESULTS = [
    ("median-zero", setting("benchmarks.0.stats.median", 0.0), ["benchmarks[0] (cell " + A, "stats.median", "greater than 0"]),
    ("median-nan", setting("benchmarks.0.stats.median", math.nan), ["stats.median", "finite number"]),
    ("median-inf", setting("benchmarks.1.stats.median", math.inf), ["benchmarks[1]", "stats.median", "finite number"]),
    ("median-negative", setting("benchmarks.0.stats.median", -3.0), ["stats.median", "greater than 0"]),
    ("median-text", setting("benchmarks.0.stats.median", "1.0"), ["stats.median", "valid number"]),
    ("median-missing", removing("benchmarks.0.stats.median"), ["stats lack the median"]),
    ("stats-missing", removing("benchmarks.0.stats"), ["stats lack the median"]),
    ("stats-list", setting("benchmarks.0.stats", [1.0]), ["stats lack the median"]),
    ("rounds-nan", setting("benchmarks.0.stats.data", [1.0, math.nan]), ["stats.data[1]", "finite number"]),
    ("rounds-negative", setting("benchmarks.0.stats.data", [1.0, -1.0]), ["stats.data[1]", "greater than or equal to 0"]),
    ("iqr-negative", setting("benchmarks.0.stats.iqr", -0.5), ["stats.iqr", "greater than or equal to 0"]),
    ("iqr-nan", setting("benchmarks.0.stats.iqr", math.nan), ["stats.iqr", "finite number"]),
    ("mean-infinite", setting("benchmarks.0.stats.mean", -math.inf), ["stats.mean", "finite number"]),
    ("settings-missing", removing("benchmarks.0.extra_info.settings"), ["extra_info lacks settings"]),
    ("settings-text", setting("benchmarks.0.extra_info.settings", "fast"), ["extra_info.settings", "valid dictionary"]),
    ("world-size-zero", setting("benchmarks.0.extra_info.settings.world_size", 0), ["settings.world_size", "greater than or equal to 1"]),
    ("cell-id-missing", removing("benchmarks.0.extra_info.cell_id"), ["extra_info lacks cell_id"]),
    ("cell-id-number", setting("benchmarks.0.extra_info.cell_id", 7), ["extra_info.cell_id", "valid string"]),
    ("dataset-text", setting("benchmarks.0.extra_info.dataset", "toy"), ["extra_info.dataset", "valid dictionary"]),
    ("nodes-negative", setting("benchmarks.0.extra_info.dataset.num_nodes", -1), ["dataset.num_nodes", "greater than or equal to 0"]),
    ("throughput-nan", setting("benchmarks.0.extra_info.seeds_per_s", math.nan), ["extra_info.seeds_per_s", "finite number"]),
    ("stall-negative", setting("benchmarks.0.extra_info.loader_stall", -0.2), ["extra_info.loader_stall", "greater than or equal to 0"]),
    ("accuracy-two", setting("benchmarks.0.extra_info.test_acc", 2.0), ["extra_info.test_acc", "less than or equal to 1"]),
    ("rss-text", setting("benchmarks.0.extra_info.peak_rss_bytes", "lots"), ["extra_info.peak_rss_bytes", "valid integer"]),
    ("warmup-nan", setting("benchmarks.0.extra_info.warmup_epoch_s", [math.nan]), ["warmup_epoch_s[0]", "finite number"]),
    ("partition-text", setting("benchmarks.0.extra_info.partition", {"num_parts": "<b>2</b>"}), ["partition.num_parts", "valid integer"]),
    ("benchmark-not-a-record", setting("benchmarks.0", "x"), ["benchmarks[0]", "valid dictionary"]),
    ("unmeasured-ok", setting("unmeasured.0.status", "ok"), ["unmeasured[0] (cell", "'ok' is not allowed", "failed"]),
    ("unmeasured-no-id", removing("unmeasured.0.id"), ["unmeasured[0].id", "required key is missing"]),
    ("cells-not-a-list", setting("gnnbench.cells", "all"), ["gnnbench.cells", "valid list"]),
    ("schema-version-text", setting("gnnbench.schema_version", "1"), ["gnnbench.schema_version", "not a whole number"]),
    ("schema-version-newer", setting("gnnbench.schema_version", 99), ["schema version 99 is newer"]),
    ("schema-version-missing", removing("gnnbench.schema_version"), ["no 'gnnbench.schema_version'"]),
    ("benchmarks-missing", removing("benchmarks"), ["no 'benchmarks' list"]),
    ("machine-memory-text", setting("machine_info.gnnbench", {"memory_total_bytes": "64G"}), ["machine_info.gnnbench.memory_total_bytes", "valid integer"]),
    ("machine-stacks-list", setting("machine_info.gnnbench", {"stacks": ["pyg"]}), ["machine_info.gnnbench.stacks", "valid dictionary"]),
    ("commit-id-number", setting("commit_info.id", 12345), ["commit_info.id", "valid string"]),
]


def bad_result(tmp: Path, change) -> Path:
    data = good_result()
    change(data)
    path = tmp / "bad.json"
    path.write_text(json.dumps(data))  # json writes NaN and Infinity as Python reads them back
    return path


def good_result_file(tmp: Path, name: str = "good.json") -> Path:
    path = tmp / name
    path.write_text(json.dumps(good_result()))
    return path


@pytest.mark.parametrize("command", ["report", "compare-new", "compare-history", "history"])
@pytest.mark.parametrize("change, expected", [pytest.param(c, e, id=i) for i, c, e in RESULTS])
def test_bad_result_file(tmp_path, capsys, command, change, expected):
    bad, good = bad_result(tmp_path, change), good_result_file(tmp_path)
    argv = {"report": ["report", str(bad), "--markdown", str(tmp_path / "out.md")],
            "compare-new": ["compare", str(good), str(bad)],
            "compare-history": ["compare", str(good), str(good_result_file(tmp_path, "good2.json")), "--history",
                                str(bad)],
            "history": ["history", str(good), str(bad), "--html", str(tmp_path / "site")]}[command]
    message = refused(capsys, argv)
    assert f"{bad}: " in message
    for part in expected:
        assert part in message
    assert not (tmp_path / "out.md").exists() and not (tmp_path / "site").exists()  # all checked before anything is written


def test_the_good_result_file_is_read(tmp_path, capsys):
    """The catalogue's base file is fine: each case above fails for its one change only."""
    assert cli.main(["report", str(good_result_file(tmp_path))]) == 0
    later = tmp_path / "b.json"  # another run: a copy of the same one is refused (tests/test_history.py)
    later.write_text(json.dumps({**good_result(), "datetime": "2026-12-01T00:00:00+00:00"}))
    assert cli.main(["compare", str(good_result_file(tmp_path)), str(later)]) == 0


OUTPUTS = [
    ("report-a-folder", lambda t: ["report", str(t)], ["a folder, not a result file", "*.json"]),
    ("report-missing", lambda t: ["report", str(t / "none.json")], ["none.json: no such result file"]),
    ("report-not-json", lambda t: ["report", str(a_file(t))], ["a-file: not a JSON result file"]),
    ("report-not-utf8", lambda t: ["report", str(binary(t))], ["bin.json: not a JSON result file"]),
    ("markdown-missing-folder", lambda t: ["report", str(good_result_file(t)), "--markdown", str(t / "no" / "r.md")],
     ["--markdown", "the folder", "does not exist"]),
    ("markdown-is-folder", lambda t: ["report", str(good_result_file(t)), "--markdown", str(t)], ["--markdown", "is a folder"]),
    ("readme-missing-folder", lambda t: ["report", str(good_result_file(t)), "--readme", str(t / "no" / "README.md")],
     ["--readme", "does not exist"]),
    ("html-is-file", lambda t: ["report", str(good_result_file(t)), "--html", str(a_file(t))], ["--html", "is a file, not a folder"]),
    ("compare-old-missing", lambda t: ["compare", str(t / "old.json"), str(good_result_file(t))], ["old.json: no such result file"]),
    ("compare-new-folder", lambda t: ["compare", str(good_result_file(t)), str(t)], ["a folder, not a result file"]),
    ("history-missing", lambda t: ["history", str(t / "none.json")], ["none.json: no such result file"]),
    ("history-html-is-file", lambda t: ["history", str(good_result_file(t)), "--html", str(a_file(t))],
     ["--html", "is a file, not a folder"]),
]


def binary(tmp: Path) -> Path:
    path = tmp / "bin.json"
    path.write_bytes(b"\xff\xfe\x00garbage")
    return path


@pytest.mark.parametrize("argv, expected", [pytest.param(a, e, id=i) for i, a, e in OUTPUTS])
def test_bad_report_input(tmp_path, capsys, argv, expected):
    message = refused(capsys, argv(tmp_path))
    for part in expected:
        assert part in message


# --- no traceback reaches the terminal; --debug shows one -------------------------------------

@pytest.mark.parametrize("argv, variable", [
    (["datasets", "info", "synthetic:scale=-1"], {}),
    (["report", "RESULT"], {}),
    (["run", "SUITE"], {}),
    (["datasets", "list"], {"GNNBENCH_LMDB_MAP_SIZE": "lots"}),
], ids=["dataset", "result", "suite", "variable"])
def test_no_traceback_in_a_real_process(tmp_path, argv, variable):
    suite = tmp_path / "bad.yaml"
    suite.write_text(with_settings("fanout: []"))
    result = bad_result(tmp_path, setting("benchmarks.0.stats.median", 0.0))
    argv = [str(suite) if a == "SUITE" else str(result) if a == "RESULT" else a for a in argv]
    proc = subprocess.run([sys.executable, "-m", "bench.cli", *argv], capture_output=True, text=True,
                          env={**os.environ, "GNNBENCH_CACHE": str(tmp_path / "hub"), **variable}, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("gnnbench: error: ") and "Traceback" not in proc.stderr
    assert proc.stderr.count("\n") <= 3  # one message, not a page


def test_debug_shows_the_traceback(tmp_path):
    suite = tmp_path / "bad.yaml"
    suite.write_text(with_settings("fanout: []"))
    proc = subprocess.run([sys.executable, "-m", "bench.cli", "run", str(suite), "--debug"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "Traceback" in proc.stderr and "settings.fanout" in proc.stderr


# --- the one helper ---------------------------------------------------------------------------

def refused(capsys, argv: list[str]) -> str:
    """Run `gnnbench ARGV` in-process; it must exit 2 with a message and no traceback. The message."""
    try:
        code = cli.main(argv)
    except SystemExit as exit:  # argparse's own errors (usage) exit 2 the same way
        code = exit.code
    err = capsys.readouterr().err
    assert code == 2, f"exit {code} for {argv}: {err}"
    assert err.strip() and "Traceback" not in err
    return err

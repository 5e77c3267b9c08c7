"""Property-based fuzzing (hypothesis) of the readers of what users and other processes leave on disk
(issue 52): a typed graph folder (bench/datasets/typed_npy.py), a given link split
(bench/datasets/npy_folder.py, link_split.py) and a lock's owner record (bench/locks.py). Any generated
input gives a result or the one clear error, never a traceback; and what a reader accepts holds every
check (bench/datasets/graph_checks.py), tested here again from scratch: never a silent accept.
The settings are tests/test_fuzz_inputs.py's (200 examples a property, derandomized under CI=true)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import event, given, settings, strategies as st
from hypothesis.extra import numpy as hnp

from bench import locks
from bench.datasets import graph_checks, hub, link_split, npy_folder, typed_npy
from tests.test_fuzz_inputs import FUZZ

DTYPES = st.sampled_from([np.int8, np.int32, np.int64, np.uint64, np.float32, np.float64, np.bool_])


@st.composite
def arrays(draw):
    """Any small array: ids mostly near a small graph's range (so some are accepted), and the extremes."""
    dtype = np.dtype(draw(DTYPES))
    if dtype.kind in "iu":
        low = 0 if dtype.kind == "u" else -2
        elements = st.one_of(st.integers(low, 9), st.integers(low, 9), st.sampled_from([np.iinfo(dtype).max, low]))
    elif dtype.kind == "f":
        elements = st.floats(width=dtype.itemsize * 8, allow_nan=True, allow_infinity=True)
    else:
        elements = st.booleans()
    shape = draw(st.one_of(hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=6),
                           st.tuples(st.just(2), st.integers(0, 8)), st.tuples(st.integers(0, 8))))
    return draw(hnp.arrays(dtype, shape, elements=elements))


# --- a typed graph folder ------------------------------------------------------------------------------

BASE = {
    "nodes/paper/features.npy": np.arange(24, dtype=np.float32).reshape(8, 3),
    "nodes/author/features.npy": np.ones((5, 2), dtype=np.float32),
    "nodes/paper/labels.npy": np.array([0, 1, 0, 1, 0, 1, 0, 1]),
    "nodes/paper/train_idx.npy": np.array([0, 1, 2, 3]),
    "nodes/paper/val_idx.npy": np.array([4, 5]),
    "nodes/paper/test_idx.npy": np.array([6, 7]),
    "edges/paper__cites__paper.npy": np.array([[0, 1, 2], [1, 2, 3]]),
    "edges/paper__written_by__author.npy": np.array([[0, 1], [0, 4]]),
}
PART = st.sampled_from(["paper", "author", "cites", "ci:tes", "_x", "x_", "rev_cites", "a.b", "é", "", "a b", "x__y",
                        "\x1b[2J", "\u202e"])
NAME_TEXT = st.one_of(st.builds(lambda *p: "__".join(p), PART, PART, PART),
                      st.lists(st.one_of(PART, st.just("__")), max_size=6).map("".join))
JSON = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(-10, 10**20), st.floats(), st.text(max_size=8)),
                    lambda inner: st.one_of(st.lists(inner, max_size=3),
                                            st.dictionaries(st.sampled_from(["target", "num_nodes", "paper",
                                                                             "institute", "author"]), inner, max_size=3)),
                    max_leaves=10)
FILES = st.sampled_from([*BASE, "edges/author__wrote__paper.npy", "nodes/venue/features.npy"])
IDS = st.integers(-2, 12)
# each change to the base folder: small edits of an array (so that much of what is made is read whole,
# and the checks themselves decide), any array, a relation renamed, a file gone, graph.json replaced
CHANGES = st.lists(st.one_of(
    st.tuples(st.just("set"), FILES, st.tuples(st.floats(0, 1, exclude_max=True), IDS)),  # one value
    st.tuples(st.just("fill"), FILES, IDS),  # every value (one class, self-loops only)
    st.tuples(st.just("extend"), FILES, st.lists(IDS, max_size=6)),  # values added (overlaps, repeats)
    st.tuples(st.just("slice"), FILES, st.integers(0, 3)),  # values cut (empty splits, relations)
    st.tuples(st.just("cast"), FILES, DTYPES),
    st.tuples(st.just("array"), FILES, arrays()),
    st.tuples(st.just("rename"), st.sampled_from([k for k in BASE if k.startswith("edges/")]), NAME_TEXT),
    st.tuples(st.just("delete"), st.sampled_from([*BASE, "graph.json"]), st.none()),
    st.tuples(st.just("config"), st.just("graph.json"), st.one_of(JSON, st.fixed_dictionaries(
        {"target": st.sampled_from(["paper", "author"]), "num_nodes": st.dictionaries(PART, st.one_of(
            st.integers(-1, 10), st.just(10**15)), max_size=2)}))),
), max_size=5)


def edited(array: np.ndarray, kind: str, value) -> np.ndarray:
    array = array.copy()
    if kind == "set" and array.size:
        array.flat[int(value[0] * array.size)] = value[1]
    elif kind == "fill":
        array[...] = value
    elif kind == "extend" and array.ndim == 1:
        array = np.concatenate([array, np.array(value, dtype=array.dtype)])
    elif kind == "extend" and array.ndim == 2 and array.shape[0] == 2:  # an edge_index [2, E]: pairs added
        array = np.concatenate([array, np.array(value[:len(value) // 2 * 2], dtype=array.dtype).reshape(2, -1)], axis=1)
    elif kind == "slice":
        array = array[..., :value]
    elif kind == "cast":
        array = array.astype(value)
    return array


def write_typed(folder, changes) -> None:
    for name, array in BASE.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        np.save(folder / name, array)
    (folder / "graph.json").write_text(json.dumps({"target": "paper"}))
    for kind, name, value in changes:
        path = folder / name
        if kind in ("set", "fill", "extend", "slice", "cast") and path.is_file():
            try:
                with np.errstate(all="ignore"):
                    np.save(path, edited(np.load(path), kind, value))
            except (OverflowError, ValueError, IndexError):  # not a change this array can take: not made
                pass
        elif kind == "array":
            path.parent.mkdir(parents=True, exist_ok=True)
            np.save(path, value)
        elif kind == "rename" and path.is_file() and value and "/" not in value and value not in (".", ".."):
            path.rename(path.with_name(value + ".npy"))
        elif kind == "delete" and path.is_file():
            path.unlink()
        elif kind == "config":
            path.write_text(json.dumps(value))


def holds_every_check(g: dict) -> None:
    """What read_folder returned, checked from scratch."""
    counts, labels, splits = g["counts"], g["labels"], g["splits"]
    assert all(graph_checks.name_problem(t, "") is None for t in counts)
    assert all(0 < n <= graph_checks.MAX_NODES for n in counts.values()) and sum(counts.values()) <= graph_checks.MAX_NODES
    assert g["target"] in counts and labels.shape == (counts[g["target"]],)
    assert np.unique(labels[labels >= 0]).size >= 2
    ids = [np.asarray(splits[s]) for s in ("train_idx", "val_idx", "test_idx")]
    together = np.concatenate(ids)
    assert all(i.size for i in ids) and np.unique(together).size == together.size  # non-empty, disjoint, no repeats
    assert together.min() >= 0 and together.max() < counts[g["target"]] and (labels[together] >= 0).all()
    assert g["relations"]
    loops_only = True
    for (src, name, dst), (s, d) in g["relations"].items():
        assert all(graph_checks.name_problem(p, "") is None for p in (src, name, dst))
        assert s.size and s.shape == d.shape
        assert s.min() >= 0 and s.max() < counts[src] and d.min() >= 0 and d.max() < counts[dst]
        loops_only &= src == dst and bool((s == d).all())
    assert not loops_only


@FUZZ
@given(changes=CHANGES)
def test_generated_typed_folders_are_read_and_hold_every_check_or_refused_clearly(tmp_path_factory, changes):
    root = tmp_path_factory.mktemp("typed")
    folder = root / "g"
    write_typed(folder, changes)
    try:
        g = typed_npy.read_folder(folder)
    except hub.DatasetError as exc:
        lines = str(exc).splitlines()
        assert lines[0].startswith(f"typed-npy:{folder}: ") and len(lines) > 1
        assert all(line.startswith(str(folder)) for line in lines[1:]), lines  # each problem names its file
        event("refused")  # --hypothesis-show-statistics: how many of each
        return
    event("accepted")
    holds_every_check(g)
    spec = {"name": "fuzz", "source": "typed-npy", "params": {"path": str(folder)}}
    try:  # what is accepted converts too (a name the hub cannot write was a traceback there)
        typed_npy.materialise(spec, root / "hub")
    except hub.DatasetError:
        pass


# --- a given link split ----------------------------------------------------------------------------------

NODES = 10
PARTS = [*npy_folder.LINK_POS, "val_neg", "test_neg"]
LINK_BASE = {"train_pos": np.array([[0, 1], [1, 2], [2, 3], [3, 4]]), "val_pos": np.array([[4, 5]]),
             "test_pos": np.array([[5, 6]])}
LINK_NEG = {"per-positive": {"val_neg": np.array([[7, 8, 9]]), "test_neg": np.array([[7, 8, 9]])},
            "shared": {"val_neg": np.array([[7, 8], [8, 9]]), "test_neg": np.array([[7, 8], [8, 9]])}}
LINK_CHANGES = st.lists(st.one_of(
    st.tuples(st.just("copy"), st.sampled_from(list(LINK_BASE)), st.sampled_from(PARTS), st.integers(0, 3)),
    st.tuples(st.just("set"), st.sampled_from(PARTS), st.floats(0, 1, exclude_max=True), IDS),
    st.tuples(st.just("array"), st.sampled_from(PARTS), arrays(), st.none()),
    st.tuples(st.just("delete"), st.sampled_from(PARTS), st.none(), st.none()),
), max_size=4)


@FUZZ
@given(changes=LINK_CHANGES, kind=st.sampled_from(link_split.NEGATIVES))
def test_generated_link_splits_are_read_and_disjoint_or_refused_clearly(tmp_path_factory, changes, kind):
    folder = tmp_path_factory.mktemp("link")
    parts = {**LINK_BASE, **LINK_NEG[kind]}
    pair_array = lambda x: x is not None and x.ndim == 2 and x.shape[1] == 2 and len(x) > 0  # noqa: E731
    for op, part, a, b in changes:
        if op == "copy" and pair_array(parts.get(part)) and pair_array(parts.get(a)):  # a pair in two parts
            parts[part] = np.concatenate([parts[part], parts[a][b % len(parts[a])][None].astype(parts[part].dtype)])
        elif op == "set" and part in parts and parts[part].size:
            parts[part] = parts[part].copy()
            try:
                parts[part].flat[int(a * parts[part].size)] = b
            except (OverflowError, ValueError):  # not a value of its dtype: that change is not made
                pass
        elif op == "array":
            parts[part] = a
        elif op == "delete":
            parts.pop(part, None)
    names = {**npy_folder.LINK_POS, **npy_folder.LINK_NEG[kind]}
    for key, array in parts.items():
        np.save(folder / names[key], array)
    try:
        found = npy_folder.read_link_split(folder, NODES)
    except hub.DatasetError as exc:
        assert str(folder) in str(exc) and "\n" not in str(exc)
        event("refused")
        return
    event("accepted")
    assert found is not None
    split, where, _ = found
    pairs = [split[k] for k in npy_folder.LINK_POS]
    for p in pairs:
        assert p.dtype == np.int64 and p.ndim == 2 and p.shape[1] == 2 and len(p) and p.min() >= 0 and p.max() < NODES
    keys = np.concatenate([np.unique(p[:, 0] * NODES + p[:, 1]) for p in pairs])
    assert np.unique(keys).size == keys.size  # no pair in two of train, val and test
    for s in ("val", "test"):
        neg = split[f"{s}_neg"]
        assert neg.ndim == 2 and neg.min() >= 0 and neg.max() < NODES
        assert neg.shape[1] == 2 if kind == "shared" else neg.shape[0] == len(split[f"{s}_pos"])


# --- a lock's owner record -------------------------------------------------------------------------------

FIELD_VALUES = st.one_of(st.none(), st.booleans(), st.integers(-2, 1 << 70), st.integers(1, 5000), st.floats(),
                         st.floats(0, 2e9), st.text(max_size=6), st.lists(st.integers(), max_size=2))


RECORD = locks.new_record("building x")  # once: generation must not depend on the clock


@st.composite
def records(draw) -> bytes:
    """An owner record as this gnnbench writes it (this machine's, or a far one's), with some fields
    changed or gone, any JSON, or any bytes (a half-written or foreign file)."""
    record = {**RECORD, "host": draw(st.sampled_from([RECORD["host"], "elsewhere"]))}
    changed = {**record, **draw(st.dictionaries(st.sampled_from(list(locks.FIELDS)), FIELD_VALUES, min_size=1,
                                                 max_size=3))}
    for key in draw(st.sets(st.sampled_from(list(locks.FIELDS)), max_size=1)):
        changed.pop(key)
    text = json.dumps(changed)
    return draw(st.one_of(st.just(json.dumps(record).encode()), st.just(text.encode()),
                          st.builds(lambda t: t.encode(), JSON.map(json.dumps)),
                          st.integers(0, len(text)).map(lambda n: text[:n].encode()), st.binary(max_size=40)))


@FUZZ
@given(data=records())
def test_generated_owner_records_are_read_or_said_unreadable(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("lock") / "x.owner"
    path.write_bytes(data)
    record, why, seen = locks.read_record(path)
    assert seen == data and (record is None) == (why is not None)
    event("unreadable" if record is None else "read")
    if record is None:
        assert locks.describe_unreadable(path, why).startswith("an unreadable owner record written ")
        return
    for key, kind in locks.FIELDS.items():  # accepted: every field as new_record writes it
        assert isinstance(record[key], kind) and not isinstance(record[key], bool)
    locks.describe(record)
    locks.provably_dead(record)


@settings(FUZZ, max_examples=40)
@given(data=records())
def test_a_lock_over_any_record_is_taken_in_the_end_and_leaves_nothing_beside_it(tmp_path_factory, data):
    """Unreadable, or a dead or far owner's: taken over once it stays unchanged (said), never a traceback."""
    target = tmp_path_factory.mktemp("lock") / "x"
    owner = locks.owner_file(target)
    owner.parent.mkdir()
    owner.write_bytes(data)
    record = locks.read_record(owner)[0]
    if record is not None and locks.same_machine(record) and locks.provably_dead(record) is None:
        return  # a live owner on this machine: waited for, rightly (tests/test_locks.py)
    said = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(locks.STALE_ENV, "0.2")
        patch.setattr(locks, "HALF_WRITTEN_S", 0.05)
        with locks.held(target, "building x", say=said.append) as lock:
            assert locks.read_owner(target)["token"] == lock.record["token"]
    assert any(line.startswith(f"taking over the lock on {target} from ") for line in said), said
    assert not owner.parent.exists()

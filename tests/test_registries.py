"""The registries are the single source: a backend, a dataset source and a store registered
with one line each (and their modules) reach suite validation, expansion, the memory estimate
and store preparation with no other edit."""

import importlib
import sys
import types

import pytest

from bench import datasets, stores, suite_format
from bench.backends import BACKENDS, BackendInfo
from bench.run import memory_plan as memory
from bench.run import suite

SUITE = """
name: t
datasets:
  f: {source: fakesource, params: {size: 40}}
backends: [fake-backend]
settings: {store: [memory, fakestore]}
"""


@pytest.fixture
def registered(monkeypatch, tmp_path):
    """A fake source module, store module and backend, each registered by one registry line."""
    source = types.ModuleType("fake_source")
    source.PARAMS = {"size": (int, {"ge": 2}), "seed": (int, {})}
    source.DEFAULTS = {"size": 10, "seed": 0}
    source.expected_stats = lambda params: {"num_nodes": params["size"], "num_edges": 4 * params["size"],
                                            "feature_dim": 8, "num_classes": 2, "num_train": 5, "num_val": 5,
                                            "num_test": 5}
    store = types.ModuleType("fake_store")
    store.PROGRESS_UNIT = "rows"
    store.build = lambda dataset_dir, progress=None: tmp_path / "built"
    with monkeypatch.context() as m:
        m.setitem(sys.modules, "fake_source", source)
        m.setitem(sys.modules, "fake_store", store)
        m.setitem(datasets.SOURCES, "fakesource", datasets.Source("fake_source", None))  # the source's line
        m.setitem(stores.STORES, "fakestore", stores.StoreInfo("a test store", ("plain",),
                                                               modules={"plain": "fake_store"}))  # the store's line
        m.setitem(BACKENDS, "fake-backend", BackendInfo("fake_backend", "pyg", ("cpu-cpu",), ("memory", "fakestore"),
                                                        structure_bytes_per_node=100,
                                                        structure_bytes_per_edge=10))  # the backend's line
        saved = {module: dict(vars(module)) for module in (suite_format, suite)}
        for module in saved:  # the suite format is built from the registries when it is imported
            importlib.reload(module)
        yield source
    # the module as it was (not reloaded again): a reload makes new classes, and SuiteError caught by
    # the CLI (bench/cli.py BAD_INPUT) would then not be the one later tests raise
    for module, names in saved.items():
        vars(module).clear()
        vars(module).update(names)


def test_registered_extensions_reach_validation_and_expansion(registered, write_suite):
    s, _ = suite.load(write_suite(SUITE))
    cells = suite.expand(s)
    assert {c.settings.store for c in cells} == {"memory", "fakestore"}
    assert {c.backend for c in cells} == {"fake-backend"} and {c.stack for c in cells} == {"pyg"}
    assert cells[0].dataset_spec == {"name": "f", "source": "fakesource", "params": {"size": 40, "seed": 0}}


def test_a_registered_sources_params_are_validated_strictly(registered, write_suite):
    with pytest.raises(suite.SuiteError) as info:
        suite.load(write_suite(SUITE.replace("size: 40", "sise: 40")))
    assert "datasets.f.params.sise: unknown key; allowed keys here: size, seed" in str(info.value)
    with pytest.raises(suite.SuiteError, match=r"datasets\.f\.params\.size: Input should be greater than or equal to 2"):
        suite.load(write_suite(SUITE.replace("size: 40", "size: 1")))
    with pytest.raises(suite.SuiteError, match=r"settings\.store.*'memory', 'lmdb', .*'fakestore'"):
        suite.load(write_suite(SUITE.replace("fakestore]", "fakestore, nostore]")))
    assert datasets.parse_name("fakesource:size=12")["params"] == {"size": 12, "seed": 0}


def test_a_registered_backend_and_store_reach_the_memory_model_and_preparation(registered, tmp_path):
    stats = registered.expected_stats({"size": 1000})
    hub = memory.hub_parts(stats)
    in_memory = memory.estimate(stats, "fake-backend", 2, "memory")
    on_disk = memory.estimate(stats, "fake-backend", 2, "fakestore")
    assert in_memory["graph_bytes"] == hub["graph_bytes"] + 100 * 1001 + 10 * 4000  # the registry's structure bytes
    assert in_memory["feature_bytes"] == 1000 * 8 * 4 and on_disk["feature_bytes"] == 0  # not held per rank
    assert on_disk["total_bytes"] == 2 * on_disk["per_rank_bytes"] + on_disk["shared_bytes"]  # the hub's maps: once
    assert stores.prepare("fakestore", tmp_path, "node", say=lambda *a, **k: None) == tmp_path / "built"
    assert stores.prepare("fakestore", tmp_path, "graph") is None  # a task it does not serve: nothing to build


def test_registry_entries_agree():
    """Every backend's stores exist and serve its task; every stack-importable registry is plain data."""
    for name, info in BACKENDS.items():
        for store in info.stores:
            assert info.task in stores.STORES[store].tasks, (name, store)
    assert all(stores.STORES[s].tasks for s in stores.STORES)
    assert all(datasets.stack_of(s) == datasets.SOURCES[s][1] for s in datasets.SOURCES)


def test_the_plain_loops_are_the_registrys():
    """The backends `gnnbench fidelity` compares are those whose registry line names a plain loop,
    and each name is a function of the plain loop module (read as text: it imports torch); every
    task with a backend of its own has one (node, typed-node, link)."""
    import re
    from pathlib import Path

    from bench.harness_costs import fidelity

    source = Path(__file__).resolve().parents[1].joinpath("bench/harness_costs/plain_loops.py").read_text()
    defined = set(re.findall(r"^def (\w+)\(", source, flags=re.M))
    named = {name: info.plain_loop for name, info in BACKENDS.items() if info.plain_loop}
    assert named
    for name, loop in named.items():
        assert loop in defined, (name, loop)
    assert {BACKENDS[name].task for name in named} == {"node", "typed-node", "link"}
    assert set(fidelity.PLAIN_BACKENDS) == set(named)


def test_tasks_table_pairs_backends_and_dataset_shapes():
    from bench import datasets
    from bench.backends import BACKENDS
    from bench.tasks import TASKS, tasks_of_shape

    assert tasks_of_shape("plain") == ("node", "link") and tasks_of_shape("collection") == ("graph",)
    assert all(info.task in TASKS for info in BACKENDS.values())
    assert datasets.tasks({"source": "synthetic", "params": {}}) == ("node", "link")
    with pytest.raises(ValueError, match="unknown dataset shape 'tree'"):
        tasks_of_shape("tree")


def test_no_file_but_the_registry_and_its_own_module_names_a_backend():
    """docs/ADDING.md: a backend is its module and one BACKENDS line; no other file in bench/ names
    it (a string that is its name, in code or a template). A name that is also a stack's (pyg-dist,
    cugraph-pyg) is left out: there it names the stack."""
    import ast
    import re
    from pathlib import Path

    from bench.stacks import known

    root = Path(__file__).resolve().parents[1]
    names = set(BACKENDS) - set(known())
    own = {root / (info.module.replace(".", "/") + ".py") for info in BACKENDS.values()}
    found = []
    for path in sorted((root / "bench").rglob("*")):
        if path == root / "bench/backends/__init__.py" or path in own:
            continue
        if path.suffix == ".py":
            strings = [(n.lineno, n.value) for n in ast.walk(ast.parse(path.read_text()))
                       if isinstance(n, ast.Constant) and isinstance(n.value, str)]
        elif path.suffix == ".j2":
            strings = [(i, m[1]) for i, line in enumerate(path.read_text().splitlines(), 1)
                       for m in re.finditer(r"""["']([\w-]+)["']""", line)]
        else:
            continue
        found += [f"{path.relative_to(root)}:{line}: {value!r}" for line, value in strings if value in names]
    assert not found, "name these in the backend's BACKENDS line instead:\n" + "\n".join(found)

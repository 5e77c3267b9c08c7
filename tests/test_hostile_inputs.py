"""Hostile inputs (issue 39): values that try to become commands, files gnnbench must not write
over, files built to hang or exhaust the reader, and inputs that used to pass without a word.

Scripts: the sbatch script of `gnnbench slurm` and the manifests of `gnnbench k8s` are rendered
with values holding newlines, `;`, `$()`, backticks, quotes and `%`; a control character is
refused with one line naming the option, anything else arrives as one argument. The sbatch script
then runs under bash with a fake `srun`, `scontrol`, `apptainer` and `gnnbench` on PATH (small
shell scripts): an injected command would create a `pwned*` file, and none may appear; the fake
gnnbench records the arguments it was given, which must be the hostile values, unchanged.
"""

from __future__ import annotations

import os
import shlex
import stat
import subprocess
from pathlib import Path

import numpy as np
import pytest
import yaml

from bench import cli
from tests.test_bad_inputs import refused, with_settings

# Each would create a file named pwned-* in the folder the script runs in, if it ever ran as a command.
HOSTILE_NAMES = ["semi;touch pwned-semi;x", "sub$(touch pwned-sub)", "tick`touch pwned-tick`",
                 "quotes'\"both", "pct%j%N%%", "hash #x", "amp&touch pwned-amp", "pipe|touch pwned-pipe"]
HOSTILE_RUN_ARGS = """-k 'ws=2;touch pwned-ra' --note "$(touch pwned-ra2)" --tag '`touch pwned-ra3`'"""
HOSTILE_RUN_ARGV = ["-k", "ws=2;touch pwned-ra", "--note", "$(touch pwned-ra2)", "--tag", "`touch pwned-ra3`"]


def executable(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def fake_tools(folder: Path) -> Path:
    """A bin folder: srun and apptainer run what they are given (their own options dropped), as
    the real ones do on a node; scontrol does nothing; gnnbench writes its arguments (NUL-separated)
    to $ARGV_FILE."""
    folder.mkdir()
    executable(folder / "srun", '#!/bin/bash\nwhile [[ $# -gt 0 && $1 == --* ]]; do shift; done\nexec "$@"\n')
    executable(folder / "apptainer", '#!/bin/bash\nshift  # exec\n'
               'while [[ $1 == --* ]]; do [[ $1 == --bind ]] && shift; shift; done\n'
               'shift  # the image\nexec "$@"\n')
    executable(folder / "scontrol", "#!/bin/bash\nexit 0\n")
    executable(folder / "gnnbench", '#!/bin/bash\nprintf \'%s\\0\' "$@" > "$ARGV_FILE"\n')
    return folder


def suite_file(folder: Path, name: str) -> Path:
    """A valid two-rank suite (it fits 2 nodes) under a hostile file name."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.yaml"
    path.write_text(with_settings("world_size: 2"))
    return path


def pwned(tmp: Path) -> list[Path]:
    return [p for p in tmp.rglob("*") if p.name.startswith("pwned")]


def sbatch_directives(text: str) -> list[list[str]]:
    """The #SBATCH lines as sbatch reads them: each line's words (quotes taken, '#' a comment), and
    only those before the first command (sbatch stops reading directives there)."""
    found = []
    for line in text.splitlines()[1:]:
        if line.startswith("#SBATCH"):
            found.append(shlex.split(line[len("#SBATCH"):], comments=True))
        elif line.strip() and not line.startswith("#"):
            break
    return found


# --- the sbatch script -------------------------------------------------------------------------------

@pytest.mark.parametrize("runtime", [None, "pyxis", "apptainer"])
def test_the_sbatch_script_runs_no_injected_command(tmp_path, capsys, runtime):
    suite = suite_file(tmp_path / "suites", HOSTILE_NAMES[0] + "".join(HOSTILE_NAMES[1:]))
    results = tmp_path / ("results " + "".join(n for n in HOSTILE_NAMES if '"' not in n and "#" not in n))
    out = tmp_path / "job.sbatch"
    image = ["--container-image", "nvcr.io#nvidia/pytorch:24.01-py3", "--container-runtime", runtime] if runtime else []
    from bench import cli

    code = cli.main(["slurm", str(suite), "--nodes", "2", "--gpus-per-node", "1", "--partition", "gpu,debug",
                     "--time", "1-02:00", "--results", str(results), "--out", str(out),
                     f"--run-args={HOSTILE_RUN_ARGS}", *image])
    assert code == 0, capsys.readouterr().err
    text = out.read_text()

    # sbatch's reading: every directive one word, all before the first command, the output path whole
    directives = sbatch_directives(text)
    assert all(len(words) == 1 for words in directives), directives
    assert len(directives) == sum(line.startswith("#SBATCH") for line in text.splitlines())
    assert ["--output=" + str(results).replace("%", "%%") + "/slurm-%j.out"] in directives
    assert ["--partition=gpu,debug"] in directives and ["--time=1-02:00"] in directives

    # bash's reading: the script runs on "a node"; nothing injected runs, gnnbench gets the values
    work = tmp_path / "node"
    work.mkdir()
    argv_file = tmp_path / "argv"
    env = {**os.environ, "PATH": f"{fake_tools(tmp_path / 'bin')}:{os.environ['PATH']}", "SLURM_JOB_ID": "77",
           "SLURM_NODEID": "0", "ARGV_FILE": str(argv_file), "GNNBENCH": "gnnbench"}
    proc = subprocess.run(["bash", str(out)], cwd=work, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert pwned(tmp_path) == []
    argv = argv_file.read_text().split("\0")[:-1]
    assert argv == ["run", str(suite), "--results", f"{results}/slurm-77/node0", *HOSTILE_RUN_ARGV]
    assert (results / "slurm-77").is_dir()


def cluster(tmp: Path, command: str, *options: str) -> list[str]:
    image = ["--image", "img"] if command == "k8s" else []
    return [command, str(suite_file(tmp / "s", "good")), "--nodes", "2", "--gpus-per-node", "0", *image, *options]


# (case id, argv from a tmp folder, what the one line names)
SLURM_REFUSED = [
    ("suite-trailing-newline", lambda t: ["slurm", str(suite_file(t / "s", "good")) + "\n", "--nodes", "2",
                                          "--gpus-per-node", "0"], ["suite", "control character", "'\\n'"]),
    ("suite-newline-inside", lambda t: ["slurm", str(suite_file(t / "s", "a\necho pwned")), "--nodes", "2",
                                        "--gpus-per-node", "0"], ["suite", "control character"]),
    ("results-newline", lambda t: cluster(t, "slurm", "--results", str(t / "r\ntouch pwned")), ["--results", "control character"]),
    ("results-escape", lambda t: cluster(t, "slurm", "--results", str(t / "r\x1b[2J")), ["--results", "'\\x1b'"]),
    ("results-double-quote", lambda t: cluster(t, "slurm", "--results", str(t / 'r"x')), ["--results", "sbatch", "double quotes"]),
    ("results-backslash", lambda t: cluster(t, "slurm", "--results", str(t / "r\\x")), ["--results", "sbatch", "backslashes"]),
    ("results-hash", lambda t: cluster(t, "slurm", "--results", str(t / "r#x")), ["--results", "sbatch", "'#'"]),
    ("partition-trailing-newline", lambda t: cluster(t, "slurm", "--partition", "gpu\n"), ["--partition", "control character"]),
    ("partition-tab", lambda t: cluster(t, "slurm", "--partition", "gpu\tx"), ["--partition", "control character"]),
    ("time-trailing-newline", lambda t: cluster(t, "slurm", "--time", "10\n"), ["--time", "control character"]),
    ("image-trailing-newline", lambda t: cluster(t, "slurm", "--container-image", "img\n"), ["--container-image", "control character"]),
    ("image-semicolon", lambda t: cluster(t, "slurm", "--container-image", "img;touch pwned"), ["--container-image", "allowed: letters"]),
    ("run-args-newline", lambda t: cluster(t, "slurm", "--run-args=-k 'a\ntouch pwned'"), ["--run-args", "control character"]),
    ("out-newline", lambda t: cluster(t, "slurm", "--out", str(t / "x\n.sbatch")), ["--out", "control character"]),
]
K8S_REFUSED = [
    ("suite-trailing-newline", lambda t: ["k8s", str(suite_file(t / "s", "good")) + "\n", "--nodes", "2",
                                          "--gpus-per-node", "0", "--image", "img"], ["suite", "control character"]),
    ("name-trailing-newline", lambda t: cluster(t, "k8s", "--name", "job\n"), ["--name", "control character"]),
    ("name-newline-inside", lambda t: cluster(t, "k8s", "--name", "job\ntouch"), ["--name", "control character"]),
    ("name-digit-first", lambda t: cluster(t, "k8s", "--name", "1job"), ["--name '1job'", "starting with a letter"]),
    ("name-too-long", lambda t: cluster(t, "k8s", "--name", "j" * 64), ["--name", "at most 63"]),
    ("namespace-trailing-newline", lambda t: cluster(t, "k8s", "--namespace", "ns\n"), ["--namespace", "control character"]),
    ("namespace-dot", lambda t: cluster(t, "k8s", "--namespace", "a.b"), ["--namespace 'a.b'", "at most 63"]),
    ("runtime-trailing-newline", lambda t: cluster(t, "k8s", "--runtime", "rt\n"), ["--runtime", "control character"]),
    ("claim-trailing-newline", lambda t: cluster(t, "k8s", "--results-claim", "pvc\n"), ["--results-claim", "control character"]),
    ("claim-semicolon", lambda t: cluster(t, "k8s", "--results-claim", "pvc;x"), ["--results-claim", "at most 253"]),
    ("image-trailing-newline", lambda t: cluster(t, "k8s", "--image", "img\n"), ["--image", "control character"]),
    ("image-space", lambda t: cluster(t, "k8s", "--image", "img x"), ["--image", "allowed: letters"]),
    ("shm-zero", lambda t: cluster(t, "k8s", "--shm-size", "0"), ["--shm-size '0'", "above zero"]),
    ("shm-zero-gi", lambda t: cluster(t, "k8s", "--shm-size", "0.0Gi"), ["--shm-size '0.0Gi'", "above zero"]),
    ("shm-trailing-newline", lambda t: cluster(t, "k8s", "--shm-size", "16Gi\n"), ["--shm-size", "control character"]),
    ("run-args-newline", lambda t: cluster(t, "k8s", "--run-args=-k 'a\nb'"), ["--run-args", "control character"]),
]


@pytest.mark.parametrize("argv, expected", [pytest.param(a, e, id=f"slurm-{i}") for i, a, e in SLURM_REFUSED]
                         + [pytest.param(a, e, id=f"k8s-{i}") for i, a, e in K8S_REFUSED])
def test_a_control_character_or_a_bad_name_is_refused(tmp_path, capsys, argv, expected):
    message = refused(capsys, argv(tmp_path))
    assert message.count("\n") == 1, message  # one line, the control character shown escaped
    for part in expected:
        assert part in message, part
    assert not list(tmp_path.rglob("*.sbatch")) and pwned(tmp_path) == []


@pytest.mark.parametrize("kind", ["trainjob", "pytorchjob"])
def test_the_k8s_command_runs_no_injected_command(tmp_path, capsys, kind):
    from bench import cli

    suite = suite_file(tmp_path / "suites", "".join(HOSTILE_NAMES))
    out = tmp_path / "job.yaml"
    code = cli.main(["k8s", str(suite), "--nodes", "2", "--gpus-per-node", "0", "--image", "ghcr.io/o/gnnbench:1.0",
                     "--kind", kind, "--name", "gnnbench-x", "--out", str(out), f"--run-args={HOSTILE_RUN_ARGS}"])
    assert code == 0, capsys.readouterr().err
    manifest = yaml.safe_load(out.read_text())
    spec = manifest["spec"]
    command = (spec["trainer"]["command"] if kind == "trainjob"
               else spec["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["command"])
    assert command[:2] == ["bash", "-c"] and len(command) == 3
    work = tmp_path / "pod"
    work.mkdir()
    argv_file = tmp_path / "argv"
    env = {**os.environ, "PATH": f"{fake_tools(tmp_path / 'bin')}:{os.environ['PATH']}", "PET_NODE_RANK": "1",
           "ARGV_FILE": str(argv_file)}
    proc = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert pwned(tmp_path) == []
    assert argv_file.read_text().split("\0")[:-1] == ["run", str(suite), "--results", "/results/gnnbench-x/node1",
                                                      *HOSTILE_RUN_ARGV]


def test_whole_string_patterns_do_not_end_in_dollar():
    """`re.match(r"^...$")` passes a trailing newline: bench/ checks whole strings with fullmatch."""
    import re

    pattern = re.compile(r"""re\.(?:compile|match)\(r?["'][^"']*\$["']""")
    offenders = []
    for path in Path(__file__).resolve().parents[1].joinpath("bench").rglob("*.py"):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if pattern.search(line) and "re.M" not in line and "_SIZE" not in line:
                offenders.append(f"{path.name}:{number}: {line.strip()}")
    assert offenders == []


# --- nothing written over ----------------------------------------------------------------------------

@pytest.mark.parametrize("command", ["slurm", "k8s"])
def test_out_refuses_an_existing_file_unless_force(tmp_path, capsys, command):
    from bench import cli

    mine = tmp_path / "mine.txt"
    mine.write_text("my own notes\n")
    message = refused(capsys, cluster(tmp_path, command, "--out", str(mine), "--results" if command == "slurm" else
                                      "--namespace", str(tmp_path / "r") if command == "slurm" else "ns"))
    assert f"--out {mine}: {mine} is already there" in message and "--force" in message
    assert mine.read_text() == "my own notes\n"
    argv = cluster(tmp_path, command, "--out", str(mine), "--force")
    if command == "slurm":
        argv += ["--results", str(tmp_path / "r")]
    assert cli.main(argv) == 0
    assert mine.read_text() != "my own notes\n"


def test_slurm_default_script_is_not_written_over(tmp_path, capsys):
    from bench import cli

    argv = cluster(tmp_path, "slurm", "--results", str(tmp_path / "r"))
    assert cli.main(argv) == 0
    [script] = (tmp_path / "r").glob("slurm-*.sbatch")
    script.write_text("# edited by hand\n")
    message = refused(capsys, argv)
    assert f"{script} is already there" in message and "--force" in message
    assert script.read_text() == "# edited by hand\n"


def test_report_html_writes_only_into_a_folder_it_made_or_marked(tmp_path, capsys):
    from bench import cli
    from bench.publish.site import SITE_MARK
    from tests.test_bad_inputs import good_result_file

    result = good_result_file(tmp_path)
    mine = tmp_path / "my-site"
    mine.mkdir()
    (mine / "index.html").write_text("<p>my own page</p>")
    message = refused(capsys, ["report", str(result), "--html", str(mine)])
    assert message.count("\n") == 1 and f"{mine / 'index.html'} is already there" in message
    assert SITE_MARK in message and (mine / "index.html").read_text() == "<p>my own page</p>"
    assert sorted(p.name for p in mine.iterdir()) == ["index.html"]  # nothing else written either
    # a new folder is made and marked, and the next build replaces its own pages
    site = tmp_path / "site"
    assert cli.main(["report", str(result), "--html", str(site)]) == 0
    assert (site / SITE_MARK).is_file() and (site / "index.html").is_file()
    assert cli.main(["report", str(result), "--html", str(site)]) == 0
    # a folder that holds none of the site's files (make site: the docs in site/docs first) is marked
    docs_first = tmp_path / "docs-first"
    (docs_first / "docs").mkdir(parents=True)
    (docs_first / "docs" / "index.html").write_text("docs")
    assert cli.main(["report", str(result), "--html", str(docs_first)]) == 0
    assert (docs_first / SITE_MARK).is_file() and (docs_first / "docs" / "index.html").read_text() == "docs"
    capsys.readouterr()


# --- bundle: an update removes only what its own manifest lists ---------------------------------------

def planted_bundle(tmp: Path, files) -> Path:
    out = tmp / "bundle"
    (out / "gnnbench").mkdir(parents=True)
    manifest = {"format": 1, "complete": True}
    if files is not None:
        manifest["files"] = files
    (out / "bundle.json").write_text(__import__("json").dumps(manifest))
    return out


def test_bundle_update_removes_only_the_files_its_manifest_lists(tmp_path):
    from bench.commands import bundle

    out = planted_bundle(tmp_path, ["gnnbench/old-module.py", "install.sh"])
    (out / "gnnbench" / "old-module.py").write_text("# from an earlier gnnbench")
    (out / "gnnbench" / "my-notes.txt").write_text("mine")
    (out / "install.sh").write_text("# an earlier install.sh")
    previous = bundle.check_folder(out)
    written = bundle.copy_source(out, previous)
    assert not (out / "gnnbench" / "old-module.py").exists()  # listed: removed
    assert (out / "gnnbench" / "my-notes.txt").read_text() == "mine"  # not listed: kept
    assert "gnnbench/bench/cli.py" in written and (out / "gnnbench" / "bench" / "cli.py").is_file()
    assert (out / "install.sh").stat().st_mode & 0o111


@pytest.mark.parametrize("files, words", [
    (["../victim.txt"], ["`files` is not a list of paths inside"]),
    (["/etc/passwd"], ["`files` is not a list of paths inside"]),
    ("gnnbench", ["`files` is not a list of paths inside"]),
    (None, ["gnnbench/bench/cli.py: is there", "does not list it"]),
], ids=["dot-dot", "absolute", "not-a-list", "unlisted-source"])
def test_bundle_refuses_a_manifest_that_reaches_outside_or_lists_nothing(tmp_path, capsys, files, words):
    out = planted_bundle(tmp_path, files)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    (out / "gnnbench" / "bench").mkdir()
    (out / "gnnbench" / "bench" / "cli.py").write_text("# a user's own edit")
    message = refused(capsys, ["bundle", str(out), "--python", "3.11", "--platform", "x86_64"])
    assert message.count("\n") == 1 and all(w in message for w in words), message
    assert victim.read_text() == "keep me" and (out / "gnnbench" / "bench" / "cli.py").read_text() == "# a user's own edit"
    assert sorted(p.name for p in out.iterdir()) == ["bundle.json", "gnnbench"]


def test_bundle_refuses_a_folder_whose_bundle_json_is_not_a_manifest(tmp_path, capsys):
    out = tmp_path / "b"
    out.mkdir()
    (out / "bundle.json").write_text("{not json")
    (out / "gnnbench").mkdir()
    message = refused(capsys, ["bundle", str(out), "--python", "3.11", "--platform", "x86_64"])
    assert "bundle.json: not a bundle manifest" in message and (out / "gnnbench").is_dir()


def test_bundle_checks_the_torch_version_before_any_download(tmp_path, capsys):
    """--torch 0.1: the package index is asked for torch's versions (nothing downloaded) and the
    bundle is refused before its folder is made."""
    import sys

    proc = subprocess.run([sys.executable, "-m", "pip", "index", "versions", "torch"], capture_output=True, text=True,
                          timeout=120)
    if proc.returncode != 0 or "Available versions" not in proc.stdout:
        if os.environ.get("CI"):
            pytest.fail(f"the package index cannot be asked for torch's versions: {proc.stderr[-300:]}")
        pytest.skip("the package index cannot be asked for torch's versions here")
    out = tmp_path / "b"
    message = refused(capsys, ["bundle", str(out), "--python", "3.11", "--platform", "x86_64", "--torch", "0.1"])
    assert message.count("\n") == 1 and "--torch 0.1: the package index has no torch 0.1" in message, message
    assert not out.exists()


# --- hostile files fail fast and clearly -----------------------------------------------------------------

def billion_laughs(levels: int = 9) -> str:
    """The YAML alias bomb: a few hundred bytes that expand to 9^levels strings."""
    lines = ['l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, levels):
        lines.append(f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("text, words", [
    (billion_laughs(), ["aliases expand to", "at most 100,000 values"]),
    ("a: &a [1, *a]\n", ["an alias refers to a collection that holds it"]),
], ids=["billion-laughs", "recursive-alias"])
def test_a_yaml_alias_bomb_in_a_suite_fails_fast_naming_the_file(tmp_path, capsys, text, words):
    import time

    path = tmp_path / "bomb.yaml"
    path.write_text(GOOD_SUITE_HEAD + text)
    started = time.perf_counter()
    message = refused(capsys, ["run", str(path), "--results", str(tmp_path / "r"), "--no-install"])
    assert time.perf_counter() - started < 1.0
    assert message.count("\n") == 1 and str(path) in message and all(w in message for w in words), message


GOOD_SUITE_HEAD = "name: bomb\ndatasets:\n  g: synthetic:scale=8\nbackends: [pyg-neighbor]\n"


def test_anchors_and_merge_keys_that_stay_small_still_load():
    from bench import strict_yaml

    text = "base: &b {epochs: 2, batch_size: 64}\nsettings:\n  <<: *b\n  fanout: [5, 5]\nl: [*b, *b]\n"
    assert strict_yaml.load_text(text, "x.yaml")["settings"] == {"epochs": 2, "batch_size": 64, "fanout": [5, 5]}


def test_a_yaml_alias_bomb_in_graphbolt_metadata_fails_fast_naming_the_file(tmp_path, capsys):
    import time

    folder = tmp_path / "gb"
    folder.mkdir()
    meta = folder / "metadata.yaml"
    meta.write_text("dataset_name: bomb\n" + billion_laughs()
                    + "graph: {nodes: [{num: 4}], edges: [{format: numpy, path: *l8}]}\n")
    started = time.perf_counter()
    message = refused(capsys, ["datasets", "check", f"graphbolt:{folder}", "--cache-dir", str(tmp_path / "hub")])
    assert time.perf_counter() - started < 1.0
    assert message.count("\n") == 1 and f"{meta}: its aliases expand to" in message, message
    assert not (tmp_path / "hub" / "datasets").exists() or not any((tmp_path / "hub" / "datasets").iterdir())


@pytest.fixture(scope="module")
def small_graph(tmp_path_factory):
    from tests import own_graphs

    return own_graphs.reference(tmp_path_factory.mktemp("synthetic"))


def cut_header(path: Path) -> None:
    """The header's length field kept, its text cut mid-dict and padded: numpy's parser ends in
    tokenize's TokenError (no ValueError)."""
    data = path.read_bytes()
    length = int.from_bytes(data[8:10], "little")
    text = data[10:10 + length]
    cut = text[:text.index(b"'shape'") + 10]
    path.write_bytes(data[:10] + cut + b" " * (length - len(cut) - 1) + b"\n" + data[10 + length:])


@pytest.mark.parametrize("layout", ["npy", "graphbolt"])
def test_a_npy_with_a_cut_off_header_is_named(tmp_path, capsys, small_graph, layout):
    from tests import own_graphs

    folder = tmp_path / "graph"
    if layout == "npy":
        own_graphs.write_npy(small_graph, folder)
        bad = folder / "features.npy"
    else:
        own_graphs.write_graphbolt(small_graph, folder)
        bad = folder / "feat.npy"
    cut_header(bad)
    message = refused(capsys, ["datasets", "check", f"{layout}:{folder}", "--cache-dir", str(tmp_path / "hub")])
    assert message.count("\n") == 1 and f"{bad}: its .npy header is cut off or malformed" in message, message


# A 952-byte .pt's worth of pickle: bytearray(3e9), which torch's weights_only load allows
BYTEARRAY_BOMB = b"\x80\x02cbuiltins\nbytearray\n\x8a\x05" + (3_000_000_000).to_bytes(5, "little", signed=True) + b"\x85R."


def torch_zip(path: Path, data_pkl: bytes, compress: bool = False) -> Path:
    """A file laid out as torch.save's zip format writes it (archive/data.pkl and its neighbours)."""
    import zipfile

    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED) as archive:
        archive.writestr("archive/data.pkl", data_pkl)
        archive.writestr("archive/byteorder", "little")
        archive.writestr("archive/version", "3\n")
    return path


@pytest.mark.parametrize("layout", ["zip", "legacy"])
def test_a_pt_whose_pickle_asks_for_a_bytearray_is_refused_before_torch_reads_it(tmp_path, layout):
    """The check reads the pickle's opcodes (pickletools) and builds nothing: no torch needed."""
    import resource

    from bench.datasets import hub, pyg_file

    path = tmp_path / "graph.pt"
    if layout == "zip":
        torch_zip(path, BYTEARRAY_BOMB)
    else:
        path.write_bytes(BYTEARRAY_BOMB)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(hub.DatasetError) as err:
        pyg_file.refuse_unneeded_globals(path)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 100_000  # KiB: nothing near 3 GB
    message = str(err.value)
    assert message.startswith(f"{path}: its pickle asks for builtins.bytearray") and "unsafe_load" in message


def test_what_a_graph_file_names_passes_and_a_zip_bomb_does_not(tmp_path):
    import collections
    import pickle

    from bench.datasets import hub, pyg_file

    plain = torch_zip(tmp_path / "plain.pt", pickle.dumps(collections.OrderedDict(a=1), protocol=2))
    pyg_file.refuse_unneeded_globals(plain)  # OrderedDict is what torch.save writes: allowed
    squeezed = torch_zip(tmp_path / "bomb.pt", b"\x80\x02N" + b"\x00" * 50_000_000 + b".", compress=True)
    with pytest.raises(hub.DatasetError, match="unpacks to 50,000,004 bytes, more than the file"):
        pyg_file.refuse_unneeded_globals(squeezed)


@pytest.mark.stacks
def test_datasets_check_refuses_the_bytearray_pt_in_the_pyg_stack(tmp_path, capsys):
    import time

    from tests.conftest import require_stacks

    require_stacks("pyg")
    path = torch_zip(tmp_path / "graph.pt", BYTEARRAY_BOMB)
    started = time.perf_counter()
    message = refused(capsys, ["datasets", "check", f"pyg-file:{path}", "--cache-dir", str(tmp_path / "hub")])
    assert time.perf_counter() - started < 60  # the stack's start; the 3 GB are never asked for
    assert f"{path}: its pickle asks for builtins.bytearray" in message, message


def test_features_whose_baseline_cannot_fit_are_refused_before_they_are_read(tmp_path, capsys, small_graph):
    """A small graph with 4 million feature columns (a 4 GB sparse file: nothing on disk): the
    baseline's Gram matrix alone would be 128 TB. Refused from the header, no folder left."""
    import time

    import numpy as np

    from tests import own_graphs

    folder = own_graphs.write_npy(small_graph, tmp_path / "graph")
    features = folder / "features.npy"
    shape = (small_graph.num_nodes, 4_000_000)
    with open(features, "wb") as f:
        np.lib.format.write_array_header_1_0(f, {"descr": "<f4", "fortran_order": False, "shape": shape})
        f.truncate(f.tell() + shape[0] * shape[1] * 4)  # a hole: read, it would be zeros
    hub_dir = tmp_path / "hub"
    started = time.perf_counter()
    message = refused(capsys, ["datasets", "check", f"npy:{folder}", "--cache-dir", str(hub_dir)])
    assert time.perf_counter() - started < 10  # reading 4 GB of features would take far longer
    assert message.count("\n") == 1 and f"{features}: " in message and "features-only baseline" in message, message
    assert "4,000,000 feature columns" in message and "GiB is available" in message
    assert not [p for p in hub_dir.rglob("*") if p.is_dir() and "pid" in p.name]  # no temporary folder
    assert not (hub_dir / "datasets").exists() or not any((hub_dir / "datasets").iterdir())


# --- code from data: Planetoid's raw files are pickles ---------------------------------------------------

class Planted:
    """A pickle that runs a command when it is loaded: what a planted raw file can do."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {shlex.quote(str(self.marker))}",))


def planted_root(tmp: Path) -> tuple[Path, Path]:
    """A data root with the official Cora files but ind.cora.x replaced by a planted pickle."""
    import pickle
    import shutil

    from tests.conftest import offline_data_root

    root = tmp / "root"
    shutil.copytree(offline_data_root() / "Cora", root / "Cora")
    marker = tmp / "pwned-planetoid"
    x = root / "Cora" / "raw" / "ind.cora.x"
    x.chmod(0o644)
    x.write_bytes(pickle.dumps(Planted(marker), protocol=2))
    return root, marker


def test_planetoid_raw_files_are_checked_against_the_official_hashes(tmp_path):
    import shutil

    from bench.datasets import hub, planetoid
    from tests.conftest import offline_data_root

    for name in ("Cora", "CiteSeer"):  # the offline copies are the official files
        planetoid.check_raw(offline_data_root() / name / "raw", name)
    assert set(planetoid.RAW_SHA256) | set(planetoid.RAW_GIT_BLOB) == {
        f for n in ("Cora", "CiteSeer", "PubMed") for f in planetoid.raw_files(n)}
    root, marker = planted_root(tmp_path)
    with pytest.raises(hub.DatasetError) as err:
        planetoid.check_raw(root / "Cora" / "raw", "Cora")
    assert str(err.value).startswith(f"{root / 'Cora' / 'raw' / 'ind.cora.x'}: not the official Planetoid file")
    assert not marker.exists()
    # the git blob id of ind.pubmed.allx is git's: a file of known content hashed the same way
    blob = tmp_path / "ind.pubmed.allx"
    shutil.copyfile(root / "Cora" / "raw" / "ind.cora.y", blob)
    expected = subprocess.run(["git", "hash-object", str(blob)], capture_output=True, text=True).stdout.strip()
    assert planetoid.raw_digest(blob)[1] == expected


@pytest.mark.stacks
def test_a_planted_planetoid_file_is_refused_in_the_pyg_stack(tmp_path):
    import sys

    from tests.conftest import require_stacks

    require_stacks("pyg")
    root, marker = planted_root(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "bench.cli", "datasets", "prepare", "planetoid:Cora", "--cache-dir",
                           str(tmp_path / "cache"), "--data-root", str(root)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 2, proc.stderr
    assert f"{root / 'Cora' / 'raw' / 'ind.cora.x'}: not the official Planetoid file" in proc.stderr
    assert not marker.exists() and not list((tmp_path / "cache").glob("**/meta.json"))


# --- nothing silent ----------------------------------------------------------------------------------------

def header_only_edges(folder: Path) -> None:
    path = folder / "edges.csv"
    path.write_text(path.read_text().splitlines()[0] + "\n")


def self_loops_only(folder: Path) -> None:
    import numpy as np

    n = np.load(folder / "labels.npy").shape[0]
    ids = np.arange(n, dtype=np.int64)
    np.save(folder / "edge_index.npy", np.stack([ids, ids]))


def empty_label_column(folder: Path) -> None:
    import pyarrow.csv as pcsv

    path = folder / "nodes.csv"
    table = pcsv.read_csv(path)
    lines = path.read_text().splitlines()
    column = table.column_names.index("label")
    rows = [",".join("" if i == column else cell for i, cell in enumerate(line.split(","))) for line in lines[1:]]
    path.write_text("\n".join([lines[0], *rows]) + "\n")


@pytest.mark.parametrize("layout, damage, words", [
    ("edge-list", header_only_edges, ["edges.csv: ", ": no edges", "at least one edge between two different nodes"]),
    ("npy", self_loops_only, ["edge_index.npy: ", "all 256 edges are self-loops", "two different nodes"]),
    ("edge-list", empty_label_column, ["nodes.csv: column label is empty in every row: no labels"]),
], ids=["edgeless", "all-self-loops", "no-labels"])
@pytest.mark.parametrize("self_loops", ["remove", "keep"])
def test_an_edgeless_or_unlabelled_graph_is_refused_with_one_line(tmp_path, capsys, small_graph, layout, damage,
                                                                 words, self_loops):
    from tests import own_graphs

    folder = tmp_path / "graph"
    if layout == "npy":
        own_graphs.write_npy(small_graph, folder)
    else:
        own_graphs.write_edge_list(small_graph, folder, "csv", "int")
    damage(folder)
    hub_dir = tmp_path / "hub"
    message = refused(capsys, ["datasets", "check", f"{layout}:path={folder},self_loops={self_loops}", "--cache-dir",
                               str(hub_dir)])
    assert message.count("\n") == 1 and str(folder) in message and all(w in message for w in words), message
    assert not (hub_dir / "datasets").exists() or not any((hub_dir / "datasets").iterdir())


@pytest.mark.parametrize("rule", [
    "{backend: pyg-neighbor, batch_size: 65}",  # a typo in a value
    "{dataset: g, mode: cuda-cuda}",  # pyg-neighbor has no cuda-cuda mode: no such cell
], ids=["value-typo", "mode-of-no-cell"])
def test_an_exclude_rule_that_matches_no_cell_is_an_error_naming_it(tmp_path, capsys, rule):
    path = tmp_path / "suite.yaml"
    path.write_text(with_settings("batch_size: [64, 128]") + "exclude:\n  - {backend: pyg-neighbor, batch_size: 64}\n"
                    f"  - {rule}\n")
    message = refused(capsys, ["run", str(path), "--results", str(tmp_path / "r"), "--no-install"])
    assert message.count("\n") == 1, message
    assert f"{path}: exclude.1: " in message and "matches no cell of the suite" in message, message
    assert "exclude.0" not in message  # the first rule drops a cell: fine


def test_an_exclude_rule_that_matches_is_taken(tmp_path):
    from bench.run import suite as suite_mod

    path = tmp_path / "suite.yaml"
    path.write_text(with_settings("batch_size: [64, 128]") + "exclude:\n  - {backend: pyg-neighbor, batch_size: 64}\n")
    suite, _ = suite_mod.load(path)
    assert [c.settings.batch_size for c in suite_mod.expand(suite)] == [128]


def test_compare_refuses_the_same_file_twice(tmp_path, capsys):
    from tests.test_bad_inputs import good_result_file

    good = good_result_file(tmp_path)
    same = tmp_path / "sub" / ".." / good.name
    (tmp_path / "sub").mkdir()
    for argv in (["compare", str(good), str(good)], ["compare", str(good), str(same)],
                 ["compare", str(good), str(good_result_file(tmp_path, "b.json")), "--history", str(good)]):
        message = refused(capsys, argv)
        assert message.count("\n") == 1 and "given twice" in message and "each result file once" in message, message


# --- what a terminal would obey -----------------------------------------------------------------------

# ESC sequences (the window title, colours, clearing the screen), BEL, CR (writes over the line), a C1
# CSI, DEL, a Unicode line separator, and bidi overrides and isolates (reorder what is shown)
OBEYED = ["\x1b]0;pwned\x07", "\x1b[2J", "\r", "\x9b31m", "\x7f", "\u2028", "\u202e", "\u2066", "\u200f", "\x00"]


def test_terminal_safe_escapes_what_a_terminal_obeys_and_nothing_else():
    from bench.inputs import terminal_safe

    for obeyed in OBEYED:
        shown = terminal_safe(f"a{obeyed}b")
        assert shown.isprintable() and shown.startswith("a\\") and shown.endswith("b"), (obeyed, shown)
        assert terminal_safe(shown) == shown  # escaping twice changes nothing
    assert terminal_safe("plain é 中文 line\n\tnext") == "plain é 中文 line\n\tnext"
    assert terminal_safe("\r  epoch 3/5   ") == "\r  epoch 3/5   "  # gnnbench's own progress redraw stays


@pytest.mark.parametrize("argv", [
    lambda folder, hub: ["datasets", "check", f"typed-npy:{folder}", "--cache-dir", str(hub)],  # progress and error lines
    lambda folder, hub: ["datasets", "info", f"npy:{folder}", "--cache-dir", str(hub)],
    lambda folder, hub: ["report", str(folder / "result.json")],
    lambda folder, hub: ["datasets", "check", f"no-such-source:{folder}"],
    lambda folder, hub: ["run", str(folder / "suite.yaml"), "--cache-dir", str(hub)],
    lambda folder, hub: [f"run{OBEYED[0]}"],  # argparse's own error line
], ids=["check", "info", "report", "unknown-source", "run", "argparse"])
def test_no_command_prints_a_users_string_raw(tmp_path, capsys, argv):
    """Issue 52: a folder name holding escape sequences was escaped in the error line, and printed raw
    in `datasets check`'s progress line. Every line of every command goes through one path now."""
    from tests.test_typed_sources import write_typed_npy

    folder = tmp_path / ("g" + "".join(OBEYED[:-1]))  # all but NUL, which no file name holds
    write_typed_npy(folder)
    np.save(folder / "nodes" / "paper" / "labels.npy", np.zeros(np.load(folder / "nodes/paper/labels.npy").shape,
                                                                dtype=np.int64))  # refused: one class
    (folder / "result.json").write_text("{}")
    (folder / "suite.yaml").write_text(f"name: x\ndatasets: {{g: 'npy:{folder.name}'}}\nbackends: [pyg-neighbor]\n")
    try:
        cli.main(argv(folder, tmp_path / "hub"))
    except SystemExit:
        pass
    out, err = capsys.readouterr()
    for text in (out, err):
        assert all(c.isprintable() or c in "\n\t" for c in text), repr(text)
    assert "\\x1b]0;pwned\\x07" in out + err, (out, err)

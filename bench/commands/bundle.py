"""`gnnbench bundle DIR --python 3.X --platform x86_64|aarch64`: everything a GPU node without
internet needs to run gnnbench, in one folder written where there is internet (docs/gpus.md):
install.sh, bundle.json, gnnbench/ (the source), wheels/, torch/, sampler/ (wheels and sources), hub/.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from bench.commands.common import add_data_root
from bench.inputs import InputError
from bench.paths import PYG_WHEELS_ENV, repo_root
from bench import stacks
from bench.run import suite as suite_mod
from bench.datasets.ready import ready, stack_of
from bench.run.prepare import StackHost

PLATFORMS = ("x86_64", "aarch64")
PYTHONS = range(10, 15)  # 3.10 .. 3.14: gnnbench needs >= 3.10
# The oldest glibc the wheels may need: PyTorch's own wheels need 2.28 (manylinux_2_28).
GLIBC = (2, 28)
CUDA_TAG = re.compile(r"cpu|cu\d{3,4}")  # whole string (fullmatch)
# What a node's PyG samples with: pyg-lib (PyG's index only), else torch-sparse (+ torch-scatter)
SAMPLER_WHEELS = ("pyg-lib", "torch-scatter", "torch-sparse")
NODE_SCRIPT = "docker/node-install.sh"
# gnnbench's source tree as the images copy it (docker/Dockerfile)
SOURCE_PARTS = ("bench", "suites", "docker", "pyproject.toml", "README.md")
FORMAT = 1


class BundleError(RuntimeError):
    """A step that could not be done (a download, a build); the message says which and why."""


def add_parser(sub, parents) -> None:
    p = sub.add_parser("bundle", parents=parents,
                       help="write a folder that installs and runs gnnbench on a GPU node without internet")
    p.add_argument("dir", type=Path, metavar="DIR", help="the folder to write (new, or an earlier bundle to update)")
    p.add_argument("--python", required=True, metavar="3.X", help="the node's Python version, e.g. 3.11")
    p.add_argument("--platform", required=True, metavar="ARCH", help="the node's machine: x86_64 or aarch64")
    p.add_argument("--torch", metavar="VERSION", help="the node's torch version, for the sampler wheels "
                   "(default: the pyg stack's pin)")
    p.add_argument("--cuda", default="cu130", metavar="TAG",
                   help="the node's torch build: cpu, cu126, cu128, cu130... (default cu130)")
    p.add_argument("--with-torch", action="store_true",
                   help="also carry torch==VERSION with its dependencies, for a node without a torch of its own "
                        "(installed there only where none imports)")
    p.add_argument("--suite", action="append", metavar="NAME|PATH",
                   help="prepare the datasets of this suite (repeatable; default: gpu and multi-gpu)")
    add_data_root(p)


class Target:
    """The node a bundle is for: its Python (3.X) and machine, as pip's download options."""

    def __init__(self, python: str, machine: str):
        found = re.fullmatch(r"3\.(\d+)", python or "")
        if not found or int(found.group(1)) not in PYTHONS:
            raise InputError(f"--python {python}: give the node's Python as 3.X, one of "
                             f"{', '.join(f'3.{m}' for m in PYTHONS)}")
        if machine not in PLATFORMS:
            raise InputError(f"--platform {machine}: give the node's machine (uname -m there), one of "
                             f"{', '.join(PLATFORMS)}")
        self.python, self.machine, self.minor = python, machine, int(found.group(1))

    @property
    def abi(self) -> str:
        return f"cp3{self.minor}"

    def platform_tags(self, local: bool = False) -> list[str]:
        """manylinux_2_28 and every older one (pip does not widen a --platform by itself);
        `local`: also linux_ARCH, the tag of wheels built without manylinux (PyG's index)."""
        tags = [f"manylinux_2_{m}_{self.machine}" for m in range(GLIBC[1], 4, -1)]
        tags += [f"manylinux2014_{self.machine}"]
        if self.machine == "x86_64":
            tags += ["manylinux2010_x86_64", "manylinux1_x86_64"]
        return tags + ([f"linux_{self.machine}"] if local else [])

    def pip_options(self, local: bool = False) -> list[str]:
        return ["--only-binary=:all:", "--python-version", self.python, "--implementation", "cp",
                "--abi", self.abi, *(o for tag in self.platform_tags(local) for o in ("--platform", tag))]

    def is_here(self) -> bool:
        return (sys.version_info.major, sys.version_info.minor) == (3, self.minor) and platform.machine() == self.machine

    def describe(self) -> str:
        return f"CPython {self.python} on Linux {self.machine} (glibc {GLIBC[0]}.{GLIBC[1]} or newer)"


def say(text: str) -> None:
    print(f"bundle: {text}", flush=True)


def pip(args: list[str], what: str, python: str = sys.executable, env: dict | None = None) -> str:
    """pip with this machine's settings: its output, or BundleError with its last lines."""
    cmd = [python, "-m", "pip", *args]
    env = {**os.environ, **(env or {}), "PIP_PROGRESS_BAR": "off", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-12:])
        raise BundleError(f"{what}: pip failed ({proc.returncode}): {' '.join(cmd[1:])}\n{tail}")
    return proc.stdout


def check_torch_version(target: Target, torch: str) -> None:
    """The package index has that torch for the target, so a mistyped --torch is said before any download."""
    listed = pip(["index", "versions", "torch", *target.pip_options()],
                 f"the torch versions on the package index for {target.describe()}")
    found = re.search(r"Available versions: (.*)", listed)
    versions = [v.strip() for v in found.group(1).split(",")] if found else []
    release = lambda v: tuple(int(p) for p in v.split("+")[0].split(".") if p.isdigit()) + (0,) * 3  # noqa: E731
    if release(torch)[:3] not in {release(v)[:3] for v in versions}:  # 2.11 is 2.11.0
        shown = ", ".join(dict.fromkeys(v.split("+")[0] for v in versions[:12])) or "none"
        raise InputError(f"--torch {torch}: the package index has no torch {torch} for {target.describe()} "
                         f"(it has {shown}{' ...' if len(versions) > 12 else ''}); give the node's torch version "
                         "(python -c 'import torch; print(torch.__version__)' there)")


def wheels_in(folder: Path) -> set[Path]:
    return set(folder.glob("*.whl")) if folder.is_dir() else set()


def megabytes(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 1e6


def pins() -> tuple[dict[str, str], dict[str, str]]:
    """(plain pins, built-from-source pins) of the pyg stack on a machine: name -> requirement."""
    plain, no_isolation = stacks.available()["pyg"].requirement_lines(container=False)
    name = lambda line: re.split(r"[=<>!~ \[;]", line, maxsplit=1)[0].lower()  # noqa: E731
    return {name(r): r for r in plain}, {name(r): r for r in no_isolation}


def host_dependencies() -> list[str]:
    import tomllib

    return tomllib.loads((repo_root() / "pyproject.toml").read_text())["project"]["dependencies"]


def revision() -> str:
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo_root(), capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "diff", "--quiet", "HEAD", "--"], cwd=repo_root()).returncode != 0
        return head + ("-dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


# --- the steps ---------------------------------------------------------------------------------

def check_folder(out: Path) -> list[str]:
    """A new or empty folder, or an earlier bundle: the files its manifest lists (an update's to replace)."""
    if out.exists() and not out.is_dir():
        raise InputError(f"{out}: is a file; give a folder for the bundle")
    if not out.is_dir() or not any(out.iterdir()):
        return []
    manifest_file, allowed = out / "bundle.json", "give a new or empty folder, or an earlier bundle to update"
    if not manifest_file.is_file():
        raise InputError(f"{out}: a folder with other files in it (no bundle.json); {allowed}")
    try:
        manifest = json.loads(manifest_file.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise InputError(f"{manifest_file}: not a bundle manifest ({type(exc).__name__}); {allowed}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise InputError(f"{manifest_file}: not the manifest of a gnnbench bundle (format {FORMAT}); {allowed}")
    listed = manifest.get("files", [])
    if not isinstance(listed, list) or not all(isinstance(f, str) and _inside(out, f) for f in listed):
        raise InputError(f"{manifest_file}: `files` is not a list of paths inside {out}; give a new or empty folder "
                         "(nothing outside it is ever removed)")
    if foreign := [rel for rel, _ in source_files() if rel not in listed and os.path.lexists(out / rel)]:
        raise InputError(f"{out / foreign[0]}: is there and {manifest_file.name} does not list it as written by "
                         f"gnnbench bundle ({len(foreign)} such file(s)); an update replaces only what the bundle wrote: "
                         "move them away, or give a new folder")
    return listed


def _inside(out: Path, rel: str) -> bool:
    """`rel` is a plain relative path that stays inside `out` (no '..', not absolute, no link out)."""
    parts = Path(rel).parts
    if not parts or Path(rel).is_absolute() or ".." in parts or rel != Path(rel).as_posix():
        return False
    return (out / rel).parent.resolve().is_relative_to(out.resolve())


def source_files() -> list[tuple[str, Path]]:
    """What copy_source writes: (path in the bundle, source file), gnnbench's tree and install.sh."""
    found = []
    for part in SOURCE_PARTS:
        src = repo_root() / part
        files = [src] if src.is_file() else sorted(
            f for f in src.rglob("*") if f.is_file() and not f.name.endswith(".pyc") and f.name != ".revision"
            and "__pycache__" not in f.relative_to(src).parts)
        found += [(f"gnnbench/{f.relative_to(repo_root()).as_posix()}", f) for f in files]
    return found + [("install.sh", repo_root() / NODE_SCRIPT)]


def copy_source(out: Path, previous: list[str]) -> list[str]:
    """gnnbench's source tree and install.sh, in place of what the previous manifest lists: the files written."""
    for rel in previous:  # each inside `out` (check_folder)
        if (out / rel).is_file() or (out / rel).is_symlink():
            (out / rel).unlink()
    for folder in sorted({(out / rel).parent for rel in previous}, key=lambda p: -len(p.parts)):
        while folder != out and folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()  # emptied by the removal above
            folder = folder.parent
    written = []
    for rel, src in source_files():
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, out / rel)
        written.append(rel)
    (out / "install.sh").chmod(0o755)
    return written


def sampler_from_index(out: Path, target: Target, tag: str, torch: str, cuda: str,
                       source_pins: dict[str, str]) -> list[str]:
    """The sampler's wheels from PyG's wheel index (the local stacks' source, and check): notes on what was not there."""
    url = stacks.pyg_wheels_url(torch, cuda)
    if why := stacks.reachable(url):
        return [f"{url}: cannot be reached ({why}); set {PYG_WHEELS_ENV} to a mirror of it"]
    folder = out / "sampler" / tag
    notes = []
    for name in SAMPLER_WHEELS:
        requirement = source_pins.get(name, name)
        try:
            pip(["download", "--no-index", "--find-links", url, "--no-deps", *target.pip_options(local=True),
                 "-d", str(folder), requirement], f"{requirement} from {url}")
        except BundleError as exc:
            notes.append(f"{requirement}: no wheel for {tag} and {target.describe()} in {url} "
                         f"({str(exc).splitlines()[-1][:160]})")
    return notes


def sampler_from_cache(out: Path, target: Target, tag: str, source_pins: dict[str, str]) -> tuple[list[str], str]:
    """torch-scatter and torch-sparse from pip's cache of the local pyg stack's builds, where they fit
    the target: (files, note)."""
    if not target.is_here():
        return [], f"the wheels built here are for CPython {sys.version_info.major}.{sys.version_info.minor} on " \
                   f"{platform.machine()}, not the target"
    stack = stacks.available()["pyg"]
    if not (torch_there := (stacks.recorded_versions(stack).get("torch", "") if stack.installed else "")):
        return [], "the local pyg stack (where they are built) is not installed"
    if f"torch-{torch_there}" != tag and not (tag.endswith("+cpu") and f"torch-{torch_there}+cpu" == tag):
        return [], f"the local pyg stack's torch is {torch_there}, not the target's {tag.removeprefix('torch-')}"
    names = [source_pins[n] for n in ("torch-scatter", "torch-sparse")]
    for requirement in names:
        wheel_name = requirement.split("==")[0].replace("-", "_")
        listed = pip(["cache", "list", wheel_name, "--format=abspath"], "pip's cache", python=str(stack.python))
        if not listed.strip():
            return [], f"pip's cache holds no built {wheel_name} wheel (the pyg stack was built elsewhere or the cache " \
                       "was cleared)"
    folder = out / "sampler" / tag
    before = wheels_in(folder)
    pip(["wheel", "--no-deps", "--no-build-isolation", "-w", str(folder), *names],
        "torch-scatter and torch-sparse from pip's cache", python=str(stack.python))
    return sorted(p.name for p in wheels_in(folder) - before), ""


def sampler_sources(out: Path, source_pins: dict[str, str]) -> list[str]:
    """torch-scatter's and torch-sparse's source packages. pip reads a source package's metadata by
    running its setup.py, which imports torch: so the download runs in the local pyg stack."""
    stack = stacks.install("pyg", log=lambda line: say(f"  {line}"))
    folder = out / "sampler" / "src"
    names = [source_pins[n] for n in ("torch-scatter", "torch-sparse")]
    pip(["download", "--no-deps", "--no-binary=:all:", "--no-build-isolation", "-d", str(folder), *names],
        "the sampler's source packages", python=str(stack.python))
    return sorted(p.name for p in folder.iterdir())


def dataset_specs(suites: list[str]) -> dict[str, dict]:
    """name -> spec of every dataset the suites' cells use."""
    found: dict[str, dict] = {}
    for name in suites:
        for cell in suite_mod.expand(suite_mod.load(name)[0]):
            found.setdefault(json.dumps({"source": cell.dataset_spec["source"], "params": cell.dataset_spec["params"]},
                                        sort_keys=True), cell.dataset_spec)
    return {spec["name"]: spec for spec in found.values()}


def prepare_datasets(out: Path, suites: list[str], data_root: Path | None) -> tuple[list[str], list[str]]:
    """(prepared here, generated on the node) by dataset name."""
    prepared, on_node = [], []
    hub_dir = out / "hub"
    for name, spec in dataset_specs(suites).items():
        stack = stack_of(spec)
        if stack is None:
            on_node.append(name)
            say(f"  dataset {name} ({spec['source']}): generated on the node on first use (numpy only; the same "
                "seed gives the same graph)")
            continue
        started = time.perf_counter()
        # its stack is installed if missing (StackHost install=True)
        done = ready(spec, hub_dir, data_root, host=StackHost(hub_dir, install=True, say=say))
        prepared.append(name)
        say(f"  dataset {name}: {'prepared' if done.built else 'already in the bundle'} in the {stack} stack "
            f"({time.perf_counter() - started:.1f} s): {done.folder.relative_to(out)}")
    return prepared, on_node


def run(args) -> int:
    target = Target(args.python, args.platform)
    if not CUDA_TAG.fullmatch(cuda := args.cuda or ""):
        raise InputError(f"--cuda {cuda}: give the node torch's build as cpu or cuNNN (e.g. cu126, cu130)")
    plain_pins, source_pins = pins()
    torch = args.torch or plain_pins["torch"].split("==")[1]
    if not re.fullmatch(r"\d+\.\d+(\.\d+)?", torch):
        raise InputError(f"--torch {torch}: give the node's torch version as X.Y.Z (e.g. 2.11.0), without a +tag")
    out: Path = args.dir
    previous = check_folder(out)
    suites = args.suite or ["gpu", "multi-gpu"]
    dataset_specs(suites)  # a bad suite is bad input, before anything is written
    stacks.check_wheels(torch, cuda, target.python, target.machine)  # a wheel folder's slip too, as stacks install's
    tag = f"torch-{torch}+{cuda}"
    manifest = {
        "format": FORMAT,
        "complete": False,  # until the last step: install.sh refuses a bundle whose writing was cut short
        # what gnnbench bundle wrote here, the only files an update removes (written before them)
        "files": sorted(set(previous) | {rel for rel, _ in source_files()}),
        "target": {"python": target.python, "platform": target.machine, "abi": target.abi,
                   "glibc": f"{GLIBC[0]}.{GLIBC[1]}", "describe": target.describe()},
        "torch": {"version": torch, "cuda": cuda, "sampler_tag": tag, "carried": args.with_torch},
    }
    write_manifest = lambda: (out / "bundle.json").write_text(json.dumps(manifest, indent=2) + "\n")  # noqa: E731
    try:
        check_torch_version(target, torch)  # before any download
        started = time.monotonic()
        say(f"a bundle for {target.describe()}, torch {torch}+{cuda} (the sampler wheels are for it) "
            f"in {out}")
        out.mkdir(parents=True, exist_ok=True)
        write_manifest()
        say("[1/6] gnnbench's source tree and install.sh")
        manifest["files"] = copy_source(out, previous)
        write_manifest()
        say(f"[2/6] dependencies as wheels for {target.describe()} (pip download, this machine's indexes)")
        wanted = host_dependencies() + [plain_pins["torch-geometric"], "scipy", "setuptools>=68", "wheel"]
        pip(["download", *target.pip_options(), "-d", str(out / "wheels"), *wanted],
            f"the wheels of gnnbench's dependencies for {target.describe()}")
        say(f"  wheels/: {len(wheels_in(out / 'wheels'))} wheels, {megabytes(out / 'wheels'):.0f} MB")
        if args.with_torch:
            say(f"[3/6] torch {torch} with its dependencies (--with-torch), installed on the node only where no torch imports")
            pip(["download", *target.pip_options(), "-d", str(out / "torch"), f"torch=={torch}"],
                f"torch {torch} for {target.describe()}")
            say(f"  torch/: {', '.join(p.name for p in (out / 'torch').glob('torch-*.whl'))}, "
                f"{megabytes(out / 'torch'):.0f} MB in all")
        else:
            say("[3/6] torch: not carried (the node's own is used; --with-torch carries one for a node without)")
        say(f"[4/6] the sampler for {tag}: wheels from {PYG_WHEELS_ENV} (PyG's wheel index), else pip's cache, "
            "and the sources")
        notes = sampler_from_index(out, target, tag, torch, cuda, source_pins)
        for note in notes:
            say(f"  {note}")
        if not any(w.name.startswith(("pyg_lib", "torch_sparse")) for w in wheels_in(out / "sampler" / tag)):
            cached, why = sampler_from_cache(out, target, tag, source_pins)
            say(f"  from pip's cache (the local pyg stack's builds): {', '.join(cached)}" if cached
                else f"  no wheels from pip's cache: {why}")
        wheels = sorted(p.name for p in wheels_in(out / "sampler" / tag))
        sources = sampler_sources(out, source_pins)
        say(f"  sampler/{tag}/: {', '.join(wheels) or 'no wheel'}; sampler/src/: {', '.join(sources)} "
            "(built on the node where no wheel fits its torch)")
        say(f"[5/6] datasets of suite(s) {', '.join(suites)}")
        prepared, on_node = prepare_datasets(out, suites, args.data_root)
        say("[6/6] bundle.json")
        manifest.update({
            "complete": True,
            "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "gnnbench_revision": revision(),
            "sampler": {"wheels": {tag: wheels} if wheels else {}, "sources": sources, "notes": notes},
            "datasets": {"suites": suites, "prepared": prepared, "generated_on_node": on_node},
        })
        write_manifest()
    except BundleError as exc:
        print(f"gnnbench: bundle: {exc}", file=sys.stderr)
        return 1
    say(f"done in {time.monotonic() - started:.0f} s: {out} ({megabytes(out):.0f} MB) is for "
        f"{target.describe()}; on the node: {out.name}/install.sh [--suite gpu] (see {out.name}/install.sh --help)")
    return 0

"""Locks where processes share state (bench/locks.py): two installs of one stack, two conversions of one
dataset, build it once (the second waits, naming the first, and reuses its result); a stale lock is
taken over, said; a live build in another PID namespace (another node sharing the cache, as far as
pids go) is neither swept nor taken over, and a dead one there is taken over once its heartbeat stops.

The holders are real processes held at a known point (SIGSTOP, or a file they wait for), so that the
race is the same on a busy machine as on an idle one."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from bench import locks
from bench.datasets import hub
from tests.conftest import REPO
from tests.test_stacks import INSTALL_ENTRY

STALE_S = "2"  # GNNBENCH_LOCK_STALE_S for these tests: the heartbeat every 0.5 s


class Output:
    """A child's stdout (stderr merged), read as it comes."""

    def __init__(self, proc: subprocess.Popen):
        self.proc, self.lines = proc, []
        self._reader = threading.Thread(target=lambda: self.lines.extend(proc.stdout), daemon=True)
        self._reader.start()

    @property
    def text(self) -> str:
        return "".join(self.lines)

    def wait_for(self, pattern: str, timeout: float = 120) -> re.Match:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = re.search(pattern, self.text)
            if found:
                return found
            assert self.proc.poll() is None or self._reader.is_alive(), f"exited without {pattern!r}:\n{self.text}"
            time.sleep(0.02)
        raise AssertionError(f"no {pattern!r} in {timeout} s:\n{self.text}")

    def finish(self, timeout: float = 300) -> str:
        assert self.proc.wait(timeout=timeout) == 0, self.text
        self._reader.join(timeout=10)
        return self.text


def start(cmd: list[str], env: dict, cwd=REPO) -> Output:
    return Output(subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))


def wait_until(condition, timeout: float = 120, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"not seen in {timeout} s: {what}"
        time.sleep(0.01)


def base_env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "GNNBENCH_LOCK"))}
    return {**env, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1", **extra}


# --- two installs of one stack -------------------------------------------------------------------

def test_two_installs_of_one_stack_build_it_once_the_second_waits_and_reuses(tmp_path):
    """With only what the images copy before they install (no filelock for the second: its fcntl
    fallback and the first's filelock exclude each other); a stub pin file (`pip`, already in every
    new venv) keeps the install to a few seconds, with pip kept off the network."""
    src = tmp_path / "src"
    for name in INSTALL_ENTRY:
        (src / "bench" / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / "bench" / name, src / "bench" / name)
    (src / "docker").mkdir()
    (src / "docker" / "requirements-x.txt").write_text("pip\n")
    no_filelock = tmp_path / "no-filelock" / "filelock"
    no_filelock.mkdir(parents=True)
    (no_filelock / "__init__.py").write_text("raise ImportError('not in this interpreter')\n")
    env = {**base_env(GNNBENCH_STACKS_DIR=str(tmp_path / "stacks"), PIP_NO_INDEX="1"), "PYTHONPATH": ""}
    install = [sys.executable, "-m", "bench.stacks", "install", "x"]
    owners = tmp_path / "stacks" / ".locks"

    first = start(install, env, cwd=src)
    wait_until(lambda: list(owners.glob("x-*.owner")), what="the first install's lock")
    os.kill(first.proc.pid, signal.SIGSTOP)  # held mid-install, however fast the machine
    try:
        second = start(install, {**env, "PYTHONPATH": str(no_filelock.parent)}, cwd=src)
        waiting = second.wait_for(r"stack x: waiting for (\S+) pid (\d+), which is installing stack x since")
        assert int(waiting[2]) == first.proc.pid
        time.sleep(0.5)
        assert second.proc.poll() is None and "creating" not in second.text  # still waiting, building nothing
    finally:
        os.kill(first.proc.pid, signal.SIGCONT)
    first_out, second_out = first.finish(), second.finish()
    assert "stack x: creating" in first_out and "stack x: ready" in first_out
    assert "stack x: creating" not in second_out and "stack x: up to date" in second_out
    [folder] = (tmp_path / "stacks").glob("x-*")
    assert (folder / ".gnnbench-complete.json").is_file()
    assert not owners.exists()  # released: the lock's files go


def test_the_sweep_of_older_pins_leaves_a_stack_another_process_is_installing(tmp_path, monkeypatch):
    monkeypatch.setenv("GNNBENCH_STACKS_DIR", str(tmp_path / "stacks"))
    from bench import stacks

    pins = tmp_path / "requirements-x.txt"
    pins.write_text("numpy==1.26.4\n")
    older = stacks.Stack("x", pins).path
    older.mkdir(parents=True)
    pins.write_text("numpy==2.4.6\n")
    current, gone = stacks.Stack("x", pins), stacks.Stack("x", pins).path.with_name("x-" + "0" * 12)
    gone.mkdir()
    holder = start([sys.executable, "-c", "import sys, time\nfrom pathlib import Path\nfrom bench import locks\n"
                    "with locks.held(Path(sys.argv[1]), 'installing stack x'):\n    print('held', flush=True)\n"
                    "    time.sleep(600)", str(older)], base_env())
    try:
        holder.wait_for("held")
        said = []
        stacks.sweep_older(current, log=said.append)
        assert older.is_dir() and not gone.exists(), said
        assert any(f"left {older} (older pins)" in s and f"pid {holder.proc.pid}, which is installing stack x" in s
                   for s in said), said
        assert f"stack x: removed {gone} (older pins)" in said
    finally:
        holder.proc.kill()
        holder.proc.wait()


# --- two conversions of one dataset -------------------------------------------------------------

def test_two_conversions_of_one_dataset_build_it_once_the_second_waits_and_reuses(tmp_path):
    cache = tmp_path / "cache"
    prepare = [sys.executable, "-m", "bench.cli", "datasets", "prepare", "synthetic:scale=15", "--cache-dir", str(cache)]
    owners = cache / "datasets" / ".locks"
    first = start(prepare, base_env())
    wait_until(lambda: list(owners.glob("*.owner")), what="the first conversion's lock")
    os.kill(first.proc.pid, signal.SIGSTOP)
    try:
        second = start(prepare, base_env())
        waiting = second.wait_for(r"waiting for (\S+) pid (\d+), which is converting dataset synthetic:scale=15 since")
        assert int(waiting[2]) == first.proc.pid
    finally:
        os.kill(first.proc.pid, signal.SIGCONT)
    first.finish()
    second_out = second.finish()
    assert f"converted meanwhile by {waiting[1]} pid {first.proc.pid}; reusing it" in second_out
    [folder] = [p for p in (cache / "datasets").iterdir() if not p.name.startswith(".")]
    hub.verify(folder)
    assert [p.name for p in (cache / "datasets").iterdir() if p.name.startswith(".")] == []  # locks too: released


# --- stale locks, and other PID namespaces -------------------------------------------------------

# Builds a hub folder (hub.atomic_dir: its lock, its temporary folder), then waits for a file before finishing.
HOLD = """
import sys, time
from pathlib import Path
from bench.datasets import hub
target, go = Path(sys.argv[1]), Path(sys.argv[2])
with hub.atomic_dir(target) as tmp:
    (tmp / "part.npy").write_bytes(b"x")
    print("building", tmp, flush=True)
    while not go.exists():
        time.sleep(0.05)
    (tmp / "meta.json").write_text("{}")
print("built", flush=True)
"""
# What the next command does: sweep the cache, then build the same folder (or find it built).
NEXT = """
import sys
from pathlib import Path
from bench.datasets import hub
target = Path(sys.argv[1])
print("swept", [str(p) for p in hub.sweep_stale(target.parent.parent, say=print)], flush=True)
with hub.atomic_dir(target, say=print) as tmp:
    if tmp is not None:
        (tmp / "meta.json").write_text("{}")
print("built again" if tmp is not None else "reused", flush=True)
"""


def test_a_dead_builders_lock_is_taken_over_and_its_folder_swept(tmp_path):
    target = tmp_path / "cache" / "datasets" / "x"
    holder = start([sys.executable, "-c", HOLD, str(target), str(tmp_path / "go")], base_env())
    left = Path(holder.wait_for(r"building (\S+)")[1])
    holder.proc.kill()  # SIGKILL: no cleanup; the kernel drops its flock, its owner record stays
    holder.proc.wait()
    assert left.is_dir() and locks.read_owner(target)["pid"] == holder.proc.pid
    out = start([sys.executable, "-c", NEXT, str(target)], base_env()).finish(timeout=120)
    assert f"taking over the lock on {target} from " in out and f"process {holder.proc.pid} is gone" in out
    assert f"removed {left}: the temporary folder of a build that did not finish" in out
    assert "built again" in out and not left.exists() and (target / "meta.json").is_file()
    assert sorted(p.name for p in target.parent.iterdir()) == ["x"]  # no temporary folder, no lock left


def in_own_pid_namespace(*cmd: str, first_pid: int = 2) -> list[str]:
    """The command in a PID namespace of its own (pids there mean nothing elsewhere, as on another
    node), as pid `first_pid` there (`sh` is pid 1; each /bin/true run before it takes one pid)."""
    return ["unshare", "--pid", "--fork", "--mount-proc", "sh", "-c",
            "/bin/true; " * (first_pid - 2) + '"$@"; exit $?', "sh", *cmd]


@pytest.fixture
def namespaces():
    probe = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "true"], capture_output=True, timeout=30) \
        if shutil.which("unshare") else None
    if probe is None or probe.returncode != 0:
        pytest.skip("no PID namespaces here (unshare --pid needs root or user namespaces): "
                    + (probe.stderr.decode().strip() if probe else "no unshare"))


def test_a_live_build_in_another_pid_namespace_is_neither_swept_nor_taken_over(tmp_path, namespaces):
    target, go = tmp_path / "cache" / "datasets" / "x", tmp_path / "go"
    env = base_env(GNNBENCH_LOCK_STALE_S=STALE_S)
    holder = start(in_own_pid_namespace(sys.executable, "-c", HOLD, str(target), str(go)), env)
    building = Path(holder.wait_for(r"building (\S+)")[1])
    assert ".pid2." in building.name  # its pid in its namespace; none such in the other one
    # pid 3 there, so pid 2 is no process in its namespace: a sweep that judged by pids would remove the build
    nxt = start(in_own_pid_namespace(sys.executable, "-c", NEXT, str(target), first_pid=3), env)
    nxt.wait_for(r"swept \[\]")
    nxt.wait_for(r"waiting for \S+ pid 2, which is building .*x since")
    time.sleep(2.5 * float(STALE_S))  # longer than a dead holder's heartbeat would take to go stale
    assert building.is_dir() and "taking over" not in nxt.text and nxt.proc.poll() is None
    go.touch()
    assert "built" in holder.finish()
    out = nxt.finish()
    assert "reused" in out and "taking over" not in out and (target / "meta.json").is_file()


def test_a_dead_build_in_another_pid_namespace_is_taken_over_once_its_heartbeat_stops(tmp_path, namespaces):
    target = tmp_path / "cache" / "datasets" / "x"
    env = base_env(GNNBENCH_LOCK_STALE_S=STALE_S)
    holder = start(in_own_pid_namespace(sys.executable, "-c", HOLD, str(target), str(tmp_path / "go")), env)
    left = Path(holder.wait_for(r"building (\S+)")[1])
    init = psutil.Process(holder.proc.pid).children()[0]  # the namespace's pid 1: all in it die with it
    init.kill()
    holder.proc.wait(timeout=30)
    assert left.is_dir() and locks.read_owner(target) is not None
    out = start(in_own_pid_namespace(sys.executable, "-c", NEXT, str(target), first_pid=3), env).finish(timeout=120)
    assert "swept []" in out  # a sweep cannot wait to see the heartbeat stop: it leaves the folder
    assert re.search(rf"taking over the lock on {re.escape(str(target))} from \S+ pid 2, which is building .*: "
                     r"its heartbeat has not changed for \d+ s", out), out
    assert "built again" in out and not left.exists() and (target / "meta.json").is_file()


# A filesystem whose flock does not reach across hosts (NFSv3 with -o nolock, local_lock=all): every
# flock succeeds. The owner record, created exclusively, must still let only one builder in.
NO_FLOCK = """
class Timeout(Exception):
    pass


class FileLock:
    def __init__(self, path):
        self.is_locked = False

    def acquire(self, timeout=None):
        self.is_locked = True

    def release(self):
        self.is_locked = False
"""


def test_where_flock_excludes_nobody_the_owner_record_still_does(tmp_path):
    stub = tmp_path / "stub"
    stub.mkdir()
    (stub / "filelock.py").write_text(NO_FLOCK)
    target, go = tmp_path / "cache" / "datasets" / "x", tmp_path / "go"
    env = base_env(GNNBENCH_LOCK_STALE_S=STALE_S, PYTHONPATH=os.pathsep.join([str(stub), str(REPO)]))
    holder = start([sys.executable, "-c", HOLD, str(target), str(go)], env)
    building = Path(holder.wait_for(r"building (\S+)")[1])
    nxt = start([sys.executable, "-c", NEXT, str(target)], env)
    nxt.wait_for(rf"waiting for \S+ pid {holder.proc.pid}, which is building ")
    time.sleep(2.5 * float(STALE_S))
    assert building.is_dir() and nxt.proc.poll() is None and "taking over" not in nxt.text
    go.touch()
    holder.finish()
    assert "reused" in nxt.finish()


def test_an_owner_record_left_empty_is_taken_over(tmp_path):
    """A holder killed between creating its owner record and writing it leaves an empty one: taken
    over once it has stayed unreadable a moment (longer than any write takes), said."""
    target = tmp_path / "x"
    locks.owner_file(target).parent.mkdir()
    locks.owner_file(target).touch()
    said = []
    with locks.held(target, "building x", say=said.append) as lock:
        assert locks.read_owner(target)["token"] == lock.record["token"]
    assert any(f"from an unreadable owner record written " in line and f"(empty): {locks.owner_file(target)}; it "
               "stayed unchanged for 2 s" in line for line in said), said
    assert not locks.lock_file(target).parent.exists()


# Owner records that are not what this gnnbench writes (issue 52): another version's or tool's, a
# half-written file. Each is waited on, said with when it was written, and taken over once it has
# stayed unchanged (never at once, never with a traceback), leaving nothing beside the lock.
def _record(**changes) -> str:
    record = {**locks.new_record("building x"), "pid": 1, **changes}  # pid 1: alive, so only staying unchanged tells
    return __import__("json").dumps({k: v for k, v in record.items() if v is not None})


@pytest.mark.parametrize("text, why", [
    ('["host", 1234]', "a JSON list, not an owner record"),
    (_record(pid="12ab"), "its pid is not a whole number"),
    (_record(pid=10**30), "its pid 1000000000000000000000000000000 is no pid"),
    (_record(started="yesterday"), "its started is not a time"),
    (_record(started=1e300), "its start time or heartbeat is not a time"),
    (_record(pid_start="²"), "its pid_start is not a clock-tick count"),
    (_record(token=None), "its token is missing"),
    ('{"pid": 4321, "host": "other-tool"}', "its boot_id is missing"),
    ('{"host": "n1", "pid": 43', "cut off, or not JSON"),
], ids=["json-list", "pid-text", "pid-huge", "start-text", "start-far", "start-ticks", "no-token", "other-tool",
        "half-written"])
def test_an_unreadable_owner_record_is_said_and_taken_over_once_it_stays_unchanged(tmp_path, monkeypatch, text, why):
    monkeypatch.setenv(locks.STALE_ENV, "1")
    target = tmp_path / "x"
    owner = locks.owner_file(target)
    owner.parent.mkdir()
    owner.write_text(text)
    said = []
    started = time.monotonic()
    with locks.held(target, "building x", say=said.append) as lock:
        assert locks.read_owner(target)["token"] == lock.record["token"]
    waited = time.monotonic() - started
    limit = locks.HALF_WRITTEN_S if why.startswith("cut off") else 1.0
    assert waited >= limit, said  # not at once: it might be a live owner's
    assert said[0].startswith(f"waiting for an unreadable owner record written 20") and f"({why}): {owner}" in said[0], said
    assert f"taken over once it stays unchanged for {limit:.0f} s" in said[0], said
    assert said[-1].startswith(f"taking over the lock on {target} from an unreadable owner record"), said
    assert "it stayed unchanged for" in said[-1], said
    assert not owner.parent.exists()  # nothing left beside the lock, the record set aside included


def test_an_unreadable_owner_record_that_keeps_changing_is_waited_for(tmp_path, monkeypatch):
    """Another tool's live owner rewrites its record: never taken over while it does."""
    monkeypatch.setenv(locks.STALE_ENV, "1")
    target = tmp_path / "x"
    owner = locks.owner_file(target)
    owner.parent.mkdir()
    stop = threading.Event()

    def other_tool():
        beat = 0
        while not stop.wait(0.2):
            beat += 1
            owner.write_text(f'{{"pid": "other", "beat": {beat}}}')
        owner.unlink()

    owner.write_text('{"pid": "other", "beat": 0}')
    writer = threading.Thread(target=other_tool)
    writer.start()
    said = []
    threading.Timer(3.0, stop.set).start()  # three stale periods of rewriting, then released
    with locks.held(target, "building x", say=said.append):
        pass
    writer.join()
    assert not any("taking over" in line for line in said), said
    assert said and said[0].startswith("waiting for an unreadable owner record written "), said


def test_a_cell_scratch_folder_whose_owner_record_is_unreadable_is_judged_by_its_name(tmp_path, monkeypatch):
    """bench/run/cell_scratch.py reads the same records: a non-numeric pid was a traceback."""
    import json
    import tempfile

    from bench.run import cell_scratch

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    cell = cell_scratch.root() / f"{cell_scratch.PREFIX}{int(gone.stdout)}.x"
    cell.mkdir(parents=True)
    (cell / cell_scratch.OWNER).write_text(json.dumps({**locks.new_record("running a cell"), "pid": "abc"}))
    said = []
    assert cell_scratch.sweep(say=said.append) == [cell] and not cell.exists()
    assert f"process {int(gone.stdout)} is gone" in said[0], said

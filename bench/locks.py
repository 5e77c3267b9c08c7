"""Locks on what processes share: a stack being installed, a dataset being converted into the hub, a
store being built. Two processes that want the same thing (two terminals, two clones, two nodes of a
cluster sharing a home folder or a cache) build it once: the second waits, saying for whom, and then
reuses what the first built.

A lock on TARGET is two files in TARGET's folder, under `.locks/` (removed, with the folder when it is
empty, on release):
  NAME.lock   flock(2)ed while held (the `filelock` package where it is importable, else
              fcntl.flock: the image's system Python installs the stacks before anything else is
              there). The kernel releases it when its holder dies; a filesystem that honours flock
              across hosts (local disks, NFSv4, CephFS, GPFS, Lustre mounted with -o flock) then
              excludes the other hosts too.
  NAME.owner  the owner record: host, pid, start time, heartbeat, what it is doing. It is created
              with O_EXCL while the flock is held and removed on release, so it excludes other
              hosts where flock does not reach them (NFSv3 without a lock manager, `-o nolock`,
              `local_lock=all`, some FUSE filesystems), and it names the owner while others wait.
A record left by a holder that died is stale, and taken over (said):
  - same machine (host name, boot id and PID namespace all equal): its pid is gone, or is another
    process now (a different start time): stale at once;
  - another machine or PID namespace (a container, `unshare --pid`): its pids mean nothing here, so
    it is stale once its heartbeat (rewritten every HEARTBEAT_S by a thread of the holder) has not
    changed for STALE_S seconds as the waiter's own clock counts them (no clocks compared across
    hosts). GNNBENCH_LOCK_STALE_S sets STALE_S.
A lock is re-entrant within a process, and a child started under it inherits it (INHERITED_ENV), so
the host's lock on a dataset covers the conversion it runs in a stack's interpreter.

Standard library only, and filelock where present: this module runs in the host, in every stack, and
in the images' install step (docker/Dockerfile copies it with bench/paths.py and bench/stacks/).
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

LOCKS_DIR = ".locks"
HEARTBEAT_S = 5.0
# a heartbeat unchanged this long (seen from another machine) marks its owner dead: well above
# HEARTBEAT_S, so that a holder whose thread is held up a while (a busy machine, a slow
# filesystem) is not taken for dead
STALE_S = 120.0
STALE_ENV = "GNNBENCH_LOCK_STALE_S"
INHERITED_ENV = "GNNBENCH_LOCKS_HELD"  # lock files a parent holds for this process (os.pathsep-separated)
_held: dict[str, int] = {}  # lock file -> depth, in this process
_held_guard = threading.Lock()


def stale_after() -> float:
    return float(os.environ.get(STALE_ENV) or STALE_S)


def heartbeat_every() -> float:
    return min(HEARTBEAT_S, stale_after() / 4)


def lock_file(target: Path) -> Path:
    target = Path(target)
    return target.parent / LOCKS_DIR / f"{target.name}.lock"


def owner_file(target: Path) -> Path:
    return lock_file(target).with_suffix(".owner")


# --- who holds it --------------------------------------------------------------------------------

def _read(path: str) -> str:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return ""


def machine() -> dict:
    """What makes a pid mean the same process: the host, its boot, and the PID namespace."""
    try:
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        namespace = ""
    return {"host": socket.gethostname(), "boot_id": _read("/proc/sys/kernel/random/boot_id"), "pid_ns": namespace}


def process_start(pid: int) -> str:
    """The process's start time in clock ticks since boot (/proc/PID/stat), '' where unknown: a pid
    reused by another process has another start time."""
    stat = _read(f"/proc/{pid}/stat")
    return stat.rsplit(")", 1)[-1].split()[19] if ")" in stat else ""


def pid_alive(pid: int, start: str = "") -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's live process
    return not start or process_start(pid) in ("", start)


def new_record(what: str) -> dict:
    now = time.time()
    return {**machine(), "pid": os.getpid(), "pid_start": process_start(os.getpid()), "what": what,
            "started": now, "heartbeat": now, "beat": 0, "token": uuid.uuid4().hex}


def same_machine(record: dict) -> bool:
    here = machine()
    return all(record.get(k) == here[k] for k in here)


def provably_dead(record: dict) -> str | None:
    """Why the owner of a record is gone, where this machine can tell at once (same host, boot and
    PID namespace, and the pid is gone or another process now), else None."""
    if same_machine(record) and not pid_alive(int(record.get("pid", 0)), record.get("pid_start", "")):
        return f"process {record.get('pid')} is gone"
    return None


def describe(record: dict) -> str:
    since = time.strftime("%H:%M:%S", time.localtime(record.get("started", 0)))
    return f"{record.get('host', '?')} pid {record.get('pid', '?')}, which is {record.get('what', '?')} since {since}"


def read_owner(target: Path) -> dict | None:
    try:
        record = json.loads(owner_file(target).read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def live_owner(target: Path, quiet_for: float | None = None) -> dict | None:
    """The record of a holder that may still be at work on `target` (None: nobody holds it, or its
    owner is provably dead; `quiet_for` seconds: also where its heartbeat is that much older than
    this machine's clock, a bound far above any clock skew). For sweeps that cannot wait."""
    record = read_owner(target)
    if record is None or provably_dead(record):
        return None
    if quiet_for is not None and time.time() - float(record.get("heartbeat", 0)) > quiet_for:
        return None
    return record


# --- the flock layer -----------------------------------------------------------------------------

class _Flock:
    """A non-blocking exclusive flock on one file: filelock's where importable, else fcntl's. Where
    the filesystem has no flock (ENOLCK, ENOSYS, EOPNOTSUPP) it always succeeds: the owner record
    alone then excludes."""

    def __init__(self, path: Path):
        self.path, self._lock, self._fd = path, None, None
        try:
            import filelock
        except ImportError:
            filelock = None
        if filelock is not None:
            self._lock, self._timeout = filelock.FileLock(str(path)), filelock.Timeout

    def try_acquire(self) -> bool:
        if self._lock is not None:
            try:
                self._lock.acquire(timeout=0)
            except self._timeout:
                return False
            except NotImplementedError:  # filelock: "FileSystem does not appear to support flock"
                self._lock = None
                return True
            return True
        import errno
        import fcntl

        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.ENOLCK, errno.ENOSYS, errno.EOPNOTSUPP):
                return True
            raise
        self._fd = fd
        return True

    def release(self) -> None:
        if self._lock is not None and self._lock.is_locked:
            self._lock.release()
        if self._fd is not None:
            os.close(self._fd)  # closing releases the flock
            self._fd = None


# --- taking and holding ---------------------------------------------------------------------------

class Lock:
    """The lock on one target; `held` is the way to take it."""

    def __init__(self, target: Path, what: str, say=print):
        self.target, self.what, self.say = Path(target), what, say
        self.path, self.owner = lock_file(target), owner_file(target)
        self.record: dict | None = None
        self.waited_for: dict | None = None  # the owner this process waited for, if it did
        self._flock = _Flock(self.path)
        self._stop = threading.Event()
        self._beater: threading.Thread | None = None
        self._seen: dict[str, tuple[object, float]] = {}  # token -> (heartbeat seen, when first seen)

    def attempt(self) -> bool:
        """Take the lock if it is free or provably stale, without waiting."""
        for _ in range(5):  # its folder can go between mkdir and open (a holder removes it on release)
            self.path.parent.mkdir(parents=True, exist_ok=True)
            try:
                if self._flock.try_acquire():
                    if self._claim():
                        return True
                    self._flock.release()
                return False
            except FileNotFoundError:
                self._flock.release()
        return False

    def acquire(self, poll: float | None = None) -> None:
        poll = poll if poll is not None else min(1.0, stale_after() / 10)
        announced, started = None, time.monotonic()
        while not self.attempt():
            record = read_owner(self.target)
            key = record.get("token") if record else None
            if key != announced and (record or time.monotonic() - started > 2):  # a record is written just after the flock
                announced, self.waited_for = key, record or self.waited_for
                self.say(f"waiting for {describe(record)} ({self.path})" if record
                         else f"waiting for the process that holds {self.path}")
            time.sleep(poll)

    def _claim(self) -> bool:
        """With the flock held: create the owner record, or take a stale one over. False where a
        live owner holds it (another host, where flock does not reach across hosts)."""
        mine = new_record(self.what)
        if self._create(mine):
            self.record = mine
            return True
        record = read_owner(self.target)
        if record is None and self.owner.exists():
            # being written (an instant), or left empty by a holder killed between creating and writing it
            if self._quiet({"token": "unreadable", "beat": None}, limit=2.0) is None or not self._set_aside({}):
                return False
            self.say(f"taking over the lock on {self.target}: its owner record {self.owner} stayed unreadable")
            return self._create_once(mine)
        if record is None:
            return self._create_once(mine)
        # on this machine a live pid is a live owner, however quiet; elsewhere only the heartbeat tells
        why = provably_dead(record) or (None if same_machine(record) else self._quiet(record))
        if why is None or not self._set_aside(record):
            return False
        self.say(f"taking over the lock on {self.target} from {describe(record)}: {why}")
        return self._create_once(mine)

    def _create_once(self, mine: dict) -> bool:
        if self._create(mine):
            self.record = mine
            return True
        return False

    def _quiet(self, record: dict, limit: float | None = None) -> str | None:
        """Its heartbeat unchanged for `limit` (default stale_after()) seconds of this process's clock."""
        token, beat, now = record.get("token", "?"), record.get("beat"), time.monotonic()
        if token not in self._seen:
            self._seen[token] = (beat, now)
        seen_beat, since = self._seen[token]
        if seen_beat != beat:
            self._seen[token] = (beat, now)
            return None
        quiet = now - since
        return f"its heartbeat has not changed for {quiet:.0f} s" if quiet >= (limit or stale_after()) else None

    def _create(self, record: dict) -> bool:
        try:
            fd = os.open(self.owner, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            return False
        with os.fdopen(fd, "w") as f:
            json.dump(record, f)
        return True

    def _set_aside(self, stale: dict) -> bool:
        """Remove a stale record, and only that one: renamed aside first (one of several takers wins),
        then put back where it turns out to be a newer owner's."""
        aside = self.owner.with_name(f"{self.owner.name}.{uuid.uuid4().hex}")
        try:
            os.rename(self.owner, aside)
        except FileNotFoundError:
            return True  # someone removed it: free
        try:
            taken = json.loads(aside.read_text())
        except (OSError, ValueError):
            taken = {}
        if taken.get("token") != stale.get("token"):
            try:
                os.link(aside, self.owner)  # a newer owner's: back, unless newer still is there
            except FileExistsError:
                pass
            os.unlink(aside)
            return False
        os.unlink(aside)
        return True

    def start_heartbeat(self) -> None:
        self._beater = threading.Thread(target=self._beat, name=f"heartbeat {self.path.name}", daemon=True)
        self._beater.start()

    def _beat(self) -> None:
        while not self._stop.wait(heartbeat_every()):
            if read_owner(self.target) is None or read_owner(self.target).get("token") != self.record["token"]:
                self.say(f"lost the lock on {self.target}: another process judged it stale and took it over")
                return
            self.record = {**self.record, "heartbeat": time.time(), "beat": self.record["beat"] + 1}
            fresh = self.owner.with_name(f"{self.owner.name}.{os.getpid()}.beat")
            fresh.write_text(json.dumps(self.record))
            os.replace(fresh, self.owner)  # atomic: readers see the old record or the new one

    def release(self) -> None:
        self._stop.set()
        if self._beater is not None:
            self._beater.join(timeout=heartbeat_every() + 5)
        current = read_owner(self.target)
        if current is not None and self.record is not None and current.get("token") == self.record["token"]:
            try:
                os.unlink(self.owner)
            except FileNotFoundError:
                pass
        # nothing is left once released: the lock file and, when empty, the folder go too. A waiter
        # may then hold the flock of the unlinked file while a newcomer flocks a new one: the owner
        # record, created exclusively, still lets only one of them in.
        for remove in (self.path.unlink, self.path.parent.rmdir):
            try:
                remove()
            except OSError:
                break  # gone already, or another lock is in the folder
        self._flock.release()


def inherited() -> set[str]:
    return set(filter(None, os.environ.get(INHERITED_ENV, "").split(os.pathsep)))


@contextmanager
def held(target: Path, what: str, say=print):
    """Hold the lock on `target` for the block: wait for another holder (saying who), take a
    stale lock over (saying why). Yields the Lock (its `waited_for`: the owner waited for), or None
    where this process holds it already: re-entrant in a process, and a lock a parent holds for
    this process (INHERITED_ENV) is not taken again."""
    key = str(lock_file(target).absolute())
    with _held_guard:
        depth = _held.get(key, 0)
        if depth or key in inherited():
            _held[key] = depth + 1
            again = True
        else:
            again = False
    if again:
        try:
            yield None
        finally:
            with _held_guard:
                _held[key] -= 1
        return
    lock = Lock(target, what, say)
    lock.acquire()
    with _held_guard:
        _held[key] = 1
    lock.start_heartbeat()
    try:
        yield lock
    finally:
        with _held_guard:
            _held.pop(key, None)
        lock.release()


@contextmanager
def held_if_free(target: Path, what: str, say=print):
    """Hold the lock on `target` for the block if it is free (or provably stale): yields True, else
    False at once (someone may be at work on it). For sweeps, which never wait."""
    key = str(lock_file(target).absolute())
    with _held_guard:
        mine = _held.get(key, 0) or key in inherited()
    if mine:
        yield False  # this process (or its parent) is at work on it
        return
    lock = Lock(target, what, say)
    if not lock.attempt():
        yield False
        return
    with _held_guard:
        _held[key] = 1
    try:
        yield True
    finally:
        with _held_guard:
            _held.pop(key, None)
        lock.release()


def env_holding(target: Path, env: dict[str, str] | None = None) -> dict[str, str]:
    """`env` (default this process's) for a child that works under this process's lock on `target`."""
    env = dict(os.environ if env is None else env)
    env[INHERITED_ENV] = os.pathsep.join(filter(None, [env.get(INHERITED_ENV), str(lock_file(target).absolute())]))
    return env

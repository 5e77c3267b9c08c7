"""Locks on what processes share (a stack being installed, a dataset converted, a store built):
processes, clones or cluster nodes sharing a cache build it once; the second waits, saying for
whom, then reuses it. A lock on TARGET is `.locks/NAME.lock` (flock(2)ed while held) and
`.locks/NAME.owner` (the owner record, created with O_EXCL: it excludes other hosts where flock does
not reach) in TARGET's folder; stale ones are taken over as docs/on-a-cluster.md says. Re-entrant
within a process; a child inherits its parent's locks (INHERITED_ENV). Standard library, and
filelock where importable: it runs in the host, every stack and the images' install step.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid
from contextlib import contextmanager, suppress
from pathlib import Path

from bench.paths import write_atomic

LOCKS_DIR = ".locks"
HEARTBEAT_S = 5.0
STALE_S = 120.0  # well above HEARTBEAT_S: a holder held up a while (a busy machine) is not dead
STALE_ENV = "GNNBENCH_LOCK_STALE_S"
HALF_WRITTEN_S = 2.0  # an empty or cut-off record unchanged this long is no write in progress (one takes an instant)
PID_MAX = 1 << 22  # Linux's largest pid (PID_MAX_LIMIT)
LATEST_TIME = 1e11  # seconds since 1970: year 5138, within what time.localtime takes
RECORD_BYTES = 1 << 16
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
    """The process's start time in ticks since boot, '' where unknown: a reused pid has another."""
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
    """Why the owner of a record is gone, where this machine can tell at once, else None."""
    gone = same_machine(record) and not pid_alive(record["pid"], record["pid_start"])
    return f"process {record['pid']} is gone" if gone else None


def describe(record: dict) -> str:
    since = time.strftime("%H:%M:%S", time.localtime(record["started"]))
    return f"{record['host']} pid {record['pid']}, which is {record['what']} since {since}"


# what new_record writes, field by field: a record that is anything else is never trusted for its pid or times
FIELDS = {"host": str, "boot_id": str, "pid_ns": str, "pid": int, "pid_start": str, "what": str,
          "started": (int, float), "heartbeat": (int, float), "beat": int, "token": str}
FIELD_WORDS = {str: "text", int: "a whole number", (int, float): "a time"}


def parse_record(text: str) -> tuple[dict | None, str]:
    """(the record, '') where `text` is an owner record as new_record writes it; else (None, why not)."""
    try:
        record = json.loads(text)
    except (ValueError, RecursionError):
        return None, "empty" if not text.strip() else "cut off, or not JSON"
    if not isinstance(record, dict):
        return None, f"a JSON {type(record).__name__}, not an owner record"
    for key, kind in FIELDS.items():
        value = record.get(key)
        if key not in record or not isinstance(value, kind) or isinstance(value, bool):
            return None, f"its {key} is {'missing' if key not in record else 'not ' + FIELD_WORDS[kind]}"
    if not 0 < record["pid"] <= PID_MAX:
        return None, f"its pid {record['pid']} is no pid"
    if not (record["pid_start"].isascii() and (record["pid_start"] == "" or record["pid_start"].isdigit())):
        return None, "its pid_start is not a clock-tick count"
    if not all(0 <= record[k] <= LATEST_TIME for k in ("started", "heartbeat")):  # NaN fails too
        return None, "its start time or heartbeat is not a time"
    return record, ""


def read_record(path: Path) -> tuple[dict | None, str | None, bytes]:
    """An owner record file as (record, None, bytes), (None, why unreadable, bytes) or (None, None, b'')."""
    try:
        with open(path, "rb") as f:
            data = f.read(RECORD_BYTES + 1)  # a record is a few hundred bytes: a huge file is never read whole
    except FileNotFoundError:
        return None, None, b""
    except OSError as exc:
        return None, f"cannot be read ({exc.strerror or exc})", b""
    if len(data) > RECORD_BYTES:
        return None, f"over {RECORD_BYTES:,} bytes, not an owner record", data
    record, why = parse_record(data.decode("utf-8", "replace"))
    return record, (why or None), data


def describe_unreadable(path: Path, why: str) -> str:
    """An unreadable record, for messages: where, when it was written and what is wrong with it."""
    try:
        written = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(Path(path).stat().st_mtime))
    except (OSError, OverflowError, ValueError):
        written = "at an unknown time"
    return f"an unreadable owner record written {written} ({why}): {path}"


def read_owner(target: Path) -> dict | None:
    """The owner record of `target`'s lock, None where there is none or it is unreadable (read_record says which)."""
    return read_record(owner_file(target))[0]


# --- the flock layer -----------------------------------------------------------------------------

class _Flock:
    """A non-blocking exclusive flock on one file (filelock's, else fcntl's); where the filesystem has
    none it always succeeds: the owner record alone then excludes."""

    def __init__(self, path: Path):
        self.path, self._lock, self._fd = path, None, None
        with suppress(ImportError):
            import filelock

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


def _create_exclusively(path: Path, data: bytes) -> bool:
    """Create `path` holding `data` (O_EXCL); False where it is there already."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    except FileExistsError:
        return False
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return True


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
            record, why, data = read_record(self.owner)
            key = record["token"] if record else data
            # a record is written just after the flock: a moment without one says nothing yet
            if key != announced and (record or why or time.monotonic() - started > HALF_WRITTEN_S):
                announced, self.waited_for = key, record or self.waited_for
                self.say(self._waiting_for(record, why))
            time.sleep(poll)

    def _waiting_for(self, record: dict | None, why: str | None) -> str:
        if record is not None:
            return f"waiting for {describe(record)} ({self.path})"
        if why is None:
            return f"waiting for the process that holds {self.path}"
        limit = self._limit(why)
        return f"waiting for {describe_unreadable(self.owner, why)}" + (
            f"; taken over once it stays unchanged for {limit:.0f} s" if limit else "")

    def _claim(self) -> bool:
        """With the flock held: create the owner record, or take a stale one over; False: a live owner."""
        mine = new_record(self.what)
        if self._create(mine):
            return True
        record, why, data = read_record(self.owner)
        if record is None and why is None:
            return self._create(mine)  # released meanwhile
        if record is None:
            # another version's or tool's record, or one left half-written: only its staying unchanged tells
            if self._limit(why) is None:
                return False  # a file this process cannot read, or a huge one: waited on, said
            quiet = self._quiet({"token": data, "beat": None}, limit=self._limit(why))
            said = f"{describe_unreadable(self.owner, why)}; it stayed unchanged for {quiet:.0f} s" if quiet else None
        else:
            # on this machine a live pid is a live owner, however quiet; elsewhere only the heartbeat tells
            quiet = None if same_machine(record) else self._quiet(record)
            stale = provably_dead(record) or (f"its heartbeat has not changed for {quiet:.0f} s" if quiet else None)
            said = f"{describe(record)}: {stale}" if stale else None
        if said is None or not self._set_aside(data):
            return False
        self.say(f"taking over the lock on {self.target} from {said}")
        return self._create(mine)

    @staticmethod
    def _limit(why: str) -> float | None:
        """How long an unreadable record stays unchanged before it is stale (None: never taken over)."""
        if why.startswith(("cannot be read", "over ")):  # nothing this gnnbench or its writers would leave
            return None
        return HALF_WRITTEN_S if why in ("empty", "cut off, or not JSON") else stale_after()

    def _quiet(self, record: dict, limit: float | None = None) -> float | None:
        """The seconds (this process's clock) the heartbeat stayed unchanged, if at least `limit`."""
        token, beat, now = record["token"], record["beat"], time.monotonic()
        seen_beat, since = self._seen.setdefault(token, (beat, now))
        if seen_beat != beat:
            self._seen[token] = (beat, now)
            return None
        quiet = now - since
        return quiet if quiet >= (limit or stale_after()) else None

    def _create(self, record: dict) -> bool:
        """Create the owner record (exclusively) and take it as this lock's."""
        if not _create_exclusively(self.owner, json.dumps(record).encode()):
            return False
        self.record = record
        return True

    def _set_aside(self, stale: bytes) -> bool:
        """Remove a stale record, and only that one (`stale`: its bytes as judged): renamed aside (one
        of several takers wins), put back where it is a newer owner's; nothing is left beside the lock."""
        aside = self.owner.with_name(f"{self.owner.name}.{uuid.uuid4().hex}")
        try:
            os.rename(self.owner, aside)
        except FileNotFoundError:
            return True  # someone removed it: free
        try:
            taken = aside.read_bytes()
            if taken == stale:
                return True
            _create_exclusively(self.owner, taken)  # a newer owner's: back, unless newer still is there
            return False
        finally:
            aside.unlink(missing_ok=True)

    def start_heartbeat(self) -> None:
        self._beater = threading.Thread(target=self._beat, name=f"heartbeat {self.path.name}", daemon=True)
        self._beater.start()

    def _beat(self) -> None:
        while not self._stop.wait(heartbeat_every()):
            current = read_owner(self.target)
            if current is None or current["token"] != self.record["token"]:
                self.say(f"lost the lock on {self.target}: another process judged it stale and took it over")
                return
            self.record = {**self.record, "heartbeat": time.time(), "beat": self.record["beat"] + 1}
            write_atomic(self.owner, json.dumps(self.record))  # readers see the old record or the new one

    def release(self) -> None:
        self._stop.set()
        if self._beater is not None:
            self._beater.join(timeout=heartbeat_every() + 5)
        current = read_owner(self.target)
        if current is not None and self.record is not None and current["token"] == self.record["token"]:
            self.owner.unlink(missing_ok=True)
        # the lock file and an empty folder go too: a waiter holding the unlinked file's flock and a
        # newcomer flocking a new one are still kept apart by the owner record, created exclusively
        for remove in (self.path.unlink, self.path.parent.rmdir):
            try:
                remove()
            except OSError:
                break  # gone already, or another lock is in the folder
        self._flock.release()


@contextmanager
def _counted(key: str, lock: Lock | None):
    """The lock counted as this process's for the block, then released (None: taken further up)."""
    with _held_guard:
        _held[key] = _held.get(key, 0) + 1
    try:
        yield
    finally:
        with _held_guard:
            _held[key] -= 1
        if lock is not None:
            lock.release()


def _mine(key: str) -> bool:
    with _held_guard:
        return bool(_held.get(key)) or key in os.environ.get(INHERITED_ENV, "").split(os.pathsep)


@contextmanager
def held(target: Path, what: str, say=print):
    """Hold the lock on `target` for the block: wait for another holder (saying who), take a
    stale lock over (saying why). Yields the Lock (its `waited_for`: the owner waited for), or None
    where this process (or its parent, INHERITED_ENV) holds it already."""
    key = str(lock_file(target).absolute())
    lock = None if _mine(key) else Lock(target, what, say)
    if lock is not None:
        lock.acquire()
        lock.start_heartbeat()
    with _counted(key, lock):
        yield lock


@contextmanager
def held_if_free(target: Path, what: str, say=print):
    """Hold the lock on `target` for the block if it is free (or provably stale): yields True, else
    False at once (someone, maybe this process or its parent, is at work on it). For sweeps."""
    key = str(lock_file(target).absolute())
    lock = Lock(target, what, say)
    if _mine(key) or not lock.attempt():
        yield False
        return
    with _counted(key, lock):
        yield True


def env_holding(target: Path, env: dict[str, str] | None = None) -> dict[str, str]:
    """`env` (default this process's) for a child that works under this process's lock on `target`."""
    env = dict(os.environ if env is None else env)
    env[INHERITED_ENV] = os.pathsep.join(filter(None, [env.get(INHERITED_ENV), str(lock_file(target).absolute())]))
    return env

"""A two-node SLURM cluster on this one machine, for the tests: Debian's slurmctld and slurmd
(22.05) with munge, every file of it in one folder, every port chosen free when it starts.

    with LocalSlurm(folder) as cluster:          # munged, slurmctld, slurmd -N n1 and -N n2
        cluster.run(["sbatch", ...])             # SLURM_CONF and munge's socket set for the client
    # the daemons are stopped by their pid files, nothing is left running

Both "nodes" are this machine: one slurm.conf names n1 and n2 with NodeAddr=127.0.0.1 and a
Port each, and `slurmd -N NAME` runs one daemon per node (spool, pid and log files per node
through %n). munged runs on its own socket and key (AuthInfo=socket=...), so a second checkout
running the same test starts a cluster of its own beside this one. FirstJobId is drawn at random
(the job's rendezvous port is derived from its id: bench/run/cluster_env.py) so that two such
clusters do not hand out the same job id and port.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import psutil

from bench.net import free_port
from bench.run.cluster_env import slurm_port

DAEMONS = ("munged", "slurmctld", "slurmd")
NODES = ("n1", "n2")
START_S = 120  # how long the nodes may take to register (a loaded machine is slow)


def missing() -> list[str]:
    """The programs the cluster needs that are not installed (make slurm installs them)."""
    return [p for p in (*DAEMONS, "sbatch", "scontrol", "sinfo") if shutil.which(p) is None
            and not Path("/usr/sbin", p).exists()]


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


class LocalSlurm:
    def __init__(self, folder: Path, cpus_per_node: int | None = None):
        self.dir = Path(folder)
        self.cpus = cpus_per_node or max(1, os.cpu_count() or 1)
        self.conf = self.dir / "slurm.conf"
        self.socket = self.dir / "munge" / "munge.socket"
        self.pids: list[Path] = []

    # --- the files ---------------------------------------------------------------------------

    def first_job_id(self) -> int:
        """A random first job id whose rendezvous port is free now."""
        for _ in range(200):
            job = random.randrange(100_000, 60_000_000)
            if _port_free(slurm_port(str(job))):
                return job
        raise RuntimeError("no free rendezvous port found for a job id")

    def write(self) -> None:
        d = self.dir
        (d / "munge").mkdir(parents=True, exist_ok=True)
        (d / "munge").chmod(0o700)
        key = d / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        (d / "state").mkdir(exist_ok=True)
        ports = {"ctld": free_port(), **{n: free_port() for n in NODES}}
        self.first_job = self.first_job_id()
        lines = [
            f"ClusterName=gnnbench{random.randrange(10**6)}",
            "SlurmctldHost=localhost(127.0.0.1)",
            f"SlurmctldPort={ports['ctld']}",
            "AuthType=auth/munge", "CredType=cred/munge", f"AuthInfo=socket={self.socket}",
            "SlurmUser=root", "SlurmdUser=root",
            f"StateSaveLocation={d / 'state'}",
            f"SlurmdSpoolDir={d}/spool-%n",
            f"SlurmctldPidFile={d}/slurmctld.pid", f"SlurmdPidFile={d}/slurmd-%n.pid",
            f"SlurmctldLogFile={d}/slurmctld.log", f"SlurmdLogFile={d}/slurmd-%n.log",
            "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none",
            "SchedulerType=sched/builtin", "SelectType=select/cons_tres", "SelectTypeParameters=CR_CPU",
            "ReturnToService=2", "MpiDefault=none", "SlurmdParameters=config_overrides",
            "JobCompType=jobcomp/none", "AccountingStorageType=accounting_storage/none",
            "JobAcctGatherType=jobacct_gather/none", f"FirstJobId={self.first_job}",
            "SlurmctldTimeout=300", "SlurmdTimeout=300", "MessageTimeout=60", "KillWait=30",
            "InactiveLimit=0", "MinJobAge=600",
            *(f"NodeName={n} NodeAddr=127.0.0.1 Port={ports[n]} CPUs={self.cpus} State=UNKNOWN" for n in NODES),
            f"PartitionName=local Nodes={','.join(NODES)} Default=YES MaxTime=INFINITE State=UP",
        ]
        self.conf.write_text("\n".join(lines) + "\n")

    # --- the daemons -------------------------------------------------------------------------

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def start(self) -> None:
        self.write()
        d = self.dir
        self._daemon(["munged", "--force", f"--socket={self.socket}", f"--key-file={d / 'munge' / 'munge.key'}",
                      f"--log-file={d / 'munge' / 'munged.log'}", f"--pid-file={d / 'munge' / 'munged.pid'}",
                      f"--seed-file={d / 'munge' / 'munged.seed'}"], d / "munge" / "munged.pid")
        self._daemon(["slurmctld", "-f", str(self.conf), "-i"], d / "slurmctld.pid")
        for node in NODES:
            self._daemon(["slurmd", "-f", str(self.conf), "-N", node], d / f"slurmd-{node}.pid")
        self.wait_for_nodes()

    def _daemon(self, cmd: list[str], pid_file: Path) -> None:
        self.pids.append(pid_file)
        proc = subprocess.run(cmd, env=self.env, capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}: {proc.stderr.strip()[-500:]}"
                               f"\n{self.logs()}")
        deadline = time.monotonic() + 60
        while not pid_file.exists():
            if time.monotonic() > deadline:
                raise RuntimeError(f"{cmd[0]}: no pid file {pid_file} after 60 s\n{self.logs()}")
            time.sleep(0.2)

    def wait_for_nodes(self) -> None:
        deadline = time.monotonic() + START_S
        states = ""
        while time.monotonic() < deadline:
            proc = self.run(["sinfo", "-h", "-N", "-o", "%N %t"], check=False)
            states = proc.stdout.strip()
            seen = dict(line.split() for line in states.splitlines() if len(line.split()) == 2)
            if all(seen.get(n, "").rstrip("*") == "idle" for n in NODES):
                return
            time.sleep(1)
        raise RuntimeError(f"the nodes did not become idle in {START_S} s (sinfo: {states!r})\n{self.logs()}")

    def run(self, cmd: list[str], check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
        proc = subprocess.run(cmd, env=self.env, capture_output=True, text=True, timeout=timeout)
        if check and proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}: {proc.stderr.strip()}")
        return proc

    def logs(self) -> str:
        """The daemons' logs' last lines, to show why something failed."""
        out = []
        for log in sorted(self.dir.glob("*.log")) + sorted(self.dir.glob("munge/*.log")):
            tail = log.read_text(errors="replace").splitlines()[-15:]
            out.append(f"--- {log.name}\n" + "\n".join(tail))
        return "\n".join(out)

    def stop(self) -> None:
        """Jobs still there cancelled; each daemon by its pid file, slurmd first, munged last
        (SIGKILL after 30 s); then any job step process the slurmds left (each carries this
        cluster's SLURM_CONF in its environment, which marks it as this cluster's)."""
        if self.pids:
            self.cancel_jobs()
        self._stop_daemons()
        for proc in self.leftovers():
            try:
                proc.kill()
            except psutil.Error:
                pass

    def cancel_jobs(self) -> None:
        jobs = self.run(["squeue", "-h", "-o", "%i"], check=False).stdout.split()
        if not jobs:
            return
        self.run(["scancel", *jobs], check=False)
        deadline = time.monotonic() + 60
        while self.run(["squeue", "-h", "-o", "%i"], check=False).stdout.split() and time.monotonic() < deadline:
            time.sleep(1)

    def leftovers(self) -> list[psutil.Process]:
        """This cluster's slurmstepd processes and what they started: each has this cluster's
        SLURM_CONF in its environment (slurmd's, or the job's, exported at submission)."""
        found = []
        for proc in psutil.process_iter():
            try:
                if proc.environ().get("SLURM_CONF") != str(self.conf):
                    continue
                if any(p.name().startswith("slurmstepd") for p in (proc, *proc.parents())):
                    found.append(proc)
            except psutil.Error:
                continue
        return found

    def _stop_daemons(self) -> None:
        for pid_file in reversed(self.pids):
            try:
                pid = int(pid_file.read_text().split()[0])
            except (OSError, ValueError, IndexError):
                continue
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    break
                time.sleep(0.2)
            else:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass

    def __enter__(self) -> LocalSlurm:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

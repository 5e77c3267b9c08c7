"""Where `gnnbench run` was started by a cluster scheduler: SLURM's `srun` or a Kubeflow pod.

The node count, this node's rank and the rendezvous endpoint come from the scheduler's variables,
so one command line works on every node (docs/on-a-cluster.md). An option that differs from the
scheduler's value is an error naming both."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import subprocess
from dataclasses import asdict, dataclass, field

# Variables a scheduler or an operator sets for torch.distributed that must not reach the worker:
# torchrun sets its own for each rank (an inherited RANK or WORLD_SIZE would be read as the cell's).
INHERITED_DIST_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
                       "ROLE_RANK", "ROLE_WORLD_SIZE", "ROLE_NAME", "MASTER_ADDR", "MASTER_PORT")
INHERITED_DIST_PREFIXES = ("PET_", "TORCHELASTIC_")  # torchrun reads PET_* as its options' defaults

SLURM_PORT_BASE, SLURM_PORT_SPAN = 20000, 20000  # the rendezvous port of a SLURM job: base + job id % span


class ClusterEnvError(ValueError):
    """The scheduler's variables are unusable, or disagree with the options given."""


@dataclass(frozen=True)
class ClusterEnv:
    scheduler: str  # "slurm" | "kubeflow"
    nnodes: int
    node_rank: int
    rdzv_endpoint: str | None
    job_id: str | None = None
    nodelist: str | None = None  # as the scheduler wrote it (SLURM: n[1-2])
    nodes: list[str] = field(default_factory=list)  # each node's name, in order
    read: dict = field(default_factory=dict)  # the variables the values came from

    def machine_info(self) -> dict:
        info = asdict(self)
        info["environment"] = info.pop("read")
        return info


def worker_environment(env: dict[str, str]) -> dict[str, str]:
    """`env` without the distributed variables a scheduler or pod set (see INHERITED_DIST_VARS)."""
    return {k: v for k, v in env.items()
            if k not in INHERITED_DIST_VARS and not k.startswith(INHERITED_DIST_PREFIXES)}


def _int(env: dict[str, str], name: str) -> int:
    value = env[name]
    try:
        return int(value)
    except ValueError:
        raise ClusterEnvError(f"{name}={value!r}: not a whole number (set by the scheduler; gnnbench needs a fixed "
                              "node count and rank, not an elastic range)") from None


def detect(env: dict[str, str] | None = None) -> ClusterEnv | None:
    """The scheduler that started this process, or None. SLURM counts only inside an `srun` step (the
    batch script itself runs on one node)."""
    env = dict(os.environ if env is None else env)
    found = [c for c in (_slurm(env), _kubeflow(env)) if c is not None]
    if len(found) == 2 and (found[0].nnodes, found[0].node_rank) != (found[1].nnodes, found[1].node_rank):
        s, k = found
        raise ClusterEnvError(f"SLURM says {s.nnodes} node(s), this one rank {s.node_rank} "
                              f"({_names(s.read)}) but the Kubeflow variables say {k.nnodes}, rank {k.node_rank} "
                              f"({_names(k.read)}): unset one of them")
    return found[0] if found else None


def _names(read: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in read.items())


def _slurm(env: dict[str, str]) -> ClusterEnv | None:
    if "SLURM_JOB_ID" not in env or ("SLURM_STEP_ID" not in env and "SLURM_STEPID" not in env):
        return None
    nnodes_var = "SLURM_STEP_NUM_NODES" if "SLURM_STEP_NUM_NODES" in env else "SLURM_NNODES"
    list_var = "SLURM_STEP_NODELIST" if "SLURM_STEP_NODELIST" in env else "SLURM_JOB_NODELIST"
    for name in (nnodes_var, "SLURM_NODEID", list_var):
        if name not in env:
            raise ClusterEnvError(f"started by srun (SLURM_JOB_ID={env['SLURM_JOB_ID']}) but {name} is not set")
    read = {n: env[n] for n in ("SLURM_JOB_ID", nnodes_var, "SLURM_NODEID", list_var) if n in env}
    tasks_var = "SLURM_STEP_NUM_TASKS" if "SLURM_STEP_NUM_TASKS" in env else "SLURM_NTASKS"
    tasks = env.get(tasks_var)
    nnodes = _int(env, nnodes_var)
    if tasks and tasks.isdigit() and int(tasks) != nnodes:
        raise ClusterEnvError(f"srun started {tasks} tasks on {nnodes} node(s) ({tasks_var}={tasks}, "
                              f"{nnodes_var}={nnodes}): gnnbench run needs one task per node "
                              "(srun --ntasks-per-node=1; it starts each node's ranks itself)")
    job_id = env["SLURM_JOB_ID"]
    nodes = hostnames(env[list_var])
    endpoint = f"{rendezvous_host(nodes[0])}:{slurm_port(job_id)}" if nnodes > 1 else None
    return ClusterEnv("slurm", nnodes, _int(env, "SLURM_NODEID"), endpoint, job_id=job_id,
                      nodelist=env[list_var], nodes=nodes, read=read)


def _kubeflow(env: dict[str, str]) -> ClusterEnv | None:
    if "PET_NNODES" not in env:
        return None
    addr_var = next((n for n in ("PET_MASTER_ADDR", "MASTER_ADDR") if n in env), None)
    port_var = next((n for n in ("PET_MASTER_PORT", "MASTER_PORT") if n in env), None)
    rank_var = "PET_NODE_RANK" if "PET_NODE_RANK" in env else None
    nnodes = _int(env, "PET_NNODES")
    if rank_var is None and nnodes > 1:
        raise ClusterEnvError(f"PET_NNODES={nnodes} but PET_NODE_RANK is not set: this pod's rank is unknown")
    if nnodes > 1 and (addr_var is None or port_var is None):
        raise ClusterEnvError(f"PET_NNODES={nnodes} but no rendezvous address: PET_MASTER_ADDR (or MASTER_ADDR) and "
                              "PET_MASTER_PORT (or MASTER_PORT) must be set")
    read = {n: env[n] for n in ("PET_NNODES", rank_var, addr_var, port_var) if n}
    endpoint = f"{env[addr_var]}:{env[port_var]}" if addr_var and port_var else None
    return ClusterEnv("kubeflow", nnodes, _int(env, rank_var) if rank_var else 0, endpoint, read=read)


def slurm_port(job_id: str) -> int:
    """The rendezvous port of a SLURM job, the same on every node: from the job id's digits."""
    return SLURM_PORT_BASE + int(re.sub(r"\D", "", job_id) or "0") % SLURM_PORT_SPAN


def hostnames(nodelist: str) -> list[str]:
    """SLURM's compressed node list (n[1-2],gpu7) expanded by `scontrol show hostnames`."""
    if "[" not in nodelist:  # nothing compressed: the names as they are
        return [n for n in nodelist.split(",") if n]
    if (scontrol := shutil.which("scontrol")) is None:
        raise ClusterEnvError(f"node list {nodelist!r}: scontrol is not on PATH to expand it")
    proc = subprocess.run([scontrol, "show", "hostnames", nodelist], capture_output=True, text=True, timeout=60)
    if proc.returncode != 0 or not proc.stdout.split():
        raise ClusterEnvError(f"scontrol show hostnames {nodelist}: {proc.stderr.strip() or 'no host names'}")
    return proc.stdout.split()


def rendezvous_host(node: str) -> str:
    """The first node's address: its name where it resolves, else its NodeAddr (`scontrol show node`)."""
    with contextlib.suppress(OSError):
        socket.getaddrinfo(node, None)
        return node
    if scontrol := shutil.which("scontrol"):
        proc = subprocess.run([scontrol, "show", "node", node], capture_output=True, text=True, timeout=60)
        if proc.returncode == 0 and (match := re.search(r"\bNodeAddr=(\S+)", proc.stdout)):
            return match.group(1)
    raise ClusterEnvError(f"the first node {node!r} of the job does not resolve, and scontrol gives no NodeAddr for it")


def resolve(nnodes: int | None, node_rank: int | None, rdzv_endpoint: str | None,
            env: dict[str, str] | None = None) -> tuple[int, int, str | None, ClusterEnv | None]:
    """The node count, node rank and endpoint a run takes: the scheduler's where it set them, else the
    options' (or 1, 0, none). Under SLURM an --rdzv-endpoint given replaces the derived one; under
    Kubeflow it must be the operator's."""
    cluster = detect(env)
    if cluster is None:
        return (1 if nnodes is None else nnodes), (0 if node_rank is None else node_rank), rdzv_endpoint, None
    source = _names(cluster.read)
    if nnodes is not None and nnodes != cluster.nnodes:
        raise ClusterEnvError(f"--nnodes {nnodes} but the {cluster.scheduler} job has {cluster.nnodes} node(s) "
                              f"({source}): leave --nnodes out or give {cluster.nnodes}")
    if node_rank is not None and node_rank != cluster.node_rank:
        raise ClusterEnvError(f"--node-rank {node_rank} but {cluster.scheduler} made this node rank "
                              f"{cluster.node_rank} ({source}): leave --node-rank out")
    endpoint = cluster.rdzv_endpoint
    if rdzv_endpoint is not None and rdzv_endpoint != endpoint:
        if cluster.scheduler == "kubeflow":
            raise ClusterEnvError(f"--rdzv-endpoint {rdzv_endpoint} but the operator set {endpoint} ({source}): "
                                  "leave --rdzv-endpoint out")
        endpoint = rdzv_endpoint
    return cluster.nnodes, cluster.node_rank, endpoint, cluster

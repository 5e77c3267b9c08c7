"""`gnnbench k8s SUITE --nodes N --gpus-per-node G --image IMG [--kind trainjob|pytorchjob]`: a
Kubeflow manifest that runs a suite on N pods, one per node, each `gnnbench run SUITE` taking its
rank from the operator's PET_* variables (docs/on-a-cluster.md). Results go to the claim
`--results-claim`: /results/JOB/nodeK.
"""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

import yaml

from bench.commands.slurm import add_shape, check_shape, fit, node_run, run_args
from bench.inputs import InputError, new_output_file, no_control_characters

KINDS = ("trainjob", "pytorchjob")
# Kubernetes' name rules, whole-string (fullmatch): the job an RFC 1035 label (Kubeflow Trainer names its
# JobSet, services and pods after it), the namespace an RFC 1123 label, the claim and runtime subdomains.
LABEL_1123 = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
SUBDOMAIN = (re.compile(rf"{LABEL_1123}(\.{LABEL_1123})*"), 253,
             "lower-case letters, digits, '-' and '.', at most 253, each dot-separated part starting and ending with a "
             "letter or digit")
NAME_RULES = {
    "--name": (re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?"), 63,
               "lower-case letters, digits and '-', at most 63, starting with a letter and ending with a letter or digit"),
    "--namespace": (re.compile(LABEL_1123), 63,
                    "lower-case letters, digits and '-', at most 63, starting and ending with a letter or digit"),
    "--runtime": SUBDOMAIN,
    "--results-claim": SUBDOMAIN,
}
# An image reference: registry[:port]/name[:tag][@digest]
IMAGE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:@+-]{0,499}")
QUANTITY = re.compile(r"(\d+(\.\d+)?|\.\d+)(Ki|Mi|Gi|Ti|Pi|k|M|G|T|P)?")  # a Kubernetes memory quantity
RESULTS_MOUNT = "/results"
SHM_MOUNT = "/dev/shm"
TRAINER_API = "trainer.kubeflow.org/v1alpha1"
TRAINING_OPERATOR_API = "kubeflow.org/v1"
RUNTIME_JOB = "node"  # the torch runtimes' replicated job and container name (Kubeflow Trainer's own runtimes)


def add_parser(sub, parents) -> None:
    p = sub.add_parser("k8s", parents=parents,
                       help="write a Kubeflow TrainJob (or PyTorchJob) manifest that runs a suite on Kubernetes")
    p.add_argument("suite", help="suite name in suites/ or a YAML path (as the image sees it)")
    add_shape(p)
    p.add_argument("--image", required=True, metavar="IMG", help="the gnnbench image the pods run")
    p.add_argument("--kind", choices=KINDS, default="trainjob",
                   help="trainjob: Kubeflow Trainer v2 (default); pytorchjob: the Training Operator v1")
    p.add_argument("--name", metavar="NAME", help="the job's name (default: gnnbench-SUITE)")
    p.add_argument("--namespace", metavar="NS", help="its namespace (default: kubectl's)")
    p.add_argument("--runtime", default="torch-distributed", metavar="NAME",
                   help="TrainJob: the ClusterTrainingRuntime it names (default torch-distributed; it must exist)")
    p.add_argument("--results-claim", default="gnnbench-results", metavar="PVC",
                   help="the PersistentVolumeClaim the results go to (default gnnbench-results; "
                        "ReadWriteMany where pods land on several nodes)")
    p.add_argument("--shm-size", default="16Gi", metavar="SIZE",
                   help="the memory-backed /dev/shm for DataLoader workers (default 16Gi)")
    p.add_argument("--out", type=Path, metavar="FILE", help="also write the manifest here (a new file)")
    p.add_argument("--force", action="store_true", help="replace the --out file if it is already there")


def node_command(suite: str, job: str, extra: list[str]) -> list[str]:
    """Each pod's command: its results folder on the volume, resumed from its journal after a restart."""
    return ["bash", "-c", node_run(f"{RESULTS_MOUNT}/{shlex.quote(job)}/node${{PET_NODE_RANK:-0}}", "gnnbench", suite, extra)]


def volumes(claim: str, shm_size: str) -> tuple[list[dict], list[dict]]:
    vols = [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": shm_size}},
            {"name": "results", "persistentVolumeClaim": {"claimName": claim}}]
    return vols, [{"name": "dshm", "mountPath": SHM_MOUNT}, {"name": "results", "mountPath": RESULTS_MOUNT}]


def trainjob(suite: str, nodes: int, gpus_per_node: int, image: str, *, name: str, namespace: str | None = None,
             runtime: str = "torch-distributed", claim: str = "gnnbench-results", shm_size: str = "16Gi",
             extra: list[str] = ()) -> dict:
    vols, mounts = volumes(claim, shm_size)
    trainer = {"image": image, "command": node_command(suite, name, list(extra)), "numNodes": nodes,
               "numProcPerNode": 1}
    if gpus_per_node:
        trainer["resourcesPerNode"] = {"limits": {"nvidia.com/gpu": gpus_per_node}}
    pod = {"volumes": vols, "containers": [{"name": RUNTIME_JOB, "volumeMounts": mounts}]}
    patch = {"manager": "gnnbench", "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [
        {"name": RUNTIME_JOB, "template": {"spec": {"template": {"spec": pod}}}}]}}}}
    return {"apiVersion": TRAINER_API, "kind": "TrainJob", "metadata": metadata(name, namespace),
            "spec": {"runtimeRef": {"name": runtime, "apiGroup": "trainer.kubeflow.org",
                                    "kind": "ClusterTrainingRuntime"},
                     "trainer": trainer, "runtimePatches": [patch]}}


def pytorchjob(suite: str, nodes: int, gpus_per_node: int, image: str, *, name: str, namespace: str | None = None,
               claim: str = "gnnbench-results", shm_size: str = "16Gi", extra: list[str] = ()) -> dict:
    def replica(count: int) -> dict:
        """Built afresh for each replica: YAML then writes it out in full, with no anchors or aliases."""
        vols, mounts = volumes(claim, shm_size)
        container = {"name": "pytorch", "image": image, "command": node_command(suite, name, list(extra)),
                     "volumeMounts": mounts}
        if gpus_per_node:
            container["resources"] = {"limits": {"nvidia.com/gpu": gpus_per_node}}
        return {"replicas": count, "restartPolicy": "OnFailure",
                "template": {"spec": {"containers": [container], "volumes": vols}}}

    replicas = {"Master": replica(1), **({"Worker": replica(nodes - 1)} if nodes > 1 else {})}
    return {"apiVersion": TRAINING_OPERATOR_API, "kind": "PyTorchJob", "metadata": metadata(name, namespace),
            "spec": {"nprocPerNode": "1", "pytorchReplicaSpecs": replicas}}


def metadata(name: str, namespace: str | None) -> dict:
    return {"name": name, **({"namespace": namespace} if namespace else {})}


def check_names(names: dict[str, str | None]) -> None:
    """Each name against Kubernetes' rule for it (NAME_RULES)."""
    for option, value in names.items():
        if value is None:
            continue
        no_control_characters(option, value)
        pattern, most, rule = NAME_RULES[option]
        if not (pattern.fullmatch(value) and len(value) <= most):
            raise InputError(f"{option} {value!r}: allowed: {rule}")


def check_shm_size(text: str) -> None:
    no_control_characters("--shm-size", text)
    if not (found := QUANTITY.fullmatch(text)):
        raise InputError(f"--shm-size {text!r}: a Kubernetes quantity, e.g. 16Gi or 512Mi")
    if float(found.group(1)) <= 0:
        raise InputError(f"--shm-size {text!r}: an empty /dev/shm leaves DataLoader workers no room to pass "
                         "batches; allowed: a size above zero, e.g. 16Gi or 512Mi")


def run(args) -> int:
    check_shape(args.nodes, args.gpus_per_node)
    for option, value in (("suite", args.suite), ("--image", args.image), ("--out", args.out)):
        if value is not None:
            no_control_characters(option, value)
    if not IMAGE.fullmatch(args.image):
        raise InputError(f"--image {args.image!r}: allowed: letters, digits and . _ / : @ + - (an image reference, "
                         "registry/name:tag or @digest)")
    check_names({"--name": args.name, "--namespace": args.namespace, "--runtime": args.runtime,
                 "--results-claim": args.results_claim})
    check_shm_size(args.shm_size)
    out = new_output_file(f"--out {args.out}", args.out, args.force) if args.out else None
    extra = run_args(args.run_args)
    suite_name, fits, misfits = fit(args.suite, args.nodes, args.gpus_per_node)
    name = args.name or re.sub(r"[^a-z0-9-]", "-", f"gnnbench-{suite_name}".lower())[:63].strip("-")
    check_names({"--name": name})
    common = dict(name=name, namespace=args.namespace, claim=args.results_claim, shm_size=args.shm_size, extra=extra)
    shape = (args.suite, args.nodes, args.gpus_per_node, args.image)
    manifest = (trainjob(*shape, runtime=args.runtime, **common) if args.kind == "trainjob"
                else pytorchjob(*shape, **common))
    text = yaml.safe_dump(manifest, sort_keys=False, width=1 << 16)  # one line a command
    if out:
        out.write_text(text)
    print(text, end="")
    print(f"# {len(fits)} cell(s) fit {args.nodes} node(s) x {args.gpus_per_node} GPU(s)"
          + (f"; {len(misfits)} will be skipped: {misfits[0]}" if misfits else "")
          + f"; apply with kubectl apply -f FILE; results on the claim {args.results_claim}: {RESULTS_MOUNT}/{name}/node*/",
          file=sys.stderr)
    return 0

"""`gnnbench slurm SUITE --nodes N --gpus-per-node G`: an sbatch script that runs a suite on N nodes
(docs/on-a-cluster.md). `srun` starts `gnnbench run SUITE` once per node; each run takes its node
count, rank and rendezvous host from SLURM's variables (bench/run/cluster_env.py), writes into
RESULTS/slurm-JOBID/nodeK/ and, after a requeue, resumes from its journal.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from bench import modes
from bench.inputs import InputError, folder, new_output_file, no_control_characters
from bench.paths import default_results_dir
from bench.run import suite as suite_mod

REQUEUE_SIGNAL_S = 300  # seconds before the time limit the batch shell is told to requeue
# Whole-string patterns (fullmatch: `$` would also match before a trailing newline).
TIME = re.compile(r"\d+-\d{1,2}(:\d{2}){0,2}|\d+(:\d{2}){0,2}")  # sbatch --time: M, M:S, H:M:S, D-H[:M[:S]]
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.,-]{0,199}")  # partition names (a comma list allowed)
# An image reference: registry[:port]/name[:tag][@digest], enroot's REGISTRY#IMAGE, or a squashfs path
IMAGE = re.compile(r"[A-Za-z0-9./_][A-Za-z0-9._/:@#+~-]{0,499}")
IMAGE_RULE = "letters, digits and . _ / : @ # + ~ - (an image reference, or a squashfs file's path)"
# sbatch reads the #SBATCH lines itself (not bash). The --output path is written in double quotes
# (blanks and single quotes pass); a '#' would cut it short, a '"' end the quotes, a backslash turn off %j.
SBATCH_PATH_REFUSED = ("\\", '"', "#")
RUNTIMES = ("pyxis", "apptainer")


def add_parser(sub, parents) -> None:
    p = sub.add_parser("slurm", parents=parents,
                       help="write (and with --submit, submit) an sbatch script that runs a suite on SLURM nodes")
    p.add_argument("suite", help="suite name in suites/ or a YAML path (as the nodes see it)")
    add_shape(p)
    p.add_argument("--partition", metavar="P", help="the partition to run in (default: the cluster's)")
    p.add_argument("--time", metavar="T", help="time limit, as sbatch takes it (minutes, H:M:S, D-H:M...)")
    p.add_argument("--container-image", metavar="IMG", help="run gnnbench in this image on each node")
    p.add_argument("--container-runtime", choices=RUNTIMES, default="pyxis",
                   help="how: pyxis/enroot's srun --container-image (default), or apptainer exec")
    p.add_argument("--results", type=Path, metavar="DIR",
                   help="where the nodes write results (a folder every node sees; default: results/runs)")
    p.add_argument("--out", type=Path, metavar="FILE",
                   help="the script to write (default: DIR/slurm-SUITE.sbatch in the --results folder)")
    p.add_argument("--submit", action="store_true", help="submit the script with sbatch and say the job id")
    p.add_argument("--force", action="store_true", help="replace the --out file if it is already there")


def add_shape(p) -> None:
    """--nodes, --gpus-per-node and --run-args, shared with `gnnbench k8s`."""
    p.add_argument("--nodes", type=int, required=True, metavar="N", help="nodes that run each cell together")
    p.add_argument("--gpus-per-node", type=int, required=True, metavar="G", help="GPUs each node has (0: CPU only)")
    p.add_argument("--run-args", default="", metavar="'OPTIONS'",
                   help="options for each node's gnnbench run, as one string: --run-args='-k ws=2 --no-install'")


def check_shape(nodes: int, gpus_per_node: int) -> None:
    if not 1 <= nodes <= 1024:
        raise InputError(f"--nodes {nodes}: allowed: 1 to 1024")
    if not 0 <= gpus_per_node <= 64:
        raise InputError(f"--gpus-per-node {gpus_per_node}: allowed: 0 to 64")


def fit(suite_arg: str, nodes: int, gpus_per_node: int) -> tuple[str, list[str], list[str]]:
    """The suite's name, its cells that fit N nodes x G GPUs per node, and why the others do not."""
    suite, _ = suite_mod.load(suite_arg)
    fits, misfits = [], []
    for cell in suite_mod.expand(suite):
        world = int(cell.settings.world_size)
        if world % nodes:
            misfits.append(f"{cell.id}: world size {world} does not split over {nodes} nodes")
        elif modes.mode(cell.settings.mode).needs_gpu and world // nodes > gpus_per_node:
            misfits.append(f"{cell.id}: {world // nodes} ranks per node need {world // nodes} GPUs; "
                           f"--gpus-per-node {gpus_per_node}")
        else:
            fits.append(cell.id)
    if not fits:
        raise InputError(f"suite {suite.name!r}: no cell fits {nodes} node(s) x {gpus_per_node} GPU(s) per node "
                         f"({misfits[0] if misfits else 'the suite has no cells'})")
    return suite.name, fits, misfits


def run_args(given: str) -> list[str]:
    no_control_characters("--run-args", given)
    try:
        args = shlex.split(given)
    except ValueError as exc:
        raise InputError(f"--run-args {given!r}: {exc}") from None
    for flag in ("--nnodes", "--node-rank", "--results", "--resume"):
        if any(a == flag or a.startswith(flag + "=") for a in args):
            raise InputError(f"--run-args {given!r}: {flag}: the script sets it on each node (SLURM gives the node count and "
                             "rank; the results go to --results/slurm-JOBID/nodeK)")
    return args


def node_run(out: str, gnnbench: str, suite: str, extra: list[str]) -> str:
    """A node's shell command: its gnnbench run into `out`, resumed from its journal after a restart."""
    return (f'out={out}; journal=$(ls -t "$out"/*.cells.jsonl 2>/dev/null | head -n 1); '
            f'exec {gnnbench} run {shlex.quote(suite)} --results "$out" ${{journal:+--resume "$journal"}}'
            + "".join(" " + shlex.quote(a) for a in extra))


def script(suite: str, nodes: int, gpus_per_node: int, results: Path, *, partition: str | None = None,
           time: str | None = None, image: str | None = None, runtime: str = "pyxis",
           extra: list[str] = ()) -> str:
    """The sbatch script's text."""
    name = re.sub(r"[^A-Za-z0-9_.-]", "-", Path(suite).stem)[:40]
    lines = ["#!/bin/bash",
             f"# gnnbench suite {suite} on {nodes} node(s) x {gpus_per_node} GPU(s), written by `gnnbench slurm`.",
             "# One task per node: each node's gnnbench run takes its node count, rank and rendezvous host from",
             "# SLURM (SLURM_NNODES, SLURM_NODEID, the first host of the node list; the port from the job id).",
             f"#SBATCH --job-name=gnnbench-{name}",
             f"#SBATCH --nodes={nodes}",
             "#SBATCH --ntasks-per-node=1",
             "#SBATCH --exclusive"]
    lines += [f"#SBATCH --{option}={value}" for option, value in
              (("gpus-per-node", gpus_per_node), ("partition", partition), ("time", time)) if value]
    lines += ["# preempted, or near the time limit: requeued, and each node resumes from its journal",
              "#SBATCH --requeue",
              f"#SBATCH --signal=B:USR1@{REQUEUE_SIGNAL_S}",
              "#SBATCH --open-mode=append",
              f"#SBATCH --output={sbatch_output(results)}",
              "",
              "set -uo pipefail",
              f"export RESULTS={shlex.quote(str(results))}/slurm-$SLURM_JOB_ID",
              'export GNNBENCH=${GNNBENCH:-gnnbench}  # the command on the nodes (or in the image)',
              'mkdir -p "$RESULTS"',
              'trap \'echo "gnnbench: job $SLURM_JOB_ID near its time limit: requeued"; '
              'scontrol requeue "$SLURM_JOB_ID"\' USR1',
              ""]
    node_cmd = node_run('"$RESULTS/node$SLURM_NODEID"', "$GNNBENCH", suite, extra)
    srun, launcher = [f"srun --nodes={nodes} --ntasks-per-node=1 --kill-on-bad-exit=0"], "bash -c"
    if image and runtime == "pyxis":
        lines.append("# the image through pyxis/enroot (srun --container-image); the results folder mounted in it")
        srun.append(f'--container-image={shlex.quote(image)} --container-mounts="$RESULTS:$RESULTS"')
    elif image:
        lines.append("# the image through Apptainer (docker:// pulls it once into its cache); GPUs with --nv")
        launcher = (f'apptainer exec{" --nv" if gpus_per_node else ""} --bind "$RESULTS" '
                    f"docker://{shlex.quote(image)} bash -c")
    lines.append(" \\\n    ".join([*srun, f"{launcher} {shlex.quote(node_cmd)} &"]))
    lines += ["step=$!", 'wait "$step"; code=$?',
              'while kill -0 "$step" 2>/dev/null; do wait "$step"; code=$?; done  # a trap ended the wait early',
              'echo "gnnbench: results in $RESULTS/node*/ (the node that held rank 0 has the measured cells)"',
              'exit "$code"', ""]
    return "\n".join(lines)


def sbatch_output(results: Path) -> str:
    """`--output`'s value as sbatch reads it on an #SBATCH line: RESULTS/slurm-%j.out in double
    quotes, a '%' of the folder's own name written '%%' (sbatch would read %j, %N... in it)."""
    text = str(results)
    if bad := [c for c in SBATCH_PATH_REFUSED if c in text]:
        raise InputError(f"--results {text!r}: holds {bad[0]!r}, which sbatch's #SBATCH lines do not take in a path; "
                         "allowed: a folder without backslashes, double quotes or '#'")
    return '"' + text.replace("%", "%%") + '/slurm-%j.out"'


def check_values(suite: str, results: Path | None, partition: str | None, time: str | None, image: str | None,
                 out: Path | None) -> None:
    """Each value the script is written from (--run-args: run_args): no control characters (a newline
    would start a command of its own, or end an #SBATCH line), then its own rule."""
    for option, value in (("suite", suite), ("--partition", partition), ("--time", time), ("--container-image", image),
                          ("--results", results), ("--out", out)):
        if value is not None:
            no_control_characters(option, value)
    if time and not TIME.fullmatch(time):
        raise InputError(f"--time {time!r}: allowed: minutes, M:S, H:M:S, D-H, D-H:M or D-H:M:S")
    if partition and not NAME.fullmatch(partition):
        raise InputError(f"--partition {partition!r}: allowed: letters, digits, _ . , - (at most 200)")
    if image and not IMAGE.fullmatch(image):
        raise InputError(f"--container-image {image!r}: allowed: {IMAGE_RULE}")
    if results is not None:
        sbatch_output(results)


def submit(path: Path) -> str:
    """Hand the script to sbatch; the job id."""
    if (sbatch := shutil.which("sbatch")) is None:
        raise InputError("--submit: sbatch is not on PATH (submit from a SLURM login node, or run the script "
                         "there: sbatch FILE)")
    proc = subprocess.run([sbatch, "--parsable", str(path)], capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise InputError(f"sbatch {path}: {(proc.stderr or proc.stdout).strip() or f'exit code {proc.returncode}'}")
    return proc.stdout.strip().split(";")[0]


def run(args) -> int:
    check_shape(args.nodes, args.gpus_per_node)
    check_values(args.suite, args.results, args.partition, args.time, args.container_image, args.out)
    extra = run_args(args.run_args)
    name, fits, misfits = fit(args.suite, args.nodes, args.gpus_per_node)
    results = folder(f"--results {args.results}", args.results or default_results_dir(), writable=True).absolute()
    sbatch_output(results)  # the default folder too
    if args.out is None:
        results.mkdir(parents=True, exist_ok=True)
    out = new_output_file(f"--out {args.out}" if args.out else "the script (--out not given)",
                          args.out or results / f"slurm-{name}.sbatch", args.force)
    text = script(args.suite, args.nodes, args.gpus_per_node, results, partition=args.partition, time=args.time,
                  image=args.container_image, runtime=args.container_runtime, extra=extra)
    results.mkdir(parents=True, exist_ok=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    print(text)
    print(f"script: {out} ({len(fits)} cell(s) fit {args.nodes} node(s) x {args.gpus_per_node} GPU(s)"
          + (f"; {len(misfits)} will be skipped: {misfits[0]}{' ...' if len(misfits) > 1 else ''}" if misfits else "")
          + ")", file=sys.stderr)
    if args.submit:
        job = submit(out)
        print(f"submitted: job {job} (squeue -j {job}); results: {results}/slurm-{job}/node*/")
    else:
        print(f"submit it with: sbatch {out}", file=sys.stderr)
    return 0

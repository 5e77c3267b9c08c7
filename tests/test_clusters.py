"""Runs a scheduler started: the SLURM and Kubeflow variables a node's `gnnbench run` takes its
node count, rank and rendezvous from (bench/run/cluster_env.py), their disagreements with the
options, the Kubeflow manifests of `gnnbench k8s` against the operators' CRD schemas, and a real
two-"node" cell run the way a Kubeflow operator starts it (PET_* variables, RANK/WORLD_SIZE too).
The SLURM cluster itself runs in tests/test_slurm.py."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from bench import cli
from bench.net import free_port
from bench.machine import gpus
from bench.run import cluster_env
from bench.run.cluster_env import ClusterEnvError
from tests.conftest import REPO, require_stacks

SLURM = {"SLURM_JOB_ID": "4242", "SLURM_STEP_ID": "0", "SLURM_STEP_NUM_NODES": "2", "SLURM_NNODES": "2",
         "SLURM_NODEID": "1", "SLURM_STEP_NODELIST": "localhost,gpu2", "SLURM_JOB_NODELIST": "localhost,gpu2",
         "SLURM_STEP_NUM_TASKS": "2"}
PET = {"PET_NNODES": "2", "PET_NODE_RANK": "1", "PET_MASTER_ADDR": "10.0.0.7", "PET_MASTER_PORT": "23456",
       "PET_NPROC_PER_NODE": "1"}
CLUSTER_VARS = ("SLURM_", "PET_")


@pytest.fixture
def bare_env(monkeypatch):
    """No scheduler variables from the machine the tests run on."""
    for name in list(os.environ):
        if name.startswith(CLUSTER_VARS):
            monkeypatch.delenv(name)
    return monkeypatch


# --- the scheduler's variables ------------------------------------------------------------------

def test_srun_gives_node_count_rank_and_an_endpoint_from_the_job_id():
    found = cluster_env.detect(SLURM)
    assert (found.scheduler, found.nnodes, found.node_rank, found.job_id) == ("slurm", 2, 1, "4242")
    assert found.nodes == ["localhost", "gpu2"]
    assert found.rdzv_endpoint == f"localhost:{cluster_env.slurm_port('4242')}"
    assert found.machine_info()["environment"]["SLURM_NODEID"] == "1"


def test_the_batch_script_itself_is_not_a_node_and_no_scheduler_is_none():
    batch = {k: v for k, v in SLURM.items() if k not in ("SLURM_STEP_ID",)}
    assert cluster_env.detect(batch) is None
    assert cluster_env.detect({}) is None
    assert cluster_env.resolve(None, None, None, env={}) == (1, 0, None, None)


def test_a_kubeflow_pod_gives_pet_values_and_master_addr_stands_in():
    found = cluster_env.detect(PET)
    assert (found.scheduler, found.nnodes, found.node_rank, found.rdzv_endpoint) == ("kubeflow", 2, 1, "10.0.0.7:23456")
    older = {"PET_NNODES": "2", "PET_NODE_RANK": "0", "MASTER_ADDR": "master-0", "MASTER_PORT": "23456"}
    assert cluster_env.detect(older).rdzv_endpoint == "master-0:23456"


@pytest.mark.parametrize("given, env, words", [
    ((3, None, None), SLURM, ["--nnodes 3", "SLURM_STEP_NUM_NODES=2"]),
    ((None, 0, None), SLURM, ["--node-rank 0", "rank 1", "SLURM_NODEID=1"]),
    ((None, 0, None), PET, ["--node-rank 0", "rank 1", "PET_NODE_RANK=1"]),
    ((None, None, "127.0.0.1:9"), PET, ["--rdzv-endpoint 127.0.0.1:9", "10.0.0.7:23456"]),
])
def test_an_option_that_differs_from_the_scheduler_names_both(given, env, words):
    with pytest.raises(ClusterEnvError) as err:
        cluster_env.resolve(*given, env=env)
    assert all(w in str(err.value) for w in words), str(err.value)


def test_options_that_agree_are_taken_and_slurm_takes_a_given_endpoint():
    assert cluster_env.resolve(2, 1, None, env=SLURM)[:3] == (2, 1, SLURM["SLURM_STEP_NODELIST"].split(",")[0]
                                                               + f":{cluster_env.slurm_port('4242')}")
    assert cluster_env.resolve(2, 1, "head:29400", env=SLURM)[2] == "head:29400"
    assert cluster_env.resolve(2, 1, "10.0.0.7:23456", env=PET)[:3] == (2, 1, "10.0.0.7:23456")


@pytest.mark.parametrize("env, words", [
    ({**PET, "PET_NNODES": "1:4"}, ["PET_NNODES='1:4'", "elastic"]),
    ({**SLURM, "SLURM_STEP_NUM_TASKS": "4"}, ["4 tasks on 2 node(s)", "--ntasks-per-node=1"]),
    ({**SLURM, **PET, "PET_NODE_RANK": "0"}, ["SLURM says 2 node(s), this one rank 1", "Kubeflow", "rank 0"]),
    ({k: v for k, v in PET.items() if k != "PET_MASTER_PORT"}, ["PET_MASTER_PORT (or MASTER_PORT)"]),
])
def test_unusable_scheduler_variables_say_which(env, words):
    with pytest.raises(ClusterEnvError) as err:
        cluster_env.detect(env)
    assert all(w in str(err.value) for w in words), str(err.value)


@pytest.mark.parametrize("env, variable", [(PET, "PET_NNODES=2"), (SLURM, "SLURM_STEP_NUM_NODES=2")])
def test_gnnbench_run_exits_2_with_one_line_naming_both_values(bare_env, tmp_path, capsys, env, variable):
    for name, value in env.items():
        bare_env.setenv(name, value)
    code = cli.main(["run", "smoke", "--nnodes", "3", "--results", str(tmp_path / "r"),
                     "--cache-dir", str(tmp_path / "c"), "--no-install"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert "--nnodes 3" in err and variable in err
    assert not (tmp_path / "r").exists() or not list((tmp_path / "r").iterdir())  # nothing was run


def test_the_worker_environment_drops_what_srun_and_pods_set():
    env = {"RANK": "3", "WORLD_SIZE": "8", "LOCAL_RANK": "0", "MASTER_ADDR": "x", "MASTER_PORT": "1",
           "PET_NNODES": "2", "TORCHELASTIC_RUN_ID": "r", "SLURM_JOB_ID": "7", "PATH": "/bin"}
    assert cluster_env.worker_environment(env) == {"SLURM_JOB_ID": "7", "PATH": "/bin"}


# --- the manifests against the operators' CRDs --------------------------------------------------

def kubeflow_crd(name: str) -> dict:
    """The openAPIV3Schema of a CRD in GNNBENCH_KUBEFLOW_SCHEMAS (`make test` points it at
    ../shared/schemas/kubeflow); strict as `kubectl apply --validate=strict` is: a field the schema
    does not know is an error (Kubernetes would drop it without a word)."""
    folder = os.environ.get("GNNBENCH_KUBEFLOW_SCHEMAS")
    path = Path(folder or "") / name
    if not folder or not path.is_file():
        message = f"GNNBENCH_KUBEFLOW_SCHEMAS ({folder or 'not set'}) holds no {name}"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    crd = yaml.safe_load(path.read_text())
    [version] = [v for v in crd["spec"]["versions"] if v.get("served", True) and v.get("storage", True)][:1]
    return strict(copy.deepcopy(version["schema"]["openAPIV3Schema"]))


def strict(schema):
    if isinstance(schema, dict):
        if "properties" in schema and "additionalProperties" not in schema \
                and not schema.get("x-kubernetes-preserve-unknown-fields"):
            schema["additionalProperties"] = False
        for value in schema.values():
            strict(value)
    elif isinstance(schema, list):
        for value in schema:
            strict(value)
    return schema


def schema_errors(manifest: dict, crd: str) -> list[str]:
    import jsonschema

    validator = jsonschema.Draft7Validator(kubeflow_crd(crd))
    return [f"{e.json_path}: {e.message}" for e in validator.iter_errors(manifest)]


CRDS = {"trainjob": "trainer.kubeflow.org_trainjobs.yaml", "pytorchjob": "kubeflow.org_pytorchjobs.yaml"}


@pytest.mark.parametrize("kind", CRDS)
def test_k8s_manifests_validate_against_the_pinned_crds(kind, tmp_path, capsys):
    out = tmp_path / f"{kind}.yaml"
    code = cli.main(["k8s", "multi-gpu", "--nodes", "2", "--gpus-per-node", "4", "--image",
                     "ghcr.io/example/gnnbench:gpu", "--kind", kind, "--out", str(out), "--run-args=-k ws=8"])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    manifest = yaml.safe_load(out.read_text())
    assert yaml.safe_load(printed.out) == manifest
    assert schema_errors(manifest, CRDS[kind]) == []
    text = out.read_text()
    assert "/dev/shm" in text and "medium: Memory" in text and "claimName: gnnbench-results" in text
    assert "nvidia.com/gpu: 4" in text and "gnnbench run multi-gpu" in text and "-k ws=8" in text
    if kind == "trainjob":
        spec = manifest["spec"]
        assert spec["runtimeRef"]["name"] == "torch-distributed" and spec["trainer"]["numNodes"] == 2
        assert spec["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]["name"] == "node"
    else:
        replicas = manifest["spec"]["pytorchReplicaSpecs"]
        assert replicas["Master"]["replicas"] == 1 and replicas["Worker"]["replicas"] == 1
    # the check is strict: a field the CRD does not know is found
    manifest["spec"]["trainer" if kind == "trainjob" else "pytorchReplicaSpecs"]["typo"] = 1
    assert schema_errors(manifest, CRDS[kind])


def test_k8s_bad_input_is_one_line_and_exit_2(capsys):
    base = ["k8s", "multi-gpu", "--gpus-per-node", "4", "--image", "img"]
    for argv, words in ((["--nodes", "0"], "--nodes 0"), (["--nodes", "2", "--name", "Bad_Name"], "--name 'Bad_Name'"),
                        (["--nodes", "2", "--run-args=--node-rank 1"], "--node-rank"),
                        (["--nodes", "3"], "no cell fits 3 node(s) x 4 GPU(s)")):
        code = cli.main(base + argv)
        err = capsys.readouterr().err
        assert code == 2 and words in err and len(err.strip().splitlines()) == 1, err


def test_a_cuda_cell_over_two_nodes_is_not_skipped_for_gpu_count(tmp_path):
    """multi-gpu's 8-rank cell on 2 nodes x 4 GPUs: 4 ranks per node against the node's 4 GPUs
    (not 8 against 4); the same cell with 2 GPUs a node is skipped, saying per node."""
    from bench.commands.slurm import fit
    from bench.run.session import RunOptions, Session

    _, fits, misfits = fit("multi-gpu", 2, 4)
    cell_id = next(c for c in fits if "/ws=8" in c and "cuda" in c)
    session = Session(RunOptions(suite="multi-gpu", results=tmp_path / "r", cache_dir=tmp_path / "c",
                                 nnodes=2, node_rank=0, rdzv_endpoint="127.0.0.1:29400"), say=lambda *a, **k: None)
    [cell] = [c for c in session.cells if c.id == cell_id]
    session.executor._gpus = gpus.Gpus(("NVIDIA H100",) * 4, "four GPUs on this node")
    assert session.node_refusal(cell) is None and session.gpu_refusal(cell) is None
    session.executor._gpus = gpus.Gpus(("NVIDIA H100",) * 2, "two GPUs on this node")
    refused = session.gpu_refusal(cell)
    assert refused.status == "skipped" and "4 ranks on this node need 4 GPUs; 2 visible" in refused.reason
    assert any(m.startswith(cell_id.replace("/ws=8", "/ws=1") + ":") for m in misfits)


# --- a real cell over two "nodes" started as a Kubeflow operator starts pods ---------------------

SUITE = """
name: pet
datasets:
  g: {source: synthetic, params: {scale: 10, feature_dim: 16, num_classes: 4}}
backends: [pyg-neighbor]
settings: {world_size: 2, batch_size: 64, fanout: [5, 5], epochs: 3, timeout: 600}
"""


def test_two_pods_with_pet_variables_measure_one_cell_over_both(tmp_path, cache_dir):
    """Each "pod" gets what the operators set: PET_NNODES, PET_NODE_RANK, PET_MASTER_ADDR/PORT,
    and (PyTorchJob) RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, which the worker must not take
    as its own. No --nnodes or --node-rank on the command line."""
    require_stacks("pyg")
    suite = tmp_path / "pet.yaml"
    suite.write_text(SUITE)
    port = free_port()
    base = {k: v for k, v in os.environ.items() if not k.startswith(CLUSTER_VARS)}
    procs = []
    for node in (0, 1):
        env = {**base, "PET_NNODES": "2", "PET_NODE_RANK": str(node), "PET_NPROC_PER_NODE": "1",
               "PET_MASTER_ADDR": "127.0.0.1", "PET_MASTER_PORT": str(port),
               "RANK": str(node), "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
        cmd = [sys.executable, "-m", "bench.cli", "run", str(suite), "--results", str(tmp_path / f"node{node}"),
               "--cache-dir", str(cache_dir), "--no-install"]
        procs.append(subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      text=True))
    outputs = [p.communicate(timeout=900)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    docs = [json.loads(next((tmp_path / f"node{k}").glob("pet-*.json")).read_text()) for k in (0, 1)]
    for k, doc in enumerate(docs):
        seen = doc["machine_info"]["gnnbench"]["cluster"]
        assert (seen["scheduler"], seen["nnodes"], seen["node_rank"]) == ("kubeflow", 2, k)
        assert seen["rdzv_endpoint"] == f"127.0.0.1:{port}" and seen["environment"]["PET_NODE_RANK"] == str(k)
    measured = [d for d in docs if d["benchmarks"]]
    followers = [d for d in docs if not d["benchmarks"]]
    assert len(measured) == 1 and len(followers) == 1, outputs
    info = measured[0]["benchmarks"][0]["extra_info"]
    assert [r["rank"] for r in info["ranks"]] == [0, 1] and info["settings"]["world_size"] == 2
    assert followers[0]["unmeasured"][0]["status"] == "follower"


@pytest.mark.parametrize("runtime, words", [
    ("pyxis", ["--container-image=ghcr.io/o/gnnbench:gpu", '--container-mounts="$RESULTS:$RESULTS"', "pyxis"]),
    ("apptainer", ["apptainer exec --nv", "docker://ghcr.io/o/gnnbench:gpu", "Apptainer"]),
])
def test_the_sbatch_script_runs_the_image_with_pyxis_or_apptainer(tmp_path, capsys, runtime, words):
    out = tmp_path / "job.sbatch"
    code = cli.main(["slurm", "multi-gpu", "--nodes", "2", "--gpus-per-node", "4", "--partition", "gpu",
                     "--time", "2:00:00", "--container-image", "ghcr.io/o/gnnbench:gpu", "--container-runtime", runtime,
                     "--results", str(tmp_path / "r"), "--out", str(out)])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    text = out.read_text()
    assert printed.out.strip() == text.strip() and "sbatch " + str(out) in printed.err
    for line in ("#SBATCH --nodes=2", "#SBATCH --ntasks-per-node=1", "#SBATCH --gpus-per-node=4",
                 "#SBATCH --partition=gpu", "#SBATCH --time=2:00:00", "#SBATCH --requeue", "#SBATCH --signal=B:USR1@300"):
        assert line in text.splitlines()
    assert all(w in text for w in words), text
    assert subprocess.run(["bash", "-n", str(out)]).returncode == 0  # the shell reads it

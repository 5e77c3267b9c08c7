# The two front doors of a fresh machine: `make bench` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# Offline Planetoid copies for the tests (override with GNNBENCH_DATA_ROOT=...).
GNNBENCH_DATA_ROOT ?= $(abspath ../shared/datasets/planetoid)
# The Compose Specification's JSON schema, for validating docker-compose.yml in the tests.
GNNBENCH_COMPOSE_SCHEMA ?= $(abspath ../shared/schemas/compose-spec.json)
# Kubeflow's TrainJob and PyTorchJob CRDs, for validating `gnnbench k8s` manifests in the tests.
GNNBENCH_KUBEFLOW_SCHEMAS ?= $(abspath ../shared/schemas/kubeflow)
export GNNBENCH_DATA_ROOT GNNBENCH_COMPOSE_SCHEMA GNNBENCH_KUBEFLOW_SCHEMAS
# The committed results the site and results/README.md are built from (not results/runs/, where
# your own runs land, uncommitted).
# results/fidelity/ holds `gnnbench fidelity` comparisons, results/convert/ the conversion benchmark
# (python -m bench.datasets.convert_benchmark): not suite runs.
RESULTS := $(filter-out results/runs/% results/fidelity/% results/convert/% %.calibration.json,$(wildcard results/*/*.json))

.PHONY: bench test test-nightly stacks site results-readme chromium podman slurm slurm-test image-test image-gpu bundle

$(BIN)/gnnbench: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --progress-bar off -q -e '.[test]'
	touch $@

stacks: $(BIN)/gnnbench
	$(BIN)/gnnbench stacks install

# The site test drives Debian's Chromium (Playwright never downloads a browser here); as root
# directly, elsewhere (a CI runner) through sudo.
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
chromium:
	@test -x /usr/bin/chromium || { $(SUDO) apt-get update -q && $(SUDO) apt-get install -y --no-install-recommends chromium; }

# Containers with Debian's podman (no Docker engine needed), installed as chromium is: runc as its
# runtime (crun fails on cgroups v1 hosts), no default ulimits (setting them fails without the
# privilege), mmdebstrap for a local base image where no registry can be reached; podman-compose
# (PyPI) runs docker-compose.yml.
CONTAINERS_CONF := /etc/containers/containers.conf.d/50-gnnbench.conf
podman:
	@command -v podman >/dev/null && command -v runc >/dev/null && command -v mmdebstrap >/dev/null || { $(SUDO) apt-get update -q && $(SUDO) apt-get install -y --no-install-recommends podman runc mmdebstrap; }
	@test -f $(CONTAINERS_CONF) || { $(SUDO) mkdir -p $(dir $(CONTAINERS_CONF)) && printf '[containers]\ndefault_ulimits = []\n\n[engine]\nruntime = "runc"\n' | $(SUDO) tee $(CONTAINERS_CONF) >/dev/null && echo "wrote $(CONTAINERS_CONF)"; }

# SLURM for the cluster test, installed as chromium is: Debian's slurmctld, slurmd and munge (22.05).
# The test (tests/test_slurm.py, tests/local_slurm.py) builds a two-node cluster on this machine in a
# temporary folder (its own munge key and socket, free ports), submits `gnnbench slurm`'s script and
# stops the daemons again; nothing here starts a daemon or writes /etc/slurm.
slurm:
	@command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v munged >/dev/null && command -v sbatch >/dev/null || { $(SUDO) apt-get update -q && $(SUDO) apt-get install -y --no-install-recommends slurmctld slurmd slurm-client munge; }

# The cluster test alone: a 2-node SLURM cluster here runs a small scaling suite over both nodes.
slurm-test: stacks slurm
	$(BIN)/python -m pytest tests/test_slurm.py -ra

$(BIN)/podman-compose: $(BIN)/gnnbench
	$(BIN)/python -m pip install --progress-bar off -q podman-compose==1.6.0

# The CPU image built and run here through docker-compose.yml; its stacks checked against the local
# ones (so those come first: their pip cache makes the image's stacks quick). See docker/image-test.sh.
image-test: stacks podman $(BIN)/podman-compose
	docker/image-test.sh

# The GPU image's build as users start it; here it stops where the CUDA base or indexes cannot be reached.
image-gpu: podman $(BIN)/podman-compose
	docker/image-gpu.sh

# A folder for a GPU node without internet (README: "On a GPU node without internet"): its
# install.sh installs gnnbench there against the node's Python and PyTorch and runs the GPU suite.
NODE_BUNDLE ?= build/gnnbench-node
NODE_PYTHON ?= 3.11
NODE_PLATFORM ?= x86_64
NODE_TORCH ?= 2.13.0
NODE_CUDA ?= cu130
bundle: stacks
	$(BIN)/gnnbench bundle $(NODE_BUNDLE) --python $(NODE_PYTHON) --platform $(NODE_PLATFORM) --torch $(NODE_TORCH) --cuda $(NODE_CUDA)

bench: stacks
	$(BIN)/gnnbench run suites/smoke.yaml

# make test: every test but the nightly ones (tests/nightly.py: minutes of framework work each, run by
# make test-nightly in .github/workflows/ci.yml's nightly run); docs/testing.md lists both.
# pytest's exit code 5 (no tests collected) is a failure too, said as such (make would print 2).
define PYTEST
$(BIN)/python -m pytest tests -ra --durations=25 -m $(1); code=$$?; \
  if [ $$code -eq 5 ]; then echo "make $@: pytest collected no tests: that is a failure" >&2; fi; exit $$code
endef
test: stacks chromium podman slurm
	$(call PYTEST,"not nightly")

test-nightly: stacks chromium podman slurm
	$(call PYTEST,nightly)

# The published site: the docs (MkDocs, from docs/ and the code's reference pages) in site/docs/,
# and the result pages beside them (site/index.html, a page per suite, environment.html), each
# linking to the other.
MKDOCS := NO_MKDOCS_2_WARNING=1 DISABLE_MKDOCS_2_WARNING=true $(BIN)/mkdocs
site: $(BIN)/gnnbench
	rm -rf site
	$(MKDOCS) build --strict --quiet --site-dir site/docs
	$(BIN)/gnnbench report $(RESULTS) --html site

# results/README.md is generated from the committed results (with results/NOTES.md included).
results-readme: $(BIN)/gnnbench
	$(BIN)/gnnbench report $(RESULTS) --readme results/README.md

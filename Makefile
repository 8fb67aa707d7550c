# Two promises (README): `make run` sets everything up and starts the site; `make test` sets
# everything up and runs the whole suite. Both work on a fresh Debian/Ubuntu machine.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.12 2>/dev/null || (command -v pyenv >/dev/null && pyenv which python3.12 2>/dev/null))
VENV := .venv
VPY := $(VENV)/bin/python
MANAGE := $(VPY) manage.py
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: run test bench mutation worker lint format venv system-run system-test clean-data

run: venv system-run
	@set -e; export DEBUG=$${DEBUG:-1}; \
	mkdir -p "$${SECUREBENCH_DATA_DIR:-var}"; \
	$(MANAGE) migrate --noinput; \
	$(MANAGE) setup_site; \
	echo "Starting the web server on http://$(HOST):$(PORT)/ and a Celery worker (Ctrl-C stops both)"; \
	trap 'kill 0' EXIT INT TERM; \
	$(VENV)/bin/celery -A securebench_site worker --beat --queues=text,sandbox --concurrency=2 --loglevel=INFO & \
	$(MANAGE) runserver $(HOST):$(PORT) --noreload

# One worker consuming every queue, with the reaper's schedule (--beat); more workers may run
# beside it (the reaper is idempotent, so several schedules do no harm).
worker: venv
	@mkdir -p "$${SECUREBENCH_DATA_DIR:-var}"
	$(VENV)/bin/celery -A securebench_site worker --beat --queues=text,sandbox --loglevel=INFO

test: venv system-test
	$(VPY) -m pytest $(PYTEST_ARGS)

# Issue 6's benchmarks (bench/): each workload prints its figures, then one table for
# bench/RESULTS.md. BENCH_ARGS=--smoke runs them tiny (a check that they work, not figures).
bench: venv system-run
	$(VPY) -m bench.run_all $(BENCH_ARGS)

# Mutation proof of the defences (tests/mutation/): each catalogued mutant removes one defence
# in a scratch copy and the tests it names must then fail; writes tests/mutation/REPORT.md.
# MUTATION_ARGS=--fast runs the subset CI runs; --only ID... picks mutants.
mutation: venv system-run
	$(VPY) -m tests.mutation.run $(MUTATION_ARGS)

lint: venv
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check .

format: venv
	$(VENV)/bin/ruff check --fix . && $(VENV)/bin/ruff format .

venv: $(VENV)/.installed

$(VENV)/.installed: requirements.txt requirements-dev.txt
	@if [ -z "$(PYTHON)" ]; then echo "Python 3.12 is required (pyenv install 3.12, or apt-get install python3.12)"; exit 1; fi
	@[ -x $(VPY) ] || $(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install --quiet --disable-pip-version-check -r requirements.txt -r requirements-dev.txt
	@touch $@

# System packages: bubblewrap (sandbox) for running, plus Debian's Chromium for browser tests.
system-run:
	@command -v bwrap >/dev/null || $(MAKE) --no-print-directory apt PACKAGES="bubblewrap"

system-test: system-run
	@command -v chromium >/dev/null || $(MAKE) --no-print-directory apt PACKAGES="chromium"

apt:
	$(SUDO) apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $(PACKAGES)

clean-data:
	rm -rf var

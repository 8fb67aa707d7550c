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

.PHONY: run serve test bench mutation worker lint format venv system-run system-test sandbox-image clean-data

run: WORKER_ARGS = --concurrency=2
# `make run` gives episodes' sandboxed actions a worker of their own (ACTIONS_WORKER), so the
# main worker verifies only: an agent's step never waits behind a verification.
run: WORKER_QUEUES = text,sandbox
run: ACTIONS_WORKER = 1
run: venv system-run
	@set -e; export DEBUG=$${DEBUG:-1}; \
	mkdir -p "$${SECUREBENCH_DATA_DIR:-var}"; \
	$(MANAGE) migrate --noinput; \
	$(MANAGE) setup_site; \
	echo "Starting the web server on http://$(HOST):$(PORT)/ and the Celery workers (Ctrl-C stops them all)"; \
	$(START_WORKER); \
	$(MANAGE) runserver $(HOST):$(PORT) --noreload

# The production web server (docs/operators.md, "Web hosts"): migrations, static files collected into
# STATIC_ROOT (the data folder's static/ by default), then gunicorn with deploy/gunicorn.conf.py.
# Settings come from the environment: SECRET_KEY, ALLOWED_HOSTS, DATABASE_URL, CELERY_BROKER_URL.
serve: venv
	@set -e; data="$${SECUREBENCH_DATA_DIR:-var}"; mkdir -p "$$data"; \
	export STATIC_ROOT="$${STATIC_ROOT:-$$(cd "$$data" && pwd)/static}"; \
	$(MANAGE) migrate --noinput; \
	$(MANAGE) collectstatic --noinput --verbosity 0; \
	echo "Serving on http://$(HOST):$(PORT)/ (gunicorn; Ctrl-C stops it)"; \
	exec $(VENV)/bin/gunicorn securebench_site.wsgi:application -c deploy/gunicorn.conf.py --bind $(HOST):$(PORT)

# One worker consuming every queue, with the reaper's schedule (--beat) unless WORKER_BEAT=0:
# a site needs one schedule (the reaper is idempotent, so a second one does no harm). Other
# hosts pick their queues: WORKER_QUEUES=text for a small machine, sandbox for a Docker host.
WORKER_QUEUES ?= text,sandbox,actions
WORKER_BEAT ?= 1
worker: venv
	@set -e; mkdir -p "$${SECUREBENCH_DATA_DIR:-var}"; \
	$(START_WORKER); \
	while kill -0 $$worker 2>/dev/null; do wait $$worker || true; done

# Starts the Celery worker (with --beat) in a process group of its own — and with
# ACTIONS_WORKER set, a second one for episodes' sandboxed actions (`actions` queue, a pool of
# threads: each action mostly waits on its sandbox, and a workspace command may run for
# minutes) — and traps Ctrl-C, SIGTERM and the shell's exit to stop them with ONE SIGTERM to
# each main process: a warm shutdown, which lets the running verification (or action) finish.
# Ctrl-C again kills them at once (results come back through the lease, containers through
# the janitor, workspaces through the episode reaper). Why not the whole group: a pool child
# killed while it holds the pool's inqueue lock (an idle child holds it while blocked reading
# the next job) leaves billiard's _help_stuff_finish waiting on that lock forever at the main
# process's exit; and repeated signals (a `kill 0` that re-enters its own trap) interrupt the
# main process's shutdown at random points.
START_WORKER = set -m; \
	$(VENV)/bin/celery -A securebench_site worker $(if $(filter 1,$(WORKER_BEAT)),--beat) --queues=$(WORKER_QUEUES) --loglevel=INFO $(WORKER_ARGS) & \
	worker=$$!; actions_worker=; \
	if [ -n "$(ACTIONS_WORKER)" ]; then \
	  $(VENV)/bin/celery -A securebench_site worker --queues=actions --pool=threads --concurrency=8 --hostname=actions@%h --loglevel=INFO & \
	  actions_worker=$$!; \
	fi; \
	set +m; stopping=; stopped=; \
	stop_worker() { \
	  [ -z "$$stopped" ] || return 0; \
	  if [ -n "$$stopping" ]; then kill -KILL -- -$$worker $${actions_worker:+-$$actions_worker} 2>/dev/null || true; return 0; fi; \
	  stopping=1; \
	  echo "Stopping the Celery workers once their current work ends (Ctrl-C again: now)"; \
	  kill -TERM $$worker $$actions_worker 2>/dev/null || true; \
	  for pid in $$worker $$actions_worker; do while kill -0 $$pid 2>/dev/null; do wait $$pid || true; done; done; \
	  stopped=1; \
	}; \
	trap 'stop_worker; exit 130' INT TERM; trap 'stop_worker' EXIT

# The suite runs in TEST_WORKERS processes (pytest-xdist), a test file per process at a time
# (module-scoped sandboxes and sites are built once). Much of it waits on sandboxes, workers
# and browsers, so two processes gain even on two cores. TEST_WORKERS=0 runs it in one.
TEST_WORKERS ?= 2
test: venv system-test
	@# The suite starts hundreds of Python processes (sites, workers, commands); with
	@# PYTHONDONTWRITEBYTECODE set (as on many CI machines) each would compile the project's
	@# modules again. Compiled once here, they are read by all (a stale file is recompiled).
	@$(VPY) -m compileall -q -x '(^|/)(\.venv|examples|var)/' . >/dev/null 2>&1 || true
	$(VPY) -m pytest $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadfile) $(PYTEST_ARGS)

# Issue 6's benchmarks (bench/): each workload prints its figures, then one table for
# bench/RESULTS.md. BENCH_ARGS=--smoke runs them tiny (a check that they work, not figures).
bench: venv system-run
	$(VPY) -m bench.run_all $(BENCH_ARGS)

# Mutation proof of the defences (tests/mutation/): each catalogued mutant removes one defence
# in a scratch copy and the tests it names must then fail; writes tests/mutation/REPORT.md.
# MUTATION_ARGS=--fast runs the subset CI runs; --only ID... picks mutants.
mutation: venv system-run
	$(VPY) -m tests.mutation.run $(MUTATION_ARGS)

# Ruff, and import-linter's contracts (pyproject.toml; `make test` checks them too, tests/test_layers.py).
lint: venv
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check . && $(VENV)/bin/lint-imports --no-logo --no-cache

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

# The Docker side of the sandboxes (docs/security.md, "Sandbox backends"): an engine, the crun and gVisor (runsc)
# runtimes registered with it, and a local image with python, pytest, git and patch, built
# without a registry. SANDBOX_IMAGE names the tag; RUNTIMES= (empty) skips the runtimes.
sandbox-image:
	@bash deploy/sandbox-image.sh

clean-data:
	rm -rf var

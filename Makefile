# Two entry points (see README): `make demo` and `make test`. Everything else is a step.
# Installs come from requirements.lock (exact versions of every package, pip-tools output).
# After changing dependencies in pyproject.toml, run `make lock` and commit the new lock.
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
LOCK   := requirements.lock
# Extra pip options for the install, e.g. where no local CPU torch wheel exists:
#   make setup PIP_ARGS='--extra-index-url https://download.pytorch.org/whl/cpu'
PIP_ARGS ?=
# The dev extra names the project itself (prism-challenge[miner,...]): --unsafe-package keeps
# it out of the lock, which holds third-party packages only.
COMPILE := -m piptools compile --quiet --extra dev --strip-extras --unsafe-package prism-challenge \
	--no-emit-index-url --no-emit-find-links --output-file $(LOCK) pyproject.toml

.PHONY: setup sysdeps demo test lint lock lock-upgrade wheelhouse

# The lock pins pip itself, so the second step sees the pinned pip; pip-sync then removes
# anything an earlier lock installed that this one no longer has.
$(STAMP): pyproject.toml $(LOCK)
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q $(PIP_ARGS) -r $(LOCK)
	$(PY) -m piptools sync -q --pip-args '$(PIP_ARGS)' $(LOCK)
	$(PY) -m pip install -q --no-deps --no-build-isolation -e .
	touch $(STAMP)

sysdeps:
	@command -v bwrap >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq bubblewrap; \
	  else echo "bubblewrap is missing: sudo apt-get install bubblewrap" >&2; exit 1; fi; }

setup: sysdeps $(STAMP)

# Re-resolve pyproject.toml into the lock, keeping every pin that still fits.
lock:
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -c 'import piptools' 2>/dev/null || $(PY) -m pip install -q pip-tools
	CUSTOM_COMPILE_COMMAND='make lock' $(PY) $(COMPILE)

# The same, moving every package to the newest version that fits.
lock-upgrade:
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -c 'import piptools' 2>/dev/null || $(PY) -m pip install -q pip-tools
	CUSTOM_COMPILE_COMMAND='make lock' $(PY) $(COMPILE) --upgrade

demo: setup
	$(VENV)/bin/prism demo

# ruff, then the import layers (pyproject.toml [tool.importlinter]; docs/architecture.md).
lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports

# One pytest worker per core (up to 4): a sandboxed run is one busy process at a time, and
# work-stealing keeps both cores busy to the end. TEST_WORKERS=0 runs in this process.
TEST_WORKERS ?= auto
test: lint
	$(PY) -m pytest -q -n $(TEST_WORKERS) --maxprocesses 4 --dist worksteal

# An offline install kit for a GPU host that cannot reach a package registry: wheels of the
# locked packages for Python $(WHEEL_PY) on x86_64 Linux, plus PRISM's own wheel. Never torch
# (the host keeps its own CUDA build, within the supported range) nor the development tools.
# WHEEL_HAVE=FILE (the host's `pip list --format=freeze`) leaves out what the host already has;
# WHEEL_SKIP adds names to leave out (e.g. ray, without validator.executor ray). On the host:
#   pip install --no-index --find-links wheelhouse 'prism-challenge[validator]'
WHEEL_PY   ?= 3.12
WHEELHOUSE ?= wheelhouse
WHEEL_HAVE ?=
WHEEL_SKIP ?=
WHEEL_DEV  := torch pip setuptools ruff pip-tools import-linter grimp schemathesis \
              hypothesis-graphql graphql-core harfile jsonschema-rs
wheelhouse:
	test -x $(PY) || python3 -m venv $(VENV)
	mkdir -p $(WHEELHOUSE)
	$(PY) scripts/wheel_needs.py $(LOCK) $(if $(WHEEL_HAVE),--have $(WHEEL_HAVE)) \
	  --skip "$(WHEEL_DEV) $(WHEEL_SKIP)" > $(WHEELHOUSE)/requirements.txt
	$(PY) -m pip download -q --no-deps --only-binary=:all: --python-version $(WHEEL_PY) \
	  --implementation cp --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
	  --platform manylinux_2_27_x86_64 --platform manylinux_2_28_x86_64 \
	  --platform linux_x86_64 -d $(WHEELHOUSE) -r $(WHEELHOUSE)/requirements.txt
	$(PY) -m pip wheel -q --no-deps --no-build-isolation -w $(WHEELHOUSE) .
	@echo "wheelhouse: $$(ls $(WHEELHOUSE)/*.whl | wc -l) wheels for Python $(WHEEL_PY) in $(WHEELHOUSE)/"

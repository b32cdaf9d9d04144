# Two entry points (see README): `make demo` and `make test`. Everything else is a step.
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: setup sysdeps demo test lint

$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev,cluster]'
	touch $(STAMP)

sysdeps:
	@command -v bwrap >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq bubblewrap; \
	  else echo "bubblewrap is missing: sudo apt-get install bubblewrap" >&2; exit 1; fi; }

setup: sysdeps $(STAMP)

demo: setup
	$(VENV)/bin/prism demo

lint: setup
	$(VENV)/bin/ruff check .

test: lint
	$(PY) -m pytest -q

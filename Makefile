# Each target sets up (or updates) the local virtual environment itself.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: help demo test test-peer bench gpu lint docs clean

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-9s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[cluster,demo,test,bench]"
	touch $(STAMP)

demo: $(STAMP)  ## set up, then run the main job on a sample stack
	$(VENV)/bin/stencilpipe demo

# Dask workers the tests start (here and in their subprocesses) keep their scratch space in
# a folder of this run, removed at its end, not in the shared /tmp/dask-scratch-space.
IN_SCRATCH = scratch=$$(mktemp -d) && DASK_TEMPORARY_DIRECTORY=$$scratch
END_SCRATCH = status=$$?; rm -rf $$scratch; exit $$status

test: $(STAMP)  ## set up, then run the test suite (all but the ported peer suites)
	$(IN_SCRATCH) $(PY) -m pytest -q -n 2 -m "not peer"; $(END_SCRATCH)

test-peer: $(STAMP)  ## set up, then run scipy's and dask-image's ported filter tests
	$(IN_SCRATCH) $(PY) -m pytest -q -n 2 tests/peer; $(END_SCRATCH)

bench: $(STAMP)  ## set up, then print the benchmark ratios
	$(PY) benchmarks/run.py

gpu: $(STAMP)  ## on a machine with an NVIDIA GPU: real-CuPy tests and the GPU benchmark
	bash benchmarks/gpu.sh

lint: $(STAMP)  ## ruff over the sources and tests
	$(PY) -m pip install --quiet ruff && $(VENV)/bin/ruff check src tests benchmarks && $(VENV)/bin/ruff format --check src

$(VENV)/.installed-docs: $(STAMP) pyproject.toml
	$(PY) -m pip install --quiet -e ".[docs]"
	touch $@

docs: $(VENV)/.installed-docs  ## set up, then build the site in docs/_build/html (warnings as errors), check it in Chromium
	rm -rf docs/_build docs/auto_examples docs/api/generated
	$(PY) -m sphinx -W --keep-going -b html docs docs/_build/html
	$(PY) -m pytest -q tests/test_docs.py

clean:  ## remove the virtual environment and caches
	rm -rf $(VENV) .pytest_cache .hypothesis .mypy_cache docs/_build docs/auto_examples docs/api/generated

# Python to PTX: the course's commands.  `make lab` to learn, `make test` to check everything.
#
#   make lab     set up (if needed) and open JupyterLab on labs/
#   make test    set up (if needed), lint (ruff), run tests/, execute every notebook with nbval, check labs/ is in sync
#   make labs    regenerate labs/ from solutions/ (never overwrites a lab you edited; FORCE=1 does)
#   make bench   run the benchmarks; results go to bench/results/
#   make test-browser  open every notebook in JupyterLab in headless Chromium and check what it shows
#   make grade-setup   an nbgrader course directory built from solutions/ (GRADE_DIR, default .cache/nbgrader)
#   make install set up only: .venv with the pinned packages, plus dot / llc / gcc when missing
#   make clean   remove caches and results (keeps .venv); `make distclean` removes .venv too

SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
PYTHON ?= $(shell command -v python3.11 || command -v python3)
STAMP := $(VENV)/.installed
NPROC := $(shell nproc 2>/dev/null || echo 2)
JOBS ?= $(if $(filter 1,$(NPROC)),0,$(NPROC))
LAB_ARGS ?=
LAB_DIR ?= labs
FORCE ?=

# Compiler caches live in the checkout, so a fresh clone measures a cold run and `make clean` clears them.
export TORCHINDUCTOR_CACHE_DIR := $(CURDIR)/.cache/inductor
export TRITON_CACHE_DIR := $(CURDIR)/.cache/triton
export PYTHONHASHSEED := 0
# Tests and benches draw into files (Agg); the Jupyter server must not inherit that, or ipykernel
# keeps Agg instead of its inline backend and no figure ever appears in the notebook.
test-unit test-notebooks bench grade-setup: export MPLBACKEND := Agg

.PHONY: lab test labs bench install tools clean distclean lint test-unit test-notebooks test-browser check-labs grade-setup

install: $(STAMP) tools

$(STAMP): pyproject.toml
	@test -x $(PY) || { echo "creating $(VENV) with $(PYTHON)"; $(PYTHON) -m venv $(VENV); }
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

# System tools: installed through apt-get when missing and we are root; otherwise we say how.
tools:
	@$(MAKE) --no-print-directory _tool BIN=dot PKG=graphviz WHY="graphs are shown as DOT text without it"
	@$(MAKE) --no-print-directory _tool BIN=opt-19 PKG=llvm-19 CONDA=llvm-tools HAVE=llvm \
	  WHY="Module 2's single passes licm / loop-vectorize / slp-vectorize and its llc back-end walkthrough are skipped without it"
	@$(MAKE) --no-print-directory _tool BIN=gcc PKG=gcc WHY="Inductor's C++ backend and Module 6 need it"
	@$(MAKE) --no-print-directory _tool BIN=clang-19 PKG=clang-19 WHY="06c's clang loop-vectoriser comparison is skipped without it"
	@$(MAKE) --no-print-directory _tool BIN=/usr/lib/llvm-19/include/llvm/Passes/PassPlugin.h HAVE=file PKG=llvm-19-dev WHY="02b's C++ pass plugin (built against LLVM 19's headers) is skipped without it"
	@$(MAKE) --no-print-directory _tool BIN=ld.lld-19 PKG=lld-19 WHY="02b's AMDGPU .hsaco link is skipped without it"
	@$(MAKE) --no-print-directory _tool BIN=aarch64-linux-gnu-gcc PKG=gcc-aarch64-linux-gnu WHY="06c's SVE listing is skipped without it"
	@$(MAKE) --no-print-directory _tool BIN=chromium PKG=chromium WHY="make test-browser (notebooks rendered in a real browser) is skipped without it"

# LLVM 19 or newer under any of the names course_lib.llvm.tools looks for (opt-20, /usr/lib/llvm-21/bin/opt...)
HAVE_LLVM := ls /usr/lib/llvm-{19..30}/bin/opt >/dev/null 2>&1 || compgen -c | grep -qE '^opt-(19|[2-9][0-9])$$' || \
  { command -v opt >/dev/null && opt --version | grep -qE 'LLVM version (19|[2-9][0-9])\.'; }
HAVE_CMD = $(if $(filter llvm,$(HAVE)),$(HAVE_LLVM),$(if $(filter file,$(HAVE)),test -e $(BIN),command -v $(BIN) >/dev/null))
CONDA ?= $(PKG)

_tool:
	@if ! { $(HAVE_CMD); }; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing $(PKG) (for $(BIN))"; \
	    { [ -n "$$(ls /var/lib/apt/lists 2>/dev/null | grep -v lock)" ] || apt-get update -qq; } && \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(PKG) >/dev/null || \
	    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(PKG) >/dev/null; }; \
	  else \
	    echo "note: '$(BIN)' is missing ($(WHY)). Install it with: sudo apt-get install $(PKG)  (or: conda install -c conda-forge $(CONDA))"; \
	  fi; \
	fi

# Root (a container, Binder, CI) must say --allow-root; nobody else needs it.
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root)

# The course's JupyterLab settings (news and update checks off) go where JupyterLab reads overrides.
LAB_SETTINGS := $(VENV)/share/jupyter/lab/settings/overrides.json
$(LAB_SETTINGS): jupyter-settings/overrides.json $(STAMP)
	@mkdir -p $(dir $@) && cp $< $@

lab: install $(LAB_SETTINGS)
	env -u MPLBACKEND $(VENV)/bin/jupyter lab --notebook-dir=$(LAB_DIR) $(ROOT_FLAG) $(LAB_ARGS)

labs: $(STAMP)
	$(PY) -m course_lib.labgen $(if $(FORCE),--force)

check-labs: $(STAMP)
	$(PY) -m course_lib.labgen --check

test-unit: install
	$(PY) -m pytest -q -n $(JOBS) tests --ignore=tests/browser

# JupyterLab started as `make lab` starts it, driven by Playwright through Debian's chromium
# (looked up when the recipe runs: `install` may just have installed it).
test-browser: install $(LAB_SETTINGS)
	@chromium="$${CHROMIUM:-$$(command -v chromium || command -v chromium-browser)}"; \
	if [ -z "$$chromium" ]; then echo "note: chromium is missing, so the browser test is skipped (sudo apt-get install chromium)"; \
	else env -u MPLBACKEND COURSE_BROWSER="$$chromium" $(PY) -m pytest -q -n 0 tests/browser; fi

# Solutions must pass every check; labs must run end to end with exercises "not attempted".
test-notebooks: install
	COURSE_CHECK_STRICT=solutions $(PY) -m pytest -q -n $(JOBS) --dist loadfile --nbval-lax --nbval-cell-timeout=600 solutions
	COURSE_CHECK_STRICT=labs $(PY) -m pytest -q -n $(JOBS) --dist loadfile --nbval-lax --nbval-cell-timeout=600 labs

# ruff's lint rules and formatter (pyproject.toml's [tool.ruff]); notebooks and recorded data are left out.
lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

test: install
	@start=$$(date +%s); \
	$(MAKE) --no-print-directory lint && \
	$(MAKE) --no-print-directory check-labs && \
	$(MAKE) --no-print-directory test-unit && \
	$(MAKE) --no-print-directory test-notebooks && \
	$(MAKE) --no-print-directory test-browser; rc=$$?; \
	echo "make test: $$(( $$(date +%s) - start )) s, exit $$rc"; exit $$rc

bench: install
	$(PY) bench/run.py $(BENCH)

# nbgrader: source/ from solutions/ (cells tagged), release/ by `nbgrader generate_assignment`.
GRADE_DIR ?= .cache/nbgrader
grade-setup: $(STAMP)
	$(PY) tools/grade_setup.py --course-dir $(GRADE_DIR)

clean:
	rm -rf .cache .pytest_cache .hypothesis bench/results
	find . -name __pycache__ -not -path './$(VENV)/*' -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV) *.egg-info

# Set-up and runs: `make smoke` (quick start), `make reports`, `make test` (see README.md).
PYTHON      ?= python3
VENV        ?= .venv
PY          := $(VENV)/bin/python
# The CPU build of torch: from a local wheel folder where pip's config names one, else from
# PyTorch's CPU index (PyPI's plain torch is the multi-GB CUDA build). On a CUDA machine:
# `make install TORCH_INDEX=https://pypi.org/simple` (PyPI's CUDA build of the same version).
TORCH_SPEC  ?= torch==2.13.0
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu
# Every other package: exact versions with sha256 hashes (Python 3.11, linux x86_64).
LOCK        ?= requirements/cpu.lock.txt
UV_VERSION  ?= 0.13.9
UV          := $(CURDIR)/.cache/uv-tool/bin/uv
# Extra arguments for `make lock`, e.g. LOCK_ARGS=--upgrade or LOCK_ARGS="--upgrade-package numpy".
LOCK_ARGS   ?=
PROFILE     ?= cpu
# Notebooks at once, e.g. WORKERS=1 (one after another, in this process); empty: the
# profile's `workers` (cpu: 2, a local Dask cluster), else 1.
WORKERS     ?=
RUN_ARGS    ?=
WORDNET_CACHE ?= $(CURDIR)/.cache/wordnet

.PHONY: install git-filter lock reports smoke test test-all lint wordnet lab clean-venv

# torch first (its own requirements may come in at other versions), then the lock overrides every
# other package with its exact, hash-checked version (--no-deps: the lock is complete), then the
# package itself without dependencies; `pip check` fails the install if torch and the lock disagree.
$(VENV)/.installed: pyproject.toml $(LOCK)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q --no-index --no-deps "$(TORCH_SPEC)" 2>/dev/null || \
	  $(PY) -m pip install -q "$(TORCH_SPEC)" --index-url $(TORCH_INDEX)
	$(PY) -m pip install -q --require-hashes --no-deps -r $(LOCK)
	$(PY) -m pip install -q --no-deps --no-build-isolation -e .
	$(PY) -m pip check
	$(PY) -m ipykernel install --sys-prefix --name python3 --display-name "Python 3" >/dev/null
	touch $@

install: $(VENV)/.installed git-filter wordnet

# nbstripout as the git filter of the tracked notebooks (.gitattributes): git stores
# notebooks/*.ipynb without outputs, execution counts, language_info or editor state, while the
# working copy keeps them; a notebook outside notebooks/ is stored as it is. `required`: with the
# venv gone, `git add` of a notebook fails rather than store its outputs.
NBSTRIPOUT := '$(abspath $(VENV))/bin/nbstripout' --keep-id --extra-keys 'metadata.language_info \
  metadata.papermill cell.metadata.papermill cell.metadata.jupyter cell.metadata.editable \
  cell.metadata.deletable cell.metadata.trusted'
git-filter:
	@if git rev-parse --git-dir >/dev/null 2>&1; then \
	  git config filter.nbstripout.clean "$(NBSTRIPOUT)" && \
	  git config filter.nbstripout.smudge cat && \
	  git config filter.nbstripout.required true && \
	  git config diff.ipynb.textconv "$(NBSTRIPOUT) -t" && echo "nbstripout: git filter set"; \
	else echo "not a git checkout: no nbstripout filter"; fi

# Regenerate the lock from pyproject.toml with uv (kept in .cache, not in the project venv). Versions
# already in the lock are kept unless LOCK_ARGS says --upgrade; torch stays out (see
# requirements/overrides.txt) while its own requirements (requirements/torch-cpu.in) are locked.
# Python 3.11.5 is the floor of the locked set (soupsieve 4.1.3 requires it).
lock:
	test -x $(UV) && $(UV) --version | grep -q " $(UV_VERSION)" || \
	  { $(PYTHON) -m venv $(CURDIR)/.cache/uv-tool && \
	    $(CURDIR)/.cache/uv-tool/bin/pip install -q "uv==$(UV_VERSION)"; }
	$(UV) pip compile -q pyproject.toml requirements/torch-cpu.in --extra dev --extra dask \
	  --override requirements/overrides.txt --generate-hashes \
	  --python-version 3.11.5 --python-platform x86_64-manylinux_2_28 \
	  --custom-compile-command "make lock" $(LOCK_ARGS) -o $(LOCK)

# WordNet for METEOR: Debian's wordnet-base, unpacked into .cache (saf_utils.metrics finds it
# there; or set WORDNET_DIR to any WordNet 3.0 dict folder). Root only to refresh apt lists.
wordnet:
	@if [ -f /usr/share/wordnet/data.noun ] || [ -f $(WORDNET_CACHE)/usr/share/wordnet/data.noun ]; then \
	  echo "WordNet found"; \
	elif command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null; then \
	  mkdir -p $(WORDNET_CACHE) && cd $(WORDNET_CACHE) && \
	  { apt-get download wordnet-base >/dev/null 2>&1 || \
	    { [ "$$(id -u)" = 0 ] && apt-get update -qq >/dev/null 2>&1 && \
	      apt-get download wordnet-base >/dev/null 2>&1; }; } && \
	  dpkg-deb -x wordnet-base_*.deb . && rm -f wordnet-base_*.deb && \
	  echo "WordNet unpacked into $(WORDNET_CACHE)" || \
	  echo "WARNING: could not fetch wordnet-base; METEOR will raise until WORDNET_DIR is set"; \
	else echo "WARNING: no apt-get; METEOR will raise until WORDNET_DIR is set"; fi

reports: install
	$(PY) -m notebook_reports --profile $(PROFILE) $(if $(WORKERS),--workers $(WORKERS)) $(RUN_ARGS)

smoke: PROFILE = smoke
smoke: reports

# What a researcher runs after a change: the fast loop and one smoke run of every notebook with
# its page checks. test-all (CI, .ci/run) adds the gpu rehearsal, the recipe runs, the browser.
test: install
	$(PY) -m pytest -q -m "not slow or smoke"

test-all: install
	$(PY) -m pytest -q

lint: install
	$(VENV)/bin/ruff check saf_utils notebook_reports tests benchmarks

# JupyterLab on notebooks/ (saves keep their outputs; git stores them stripped: git-filter). As
# root (a container), Jupyter refuses to start without --allow-root.
lab: install
	$(VENV)/bin/jupyter lab $(if $(filter 0,$(shell id -u)),--allow-root) notebooks/

clean-venv:
	rm -rf $(VENV)

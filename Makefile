# Two commands do all the set-up: `make reports` and `make test` (see README.md).
PYTHON      ?= python3
VENV        ?= .venv
PY          := $(VENV)/bin/python
# The CPU build of torch (pip finds it in a local wheel folder where there is one);
# override for a CUDA machine, e.g. `make TORCH_SPEC=torch install`.
TORCH_SPEC  ?= torch==2.13.0
PROFILE     ?= cpu
RUN_ARGS    ?=
WORDNET_CACHE ?= $(CURDIR)/.cache/wordnet

.PHONY: install reports smoke test lint wordnet lab clean-venv

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "$(TORCH_SPEC)"
	$(PY) -m pip install -q -e ".[dev]"
	$(PY) -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (saf_utils)" >/dev/null
	touch $@

install: $(VENV)/.installed wordnet

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
	$(PY) -m saf_utils.run --profile $(PROFILE) $(RUN_ARGS)

smoke: PROFILE = smoke
smoke: reports

test: install
	$(PY) -m pytest -q

lint: install
	$(VENV)/bin/ruff check saf_utils tests benchmarks

lab: install
	$(VENV)/bin/jupyter lab notebooks/

clean-venv:
	rm -rf $(VENV)

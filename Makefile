# Two commands do all the set-up: `make reports` and `make test` (see README.md).
PYTHON      ?= python3
VENV        ?= .venv
PY          := $(VENV)/bin/python
# The CPU build of torch (pip finds it in a local wheel folder where there is one);
# override for a CUDA machine, e.g. `make TORCH_SPEC=torch install`.
TORCH_SPEC  ?= torch==2.13.0
PROFILE     ?= cpu
RUN_ARGS    ?=
WORDNET_DIR ?= $(CURDIR)/.cache/wordnet

.PHONY: install reports smoke test lint wordnet lab clean-venv

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "$(TORCH_SPEC)"
	$(PY) -m pip install -q -e ".[dev]"
	$(PY) -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (saf_utils)" >/dev/null
	touch $@

install: $(VENV)/.installed wordnet

# WordNet for METEOR, from Debian's wordnet-base package, unpacked into .cache (no root needed).
wordnet:
	@if [ -f /usr/share/wordnet/data.noun ] || [ -f $(WORDNET_DIR)/usr/share/wordnet/data.noun ]; then \
	  echo "WordNet found"; \
	elif command -v apt-get >/dev/null; then \
	  mkdir -p $(WORDNET_DIR) && cd $(WORDNET_DIR) && apt-get download wordnet-base >/dev/null && \
	  dpkg-deb -x wordnet-base_*.deb . && echo "WordNet unpacked into $(WORDNET_DIR)"; \
	else echo "No WordNet: METEOR will raise until WORDNET_DIR points to WordNet 3.0 files"; fi

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

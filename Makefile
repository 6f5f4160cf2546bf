# Two entry points for a fresh machine: `make demo` and `make test`. Both set up .venv first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
# torch is pinned (==2.13.0) so pip takes the CPU wheel, never the multi-GB CUDA build (docs/torch.md)
EXTRAS := dev,gurobi,minizinc,pyomo,cvxpy,torch,hf,bench
APT_PACKAGES := minizinc coinor-cbc glpk-utils
DEMO_GRAPH := examples/graphs/unet_train.json

.PHONY: setup demo test lint bench clean

setup: $(STAMP)

$(STAMP): pyproject.toml Makefile
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[$(EXTRAS)]'
	command -v minizinc >/dev/null && command -v cbc >/dev/null && command -v glpsol >/dev/null \
		|| { command -v apt-get >/dev/null && apt-get update -qq \
		&& apt-get install -y -qq --no-install-recommends $(APT_PACKAGES) >/dev/null; } \
		|| echo "warning: could not apt-get install $(APT_PACKAGES); the tests that need them will skip"
	$(BIN)/python -m remat_models.heuristics.warmup
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/remat graph info $(DEMO_GRAPH)
	$(BIN)/remat compare $(DEMO_GRAPH) --budget 80% --time-limit 60 \
		--methods checkpoint-all,chen-sqrtn,chen-greedy,knapsack,fastsa,checkmate/highs,moccasin/cpsat,auto

test: $(STAMP)
	$(BIN)/ruff check remat_models tests benchmarks
	$(BIN)/lint-imports  # the layers of docs/architecture.md (contracts in pyproject.toml)
	$(BIN)/python -m pytest -q -n 2 --dist worksteal --durations=25  # two workers; time-limited tests run alone (tests/conftest.py)

bench: $(STAMP)
	$(BIN)/python benchmarks/simulate_bench.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache

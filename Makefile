# Two commands for a newcomer: `make demo` and `make test`. Both create .venv on first use.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

export PREFECT_SERVER_ANALYTICS_ENABLED := false
export DO_NOT_TRACK := 1
export PREFECT_HOME ?= $(CURDIR)/.arcticqa/prefect
export PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS ?= 90

.PHONY: install demo test test-fast lint typecheck bench clean

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PY) -m venv $(VENV) || python3 -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -c constraints.txt -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/arcticqa demo

lint: $(STAMP)
	$(BIN)/ruff check arcticqa flows tests bench

typecheck: $(STAMP)
	$(BIN)/mypy arcticqa flows

test: lint typecheck
	$(BIN)/python -m pytest -q

test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow"

bench: $(STAMP)
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) .arcticqa out .pytest_cache .mypy_cache .ruff_cache

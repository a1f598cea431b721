# Two commands for a newcomer: `make demo` and `make test`. Both create .venv on first use.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

export PREFECT_SERVER_ANALYTICS_ENABLED := false
export DO_NOT_TRACK := 1
export PREFECT_HOME ?= $(CURDIR)/.arcticqa/prefect

.PHONY: install demo test test-fast lint typecheck bench clean fixtures

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PY) -m venv $(VENV) || python3 -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -c constraints.txt -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

# the shared Prefect server starts first, without waiting for it: its start-up overlaps the demo's
# own (docs/performance.md, row 7); the demo's build waits for it if it must
demo: $(STAMP)
	$(BIN)/arcticqa prefect start --no-wait
	$(BIN)/arcticqa demo

lint: $(STAMP)
	$(BIN)/ruff check arcticqa flows tests bench
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy arcticqa flows

# pytest-xdist: one worker process per core (`make test PYTEST_WORKERS=0` runs the suite in this
# process); --dist loadscope keeps a module's tests on one worker, so a module-scoped fixture (a
# demo build, a server) runs once
PYTEST_WORKERS ?= auto
PYTEST_PARALLEL := -n $(PYTEST_WORKERS) --dist loadscope

test: lint typecheck
	$(BIN)/python -m pytest -q $(PYTEST_PARALLEL)

test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow" $(PYTEST_PARALLEL)

bench: $(STAMP)
	$(BIN)/python -m bench

# The LaTeX fixture papers of tests/data/journal_layouts (CI uses the committed PDFs; this needs
# Debian's texlive-publishers, texlive-latex-extra, texlive-science and cm-super). Two passes for
# references; a fixed SOURCE_DATE_EPOCH keeps \today and the PDF dates stable.
LAYOUTS := tests/data/journal_layouts
TEX_ENV := SOURCE_DATE_EPOCH=1735689600 FORCE_SOURCE_DATE=1
fixtures:
	@command -v pdflatex >/dev/null || { echo "make fixtures: pdflatex not found (apt-get install texlive-publishers texlive-latex-extra texlive-science cm-super)"; exit 2; }
	cd $(LAYOUTS) && for f in *.tex; do \
	  $(TEX_ENV) pdflatex -interaction=nonstopmode -halt-on-error $$f >/dev/null && \
	  $(TEX_ENV) pdflatex -interaction=nonstopmode -halt-on-error $$f >/dev/null || { echo "pdflatex failed on $$f (see $(LAYOUTS)/$${f%.tex}.log)"; exit 1; }; \
	done; rm -f *.aux *.log *.out *.spl *.bbl *.blg *.abs *Notes.bib

clean:
	rm -rf $(VENV) .arcticqa out .pytest_cache .mypy_cache .ruff_cache

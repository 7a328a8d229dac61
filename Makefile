# Every target installs what it needs into .venv; nothing is assumed installed.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint bench soak clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python scripts/demo.py

test: $(STAMP)
	$(BIN)/python -m pytest -q -n 2

lint: $(STAMP)
	$(BIN)/ruff check agent_journal tests scripts
	$(BIN)/mypy agent_journal

bench: $(STAMP)
	$(BIN)/python scripts/bench.py

soak: $(STAMP)
	$(BIN)/python -m pytest -q -m soak

clean:
	rm -rf $(VENV)

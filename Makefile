# Every target installs what it needs into .venv; nothing is assumed installed.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

DEV := $(VENV)/.dev-installed

.PHONY: demo test lint bench soak clean browser clients

# The package alone (what `make demo` needs). compat mode: a plain path entry, not an
# import hook that costs every process pathlib at start-up; compileall because this
# machine sets PYTHONDONTWRITEBYTECODE, and the hook path should not compile itself.
$(STAMP): pyproject.toml
	@$(PY) -m venv $(VENV)
	@$(BIN)/pip install -qq --disable-pip-version-check -e . \
		--config-settings editable_mode=compat
	@$(BIN)/python -m compileall -q agent_journal
	@touch $(STAMP)

# The development toolchain on top (tests, lint, bench): only what needs it installs it.
$(DEV): $(STAMP) pyproject.toml
	$(BIN)/pip install --quiet --disable-pip-version-check --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]' --config-settings editable_mode=compat
	$(BIN)/python -m compileall -q agent_journal
	touch $(DEV)

demo: $(STAMP)
	@$(BIN)/python scripts/demo.py

# The HTML timeline test opens its page in headless Chromium (Debian's package).
browser:
	@command -v chromium >/dev/null 2>&1 || (apt-get update -qq && apt-get install -y -qq chromium)

# The real agent clients the end-to-end suite drives (tests/test_real_clients*.py), pinned,
# from npm into a cache inside the repo (gitignored); installed only when missing. Bump a
# version here to test against a newer client: a release that breaks capture fails the suite.
CLIENTS := .cache/clients
CLAUDE_CODE_VERSION := 2.1.337
CODEX_VERSION := 0.171.0
CLIENTS_STAMP := $(CLIENTS)/.installed-claude-code-$(CLAUDE_CODE_VERSION)-codex-$(CODEX_VERSION)

clients: $(CLIENTS_STAMP)

$(CLIENTS_STAMP):
	@command -v npm >/dev/null 2>&1 || (apt-get update -qq && apt-get install -y -qq nodejs npm)
	@rm -rf $(CLIENTS) && mkdir -p $(CLIENTS)
	npm install --prefix $(CLIENTS) --no-audit --no-fund --loglevel=error \
		@anthropic-ai/claude-code@$(CLAUDE_CODE_VERSION) @openai/codex@$(CODEX_VERSION)
	@# Claude Code's postinstall puts the native binary in place; an npm that skipped it:
	@$(CLIENTS)/node_modules/.bin/claude --version >/dev/null 2>&1 || \
		(cd $(CLIENTS)/node_modules/@anthropic-ai/claude-code && node install.cjs)
	$(CLIENTS)/node_modules/.bin/claude --version
	$(CLIENTS)/node_modules/.bin/codex --version
	@touch $@

test: $(DEV) browser clients
	$(BIN)/python -m compileall -q agent_journal
	$(BIN)/python -m pytest -q -n 2

lint: $(DEV)
	$(BIN)/ruff check agent_journal tests scripts
	$(BIN)/mypy agent_journal

bench: $(DEV) clients
	$(BIN)/python -m compileall -q agent_journal
	$(BIN)/python scripts/bench.py $(BENCH)

# The long concurrency runs, and every Hypothesis test with many more, random, examples
# (the "soak" profile in tests/conftest.py; CI and `make test` use the fixed "ci" one).
soak: $(DEV)
	HYPOTHESIS_PROFILE=soak $(BIN)/python -m pytest -q -m 'soak or hypothesis'

clean:
	rm -rf $(VENV)

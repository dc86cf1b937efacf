# cca: build, test, install, bench. `make test` is the full test suite; CI runs it (.ci/run).

PREFIX ?= $(HOME)/.local
BUILD := build
CARGO ?= cargo

# The real engines and the third-party engine the tests drive, pinned.
CLAUDE_CODE_VERSION := 2.1.329
GEMINI_CLI_VERSION := 0.61.0
LLM_VERSION := 0.36
LLM_ECHO_VERSION := 0.5
CARGO_FUZZ_VERSION := 0.13.2
# The ACP clients the tests drive `cca acp` with.
ACPX_VERSION := 0.19.1
ACP_SDK_VERSION := 2.4.0
# The MCP client the tests drive `cca mcp` with: the official TypeScript SDK.
MCP_SDK_VERSION := 1.32.2
# The JSON Schema validator the ACP tests check every message with.
AJV_VERSION := 8.17.1
# ripgrep, for the side-by-side with `cca grep` in `make bench`.
RIPGREP_VERSION := 15.2.0
# codex, whose rollout files `cca import codex` is tested with (a native binary in the npm package).
CODEX_VERSION := 0.169.0
# The SSH server `cca sync` is tested over (asyncssh, from PyPI; the client is the system's ssh).
ASYNCSSH_VERSION := 2.24.1
# Seconds each fuzz target runs in `make test`: the transcript's four, and the four import
# parsers' (shorter, to keep CI's time bounded).
FUZZ_SECONDS ?= 60
FUZZ_IMPORT_SECONDS ?= 30

ENGINES := $(BUILD)/engines
LLM_VENV := $(BUILD)/llm-venv
SSHD_VENV := $(BUILD)/sshd-venv
TOOLS := $(BUILD)/tools
ACP_CLIENTS := $(BUILD)/acp-clients
MCP_CLIENTS := $(BUILD)/mcp-clients
CODEX := $(BUILD)/codex
ACP_SCHEMA := $(BUILD)/acp-schema
CARGO_FUZZ := $(abspath $(TOOLS))/bin/cargo-fuzz
RIPGREP := $(abspath $(TOOLS))/bin/rg

# Tests find the real programs here.
export CCA_TEST_CLAUDE := $(abspath $(ENGINES))/node_modules/.bin/claude
export CCA_TEST_GEMINI := $(abspath $(ENGINES))/node_modules/.bin/gemini
export CCA_TEST_LLM := $(abspath $(LLM_VENV))/bin/llm
export CCA_TEST_ACPX := $(abspath $(ACP_CLIENTS))/node_modules/.bin/acpx
export CCA_TEST_ACP_CLIENTS := $(abspath $(ACP_CLIENTS))
export CCA_TEST_MCP_CLIENTS := $(abspath $(MCP_CLIENTS))
export CCA_TEST_CODEX := $(abspath $(CODEX))/node_modules/.bin/codex
export CCA_TEST_ACP_SCHEMA := $(abspath $(ACP_SCHEMA))
export CCA_TEST_SSHD_PYTHON := $(abspath $(SSHD_VENV))/bin/python

MSRV := $(shell sed -n 's/^rust-version = "\(.*\)"/\1/p' Cargo.toml)

.PHONY: msrv docs build test engines llm acp-clients acp-schema mcp-clients codex sshd fuzz install uninstall bench clean

build:
	$(CARGO) build --release --locked

## The full test suite: unit, property and integration tests, the real engines, and fuzzing.
test: engines llm acp-clients acp-schema mcp-clients codex sshd
	$(CARGO) test --locked
	$(MAKE) fuzz

## The declared minimum Rust (Cargo.toml's rust-version) builds everything; the docs build
## without a warning.
msrv:
	rustup toolchain install $(MSRV) --profile minimal
	cargo +$(MSRV) check --all-targets --locked --target-dir target/msrv
docs:
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --no-deps --locked

## Coverage-guided fuzzing of the transcript parser, the framing and the ACP wire reader,
## FUZZ_SECONDS per target, and of the import parsers, FUZZ_IMPORT_SECONDS each, starting
## from the committed regression corpus in fuzz/seeds/ (for import, files the real programs
## wrote).
fuzz: $(CARGO_FUZZ)
	cd fuzz && for target in parse round_trip framing wire \
			import_claude import_gemini import_codex import_llm; do \
		case $$target in import_*) seconds=$(FUZZ_IMPORT_SECONDS);; *) seconds=$(FUZZ_SECONDS);; esac; \
		mkdir -p corpus/$$target && \
		$(CARGO_FUZZ) run --sanitizer none $$target corpus/$$target seeds/$$target -- \
			-max_total_time=$$seconds -print_final_stats=1 || exit 1; \
	done

$(CARGO_FUZZ):
	$(CARGO) install --locked --quiet cargo-fuzz --version $(CARGO_FUZZ_VERSION) --root $(TOOLS)

## The real `claude` and `gemini` programs from npm, into build/ (nothing global).
engines: $(ENGINES)/.installed
$(ENGINES)/.installed:
	mkdir -p $(ENGINES)
	npm install --prefix $(ENGINES) --no-save --no-audit --no-fund --loglevel=error \
		@anthropic-ai/claude-code@$(CLAUDE_CODE_VERSION) @google/gemini-cli@$(GEMINI_CLI_VERSION)
	$(CCA_TEST_CLAUDE) --version
	$(CCA_TEST_GEMINI) --version
	touch $@

## The ACP clients from npm, into build/ (nothing global): `acpx`, a headless command-line
## client, and the official TypeScript SDK that tests/acp/client.mjs drives cca with.
acp-clients: $(ACP_CLIENTS)/.installed
$(ACP_CLIENTS)/.installed:
	mkdir -p $(ACP_CLIENTS)
	npm install --prefix $(ACP_CLIENTS) --no-save --no-audit --no-fund --loglevel=error \
		acpx@$(ACPX_VERSION) @agentclientprotocol/sdk@$(ACP_SDK_VERSION)
	$(CCA_TEST_ACPX) --version
	touch $@

## ajv from npm, into build/ (nothing global): tests/acp/client.mjs checks every message
## `cca acp` sends against the ACP JSON schemas the SDK ships.
acp-schema: $(ACP_SCHEMA)/.installed
$(ACP_SCHEMA)/.installed:
	mkdir -p $(ACP_SCHEMA)
	npm install --prefix $(ACP_SCHEMA) --no-save --no-audit --no-fund --loglevel=error \
		ajv@$(AJV_VERSION)
	touch $@

## The official MCP TypeScript SDK from npm, into build/ (nothing global), whose client
## tests/mcp/client.mjs drives `cca mcp` with.
mcp-clients: $(MCP_CLIENTS)/.installed
$(MCP_CLIENTS)/.installed:
	mkdir -p $(MCP_CLIENTS)
	npm install --prefix $(MCP_CLIENTS) --no-save --no-audit --no-fund --loglevel=error \
		@modelcontextprotocol/sdk@$(MCP_SDK_VERSION)
	touch $@

## codex from npm, into build/ (nothing global), for the rollout files `cca import codex` reads.
codex: $(CODEX)/.installed
$(CODEX)/.installed:
	mkdir -p $(CODEX)
	npm install --prefix $(CODEX) --no-save --no-audit --no-fund --loglevel=error \
		@openai/codex@$(CODEX_VERSION)
	$(CCA_TEST_CODEX) --version
	touch $@

## asyncssh from PyPI, in a virtual environment under build/: the SSH server on a loopback port
## that tests/cli/sync.rs syncs through (tests/sync/sshd.py), with the system's ssh and git.
sshd: $(SSHD_VENV)/.installed
$(SSHD_VENV)/.installed:
	python3 -m venv $(SSHD_VENV)
	$(SSHD_VENV)/bin/pip install --quiet --disable-pip-version-check asyncssh==$(ASYNCSSH_VERSION)
	$(SSHD_VENV)/bin/python -c "import asyncssh"
	touch $@

## `llm` from PyPI with its echo plugin, in a virtual environment under build/.
llm: $(LLM_VENV)/.installed
$(LLM_VENV)/.installed:
	python3 -m venv $(LLM_VENV)
	$(LLM_VENV)/bin/pip install --quiet --disable-pip-version-check \
		llm==$(LLM_VERSION) llm-echo==$(LLM_ECHO_VERSION)
	touch $@

## Installs cca, its shell completions and its man page under PREFIX (default ~/.local).
install:
	$(CARGO) install --locked --path . --root $(PREFIX) --force
	install -d $(PREFIX)/share/bash-completion/completions $(PREFIX)/share/zsh/site-functions \
		$(PREFIX)/share/fish/vendor_completions.d $(PREFIX)/share/man/man1
	install -m 644 completions/cca.bash $(PREFIX)/share/bash-completion/completions/cca
	install -m 644 completions/_cca $(PREFIX)/share/zsh/site-functions/_cca
	install -m 644 completions/cca.fish $(PREFIX)/share/fish/vendor_completions.d/cca.fish
	$(PREFIX)/bin/cca man > $(PREFIX)/share/man/man1/cca.1
	@echo
	@echo "Installed $(PREFIX)/bin/cca. What it finds for a first question (cca doctor):"
	@$(PREFIX)/bin/cca doctor || echo "cca: install an engine (see the problems above), then ask with: cca search \"...\""

uninstall:
	$(CARGO) uninstall --root $(PREFIX) cca
	rm -f $(PREFIX)/share/bash-completion/completions/cca $(PREFIX)/share/zsh/site-functions/_cca \
		$(PREFIX)/share/fish/vendor_completions.d/cca.fish $(PREFIX)/share/man/man1/cca.1

## Benchmarks: prints markdown; BENCHMARKS.md holds a run of it.
bench: engines llm codex $(RIPGREP)
	$(CARGO) build --release --locked --examples
	CCA_BENCH_RG=$(RIPGREP) $(CARGO) bench --locked --bench bench

$(RIPGREP):
	$(CARGO) install --locked --quiet ripgrep --version $(RIPGREP_VERSION) --root $(TOOLS)

clean:
	$(CARGO) clean
	rm -rf $(BUILD)

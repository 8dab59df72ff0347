# contextd — the two commands a fresh machine needs: `make run` and `make test`.
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
PG_HOST ?= 127.0.0.1
PG_PORT ?= 5432
export CTX_TEST_POSTGRES_URL ?= postgresql+psycopg://postgres@$(PG_HOST):$(PG_PORT)/postgres

.PHONY: install lock run test lint typecheck pytest typescript postgres bench fuzz load stall openapi client-models clean

PY_PACKAGES := -e '.[dev,bench,chart]' -e 'clients/python[agents,langchain,pydantic-ai]'

# Every dependency at the version pinned in constraints.txt, so that a fresh machine installs what
# was last tested together; uv installs them (the same packages as pip, in a quarter of the time),
# compiled to bytecode as pip does, so that no test process pays for it.
$(STAMP): pyproject.toml clients/python/pyproject.toml constraints.txt
	python3 -m venv $(VENV)
	$(BIN)/pip install --quiet -c constraints.txt uv
	$(BIN)/uv pip install --quiet --compile-bytecode --python $(BIN)/python -c constraints.txt $(PY_PACKAGES)
	touch $(STAMP)

install: $(STAMP)

# Resolves every dependency afresh (the newest releases the pyproject files allow) and pins them;
# run `make test` before committing the new constraints.txt.
lock:
	rm -rf .venv-lock
	python3 -m venv .venv-lock
	.venv-lock/bin/pip install --quiet --upgrade pip
	.venv-lock/bin/pip install --quiet uv $(PY_PACKAGES)
	head -n 1 constraints.txt > constraints.new
	.venv-lock/bin/pip freeze --exclude-editable >> constraints.new
	mv constraints.new constraints.txt
	rm -rf .venv-lock

# `make run PORT=8201 HOST=0.0.0.0`; unset, CTX_HOST and CTX_PORT (else 127.0.0.1:8000) hold.
run: $(STAMP)
	$(BIN)/contextd migrate
	$(BIN)/contextd serve $(if $(HOST),--host $(HOST)) $(if $(PORT),--port $(PORT))

postgres:
	@pg_isready -q -h $(PG_HOST) -p $(PG_PORT) || \
		pg_ctlcluster --skip-systemctl-redirect $$(ls /etc/postgresql | head -n1) main start
	@for i in $$(seq 1 30); do pg_isready -q -h $(PG_HOST) -p $(PG_PORT) && exit 0; sleep 1; done; \
		echo "PostgreSQL did not come up on $(PG_HOST):$(PG_PORT)"; exit 1

lint: $(STAMP)
	$(BIN)/ruff check app tests bench migrations clients examples
	$(BIN)/ruff format --check app tests bench migrations clients examples

typecheck: $(STAMP)
	$(BIN)/mypy --strict app tests bench examples clients/python/contextd_client

TS := clients/typescript
TS_STAMP := $(TS)/node_modules/.installed-stamp

# Node dependencies exactly as the lockfile pins them (the cross-language test runs the
# TypeScript example too).
$(TS_STAMP): $(TS)/package.json $(TS)/package-lock.json
	cd $(TS) && npm ci --no-audit --no-fund
	touch $(TS_STAMP)

# The test suite creates (and drops) its own throwaway PostgreSQL database.
# One worker per core, a test module's tests on one worker (its servers and fixtures made once).
pytest: $(STAMP) $(TS_STAMP) postgres
	$(BIN)/pytest -q -p no:cacheprovider -n auto --dist loadfile

# The TypeScript client: strict type check, then its tests against a server on a throwaway
# PostgreSQL database of their own.
typescript: $(STAMP) $(TS_STAMP) postgres
	cd $(TS) && npx tsc --noEmit
	cd $(TS) && npx vitest run

test: lint typecheck pytest typescript

# The contract campaign of `make test`, larger (over 10,000 cases) and with a new seed each run.
fuzz: $(STAMP) postgres
	CTX_FUZZ_EXAMPLES=320 CTX_FUZZ_SEED= $(BIN)/pytest -q -s -p no:cacheprovider tests/e2e/test_contract_fuzz.py

# The realistic mix at 1, 2 and 4 workers on one PostgreSQL (docs/scaling.md), then bursts
# on one session.
load: $(STAMP) postgres
	$(BIN)/python -m bench.load --workers 1 2 4
	$(BIN)/python -m bench.burst

# A database that stalls behind a proxy: how soon every request is answered.
stall: $(STAMP) postgres
	$(BIN)/python -m bench.stall

openapi: $(STAMP)
	$(BIN)/python -m app.openapi > openapi.yaml

# The client's models and keyword-argument types, from the committed openapi.yaml (options in
# clients/python/pyproject.toml); a test fails when they drift from it.
client-models: $(STAMP)
	cd clients/python && $(abspath $(BIN))/datamodel-codegen --profile models
	cd clients/python && $(abspath $(BIN))/datamodel-codegen --profile params

bench: $(STAMP) postgres
	$(BIN)/python -m bench.append
	$(BIN)/python -m bench.normalize
	$(BIN)/python -m bench.assemble
	$(BIN)/python -m bench.assemble_core
	$(BIN)/python -m bench.compaction
	$(BIN)/python -m bench.history
	$(BIN)/python -m bench.long_session
	$(BIN)/python -m bench.replay
	$(BIN)/python -m bench.client

clean:
	rm -rf $(VENV) $(TS)/node_modules contextd.db contextd.db-wal contextd.db-shm

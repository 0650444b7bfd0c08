# HPCFair Hub. `make run` serves the embedded default; `make stack` the full stack without Docker (PostgreSQL,
# Redis, SeaweedFS S3, two Celery workers); `make test` runs the whole suite.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
STAMP := $(VENV)/.installed

.PHONY: install lock lock-upgrade run stack test test-fast lint bench docs docs-build clean

install: $(STAMP)

# Exactly the versions requirements/lock.txt pins (sha256 checked); `make lock` refreshes the lock on purpose.
$(STAMP): requirements/lock.txt requirements/nodeps.txt pyproject.toml client/pyproject.toml scripts/install.sh
	PYTHON=$(PYTHON) VENV=$(VENV) scripts/install.sh
	touch $(STAMP)

# Keep today's pins and add what pyproject.toml's ranges now need; `make lock-upgrade`: everything to the newest
# release the ranges allow. Then `make test`, and commit requirements/ with the code it passed.
lock:
	PYTHON=$(PYTHON) scripts/lock.sh keep

lock-upgrade:
	PYTHON=$(PYTHON) scripts/lock.sh upgrade

run: install docs-build
	scripts/system-deps.sh run
	$(VENV)/bin/python manage.py hub_serve

stack: install
	scripts/system-deps.sh stack
	scripts/stack.sh

test: install
	scripts/test.sh

# The logic tier: no server, no worker, no browser; about a minute (docs/developing/tests.md).
test-fast: install
	scripts/test-fast.sh

# The manual (docs/, mkdocs.yml): `make docs` serves it on http://127.0.0.1:8001 and rebuilds on each edit;
# `make docs-build` builds it into site/, which the hub serves at /docs/ (`make run` builds it first).
docs: install
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs serve --strict

docs-build: install
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet

lint: install
	$(VENV)/bin/ruff check .

bench: install
	scripts/system-deps.sh bench
	$(VENV)/bin/python bench/transfer.py
	$(VENV)/bin/python bench/hf_download.py
	$(VENV)/bin/python bench/oci_pull.py
	$(VENV)/bin/python bench/convert.py
	$(VENV)/bin/python bench/web.py

clean:
	rm -rf var test-output site

# HPCFair Hub. `make run` serves the embedded default; `make stack` the full stack without Docker (PostgreSQL,
# Redis, SeaweedFS S3, two Celery workers); `make test` runs the whole suite.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
STAMP := $(VENV)/.installed

.PHONY: install run stack test lint bench clean

install: $(STAMP)

$(STAMP): pyproject.toml client/pyproject.toml
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q -e '.[test]' -e './client[convert]'
	$(VENV)/bin/pip install -q --no-deps mlcube==0.0.9 mlcube-docker==0.0.9
	touch $(STAMP)

run: install
	scripts/system-deps.sh run
	$(VENV)/bin/python manage.py hub_serve

stack: install
	scripts/system-deps.sh stack
	scripts/stack.sh

test: install
	scripts/test.sh

lint: install
	$(VENV)/bin/ruff check .

bench: install
	scripts/system-deps.sh bench
	$(VENV)/bin/python bench/transfer.py
	$(VENV)/bin/python bench/convert.py
	$(VENV)/bin/python bench/web.py

clean:
	rm -rf var test-output

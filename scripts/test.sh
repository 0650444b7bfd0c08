#!/usr/bin/env bash
# `make test`: lint, migration check, then the whole suite against real PostgreSQL and Redis.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/system-deps.sh test
# From here on a missing program of the test profile fails the tests that need it (tests/system_packages.py).
export HUB_SYSTEM_PACKAGES=test
eval "$(scripts/services.sh start)"
trap 'scripts/services.sh stop' EXIT
.venv/bin/ruff check .
.venv/bin/python manage.py makemigrations --check --dry-run >/dev/null \
  || { echo "models changed without a migration: run manage.py makemigrations" >&2; exit 1; }
.venv/bin/python -m pytest "$@"

#!/usr/bin/env bash
# `make test-fast`: the logic of every app (protocol, parsing, access rules, metadata, search, the chain rule,
# configs, error mapping) in about a minute, for the edit-test loop. No server is started: SQLite in memory,
# the filesystem store, no Celery worker, sandbox, container or browser (tests marked slow, worker or
# services are left out; tests that compare with PostgreSQL skip). Both cores, through pytest-xdist.
# `make test` runs everything, against the real services, and is what CI runs. A test of this tier that takes
# over HUB_TEST_BUDGET_S (4 s, times the machine's load per core as the test ends, or HUB_TEST_LOAD_FACTOR) fails, saying to mark
# it slow; the tier's wall time is printed against 90 s; a run that leaves a new file in the checkout fails
# (tests/tiers.py).
set -euo pipefail
cd "$(dirname "$0")/.."
unset DATABASE_URL HUB_BROKER_URL HUB_STORAGE HUB_SYSTEM_PACKAGES
export HUB_TEST_BUDGET_S=${HUB_TEST_BUDGET_S:-4} HUB_TEST_TIER_S=90 HUB_TEST_CLEAN_CHECKOUT=1
exec .venv/bin/python -m pytest -m "not slow and not worker and not services" -n 2 -q "$@"

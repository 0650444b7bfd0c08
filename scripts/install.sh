#!/usr/bin/env bash
# `make install`: the virtual environment .venv with exactly the versions requirements/lock.txt and
# requirements/nodeps.txt pin, each file checked against its sha256; then the hub and the client, editable.
# Nothing is resolved here: `make lock` resolves, deliberately, and the lock is committed with the code it passed.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-$(command -v python3.11 || command -v python3)}
VENV=${VENV:-.venv}
test -x "$VENV/bin/python" || "$PYTHON" -m venv "$VENV"
scripts/system-deps.sh build  # python-ldap is published as source only: its headers first
pip=("$VENV/bin/pip" install -q --require-hashes --no-deps)
# The build tools first, from the lock: a package published only as source (jsonpath-rw) is then built with
# them (--no-build-isolation), not with whatever setuptools was released today.
"${pip[@]}" -r <(awk '/^(setuptools|wheel)==/ { p = 1 } p { print } p && !/\\$/ { p = 0 }' requirements/lock.txt)
"${pip[@]}" --no-build-isolation -r requirements/lock.txt -r requirements/nodeps.txt
"$VENV/bin/python" scripts/check_lock.py
"$VENV/bin/pip" install -q --no-deps --no-build-isolation -e . -e ./client

#!/usr/bin/env bash
# `make install`: the virtual environment .venv with exactly the versions requirements/lock.txt and
# requirements/nodeps.txt pin, each file checked against its sha256; then the hub and the client, editable.
# Nothing is resolved here: `make lock` resolves, deliberately, and the lock is committed with the code it passed.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-$(command -v python3.11 || command -v python3)}
VENV=${VENV:-.venv}
echo "[install] step 1 of 4: the virtual environment $VENV"
test -x "$VENV/bin/python" || "$PYTHON" -m venv "$VENV"
echo "[install] step 2 of 4: system packages for building (scripts/system-deps.sh build)"
scripts/system-deps.sh build  # python-ldap is published as source only: its headers first
pip=("$VENV/bin/pip" install -q --require-hashes --no-deps)
# The build tools first, from the lock: a package published only as source (jsonpath-rw) is then built with
# them (--no-build-isolation), not with whatever setuptools was released today.
echo "[install] step 3 of 4: the build tools (setuptools, wheel)"
"${pip[@]}" -r <(awk '/^(setuptools|wheel)==/ { p = 1 } p { print } p && !/\\$/ { p = 0 }' requirements/lock.txt)
echo "[install] step 4 of 4: the locked packages"
# one progress line per batch (packages N of M, the large ones named, an estimate): scripts/install_packages.py
"$VENV/bin/python" scripts/install_packages.py "${pip[@]}" --no-build-isolation -- \
  requirements/lock.txt requirements/nodeps.txt
echo "[install] checking the installed versions against the lock"
"$VENV/bin/python" scripts/check_lock.py
echo "[install] the hub and the client, editable"
"$VENV/bin/pip" install -q --no-deps --no-build-isolation -e . -e ./client
echo "[install] done"

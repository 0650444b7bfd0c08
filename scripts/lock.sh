#!/usr/bin/env bash
# `make lock`: write the lock files that `make install` installs from, with every file's sha256.
#   scripts/lock.sh           keep today's pins; add or change only what pyproject.toml's ranges now need
#   scripts/lock.sh upgrade   every package to the newest release the ranges allow (then run `make test`)
# requirements/lock.txt   the server, its `test` extra and the client with its `convert` extra (pip-compile)
# requirements/nodeps.txt packages installed with --no-deps (mlcube: its own pins do not install)
# requirements/tools.txt  pip-tools itself (kept by hand: scripts/lock.sh tools rewrites it)
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-$(command -v python3.11 || command -v python3)}
TOOL=.venv-lock
mode=${1:-keep}
case "$mode" in
  keep|upgrade|tools) ;;
  *) echo "usage: $0 [keep|upgrade|tools]" >&2; exit 2 ;;
esac
if [ ! -x "$TOOL/bin/pip-compile" ]; then
  "$PYTHON" -m venv "$TOOL"
  "$TOOL/bin/pip" install -q --require-hashes -r requirements/tools.txt
fi
flags=(--quiet --generate-hashes --strip-extras --allow-unsafe --no-emit-index-url --no-emit-find-links)
[ "$mode" = upgrade ] && flags+=(--upgrade)
if [ "$mode" = tools ]; then
  "$TOOL/bin/pip-compile" "${flags[@]}" --upgrade -o requirements/tools.txt requirements/tools.in
  exit 0
fi
"$TOOL/bin/pip-compile" "${flags[@]}" --extra test --extra convert -o requirements/lock.txt \
  pyproject.toml client/pyproject.toml
# pip-compile resolves dependencies, which these must not have: each pinned file's hash, from its download.
downloads=$(mktemp -d)
trap 'rm -rf "$downloads"' EXIT
{
  echo "# Written by scripts/lock.sh from requirements/nodeps.in; installed with --no-deps --require-hashes."
  grep -v '^#' requirements/nodeps.in | grep . | while read -r pin; do
    dir="$downloads/${pin%%==*}"
    "$TOOL/bin/pip" download -q --no-deps --only-binary=:all: -d "$dir" "$pin" >/dev/null
    echo "$pin \\"
    "$TOOL/bin/pip" hash "$dir"/* | grep -- --hash | sed 's/^/    /'
  done
} >requirements/nodeps.txt
echo "requirements/lock.txt and requirements/nodeps.txt written: run make test, then commit them"

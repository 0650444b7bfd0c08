#!/usr/bin/env bash
# The benchmarks' optional peers in their own virtual environment, never in the hub's .venv:
#   scripts/bench-venv.sh        install .venv-bench from requirements/bench.txt (exact pins, sha256 checked)
#   scripts/bench-venv.sh lock   rewrite requirements/bench.txt from requirements/bench.in (with hashes)
# bench/infer.py serves the same ONNX models with MLflow from .venv-bench, and skips MLflow without it.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-$(command -v python3.11 || command -v python3)}
VENV=.venv-bench
TOOL=.venv-lock
if [ "${1:-install}" = lock ]; then
  if [ ! -x "$TOOL/bin/pip-compile" ]; then
    "$PYTHON" -m venv "$TOOL"
    "$TOOL/bin/pip" install -q --require-hashes -r requirements/tools.txt
  fi
  "$TOOL/bin/pip-compile" --quiet --generate-hashes --strip-extras --allow-unsafe --no-emit-index-url \
    --no-emit-find-links -o requirements/bench.txt requirements/bench.in
  echo "requirements/bench.txt written: run scripts/bench-venv.sh, then bench/infer.py, then commit it"
  exit 0
fi
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
"$VENV/bin/pip" install -q --require-hashes --only-binary=:all: -r requirements/bench.txt
echo "$VENV: $("$VENV/bin/python" -c 'import mlflow; print("mlflow", mlflow.__version__)')"

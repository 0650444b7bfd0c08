#!/usr/bin/env bash
# The OpenID provider the sign-in tests start (tests/accounts/oidc_provider): its npm packages, exactly as
# package-lock.json pins them (`npm ci`), installed once and again only when the lock changes.
set -euo pipefail
cd "$(dirname "$0")/../tests/accounts/oidc_provider"
stamp=node_modules/.installed-lock
if [ -f "$stamp" ] && cmp -s package-lock.json "$stamp"; then exit 0; fi
command -v npm >/dev/null || { echo "error: npm is missing (Debian: nodejs, npm; scripts/system-deps.sh test)" >&2; exit 1; }
npm ci --no-audit --no-fund --loglevel=error >/dev/null
cp package-lock.json "$stamp"

#!/usr/bin/env bash
# Debian packages the test suite needs: PostgreSQL (server), Redis, docker-compose (config check only).
set -euo pipefail
needed=()
for pkg in postgresql redis-server docker-compose; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || needed+=("$pkg")
done
[ ${#needed[@]} -eq 0 ] && exit 0
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
echo "installing Debian packages: ${needed[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get install -y -q --no-install-recommends "${needed[@]}" >/dev/null 2>&1 \
  || { $SUDO apt-get update -q >/dev/null && $SUDO apt-get install -y -q --no-install-recommends "${needed[@]}" >/dev/null; }

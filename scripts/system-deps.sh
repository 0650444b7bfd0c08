#!/usr/bin/env bash
# Debian packages the hub needs.
#   scripts/system-deps.sh test  PostgreSQL (server), Redis, docker-compose (config check), bubblewrap,
#                                podman and debootstrap (MLCube builds and their base image), chromium
#                                (browser tests, driven by Playwright)
#   scripts/system-deps.sh run   bubblewrap (the conversion sandbox); optional: without it only limits apply
set -euo pipefail
profile="${1:-test}"
case "$profile" in
  test) packages=(postgresql redis-server docker-compose bubblewrap podman debootstrap chromium) ;;
  run) packages=(bubblewrap) ;;
  *) echo "usage: $0 test|run" >&2; exit 2 ;;
esac
needed=()
for pkg in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || needed+=("$pkg")
done
[ ${#needed[@]} -eq 0 ] && exit 0
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo -n"
echo "installing Debian packages: ${needed[*]}"
export DEBIAN_FRONTEND=noninteractive
install() {
  $SUDO apt-get install -y -q --no-install-recommends "${needed[@]}" >/dev/null 2>&1 \
    || { $SUDO apt-get update -q >/dev/null && $SUDO apt-get install -y -q --no-install-recommends "${needed[@]}" >/dev/null; }
}
if ! install; then
  if [ "$profile" = run ]; then
    echo "warning: could not install ${needed[*]}; conversions will run with resource limits only (no bubblewrap)" >&2
    exit 0
  fi
  exit 1
fi

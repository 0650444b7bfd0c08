#!/usr/bin/env bash
# Install the Debian packages a command needs, as listed in scripts/debian-packages.txt:
#   scripts/system-deps.sh run    bubblewrap (the conversion sandbox); optional: without it only limits apply
#   scripts/system-deps.sh test   PostgreSQL, Redis, docker-compose, bubblewrap, podman with runc (the OCI
#                                 runtime deploy/podman/containers.conf names: never rely on one installed by hand),
#                                 debootstrap (the MLCube base image), chromium (browser tests)
#   scripts/system-deps.sh stack  PostgreSQL, Redis, bubblewrap: `make stack` (SeaweedFS comes from the venv)
#   scripts/system-deps.sh bench  what the benchmarks start: PostgreSQL, Redis, podman, procps, curl, ...
#   scripts/system-deps.sh build  the headers python-ldap builds on (scripts/install.sh, before pip)
#   scripts/system-deps.sh list PROFILE   print the profile's packages and install nothing
set -euo pipefail
cd "$(dirname "$0")"
packages_of() {
  awk -v profile="$1" '!/^#/ && NF >= 2 { n = split($2, p, ","); for (i = 1; i <= n; i++) if (p[i] == profile) print $1 }' \
    debian-packages.txt
}
profile="${1:-test}"
if [ "$profile" = list ]; then packages_of "${2:?usage: $0 list PROFILE}"; exit 0; fi
case "$profile" in
  run|stack|test|bench|build|llama) mapfile -t packages < <(packages_of "$profile") ;;
  *) echo "usage: $0 run|stack|test|bench|build|list PROFILE" >&2; exit 2 ;;
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
  if [ "$profile" = run ] || [ "$profile" = build ]; then
    [ "$profile" = build ] && echo "warning: could not install ${needed[*]}; pip cannot build python-ldap without them" >&2
    [ "$profile" = run ] && echo "warning: could not install ${needed[*]}; conversions will run with resource limits only (no bubblewrap)" >&2
    exit 0
  fi
  echo "error: could not install the Debian packages ${needed[*]} (as root or through sudo)" >&2
  exit 1
fi

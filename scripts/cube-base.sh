#!/usr/bin/env bash
# Make the MLCube base image offline-style: a Debian 12 root file system from debootstrap (python3 and
# python3-venv, nothing else), imported into Podman as $HUB_CUBE_BASE_IMAGE. Cached: does nothing when
# the image exists. Needs root (debootstrap) and Debian's mirror, or a mirror of it (HUB_DEBIAN_MIRROR).
set -euo pipefail
cd "$(dirname "$0")/.."
image="${1:-${HUB_CUBE_BASE_IMAGE:-localhost/hpcfair-base:bookworm}}"
mirror="${HUB_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
export CONTAINERS_CONF="${CONTAINERS_CONF:-$PWD/deploy/podman/containers.conf}"
podman image exists "$image" && exit 0
root="$(mktemp -d /tmp/hpcfair-base.XXXXXX)"
trap 'rm -rf "$root"' EXIT
echo "making $image with debootstrap from $mirror (about a minute)" >&2
debootstrap --variant=minbase --include=python3,python3-venv bookworm "$root/fs" "$mirror" >"$root/log" 2>&1 \
  || { tail -20 "$root/log" >&2; exit 1; }
rm -rf "$root"/fs/usr/share/doc/* "$root"/fs/usr/share/man/* "$root"/fs/usr/share/info/* \
  "$root"/fs/var/cache/apt/*.bin "$root"/fs/var/cache/apt/archives/*.deb "$root"/fs/var/lib/apt/lists/*
find "$root/fs/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name 'en*' -exec rm -rf {} +
tar -C "$root/fs" -c . | podman import --change 'CMD ["/bin/bash"]' - "$image" >/dev/null
echo "made $image" >&2

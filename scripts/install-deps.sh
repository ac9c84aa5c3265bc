#!/bin/sh
# Installs the Debian packages pipenet needs to build, test and run its bundled
# example, or, given package names, those; skips those already present. Runs
# apt-get as root (or through sudo), and shows its output only when it fails.
set -eu

PACKAGES="build-essential pkg-config autoconf automake libtool make
openmpi-bin libopenmpi-dev libopenblas-dev libhdf5-openmpi-dev libjansson-dev
zlib1g-dev check dataset-fashion-mnist"
[ $# -eq 0 ] || PACKAGES="$*"

missing=""
for p in $PACKAGES; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done

if [ -z "$missing" ]; then
    echo "install-deps: all packages present"
    exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
    SUDO=""
elif command -v sudo >/dev/null 2>&1; then
    SUDO="sudo"
else
    echo "install-deps: need root to install:$missing" >&2
    exit 1
fi

echo "install-deps: installing$missing"
log=$(mktemp)
# shellcheck disable=SC2086
if ! { $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -q &&
       $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
           $missing; } >"$log" 2>&1; then
    cat "$log" >&2
    rm -f "$log"
    echo "install-deps: apt-get failed" >&2
    exit 1
fi
rm -f "$log"

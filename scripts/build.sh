#!/bin/sh
# Configures (once) and builds pipenet in the source tree. Extra arguments go to
# ./configure on the first run, e.g. scripts/build.sh --without-cuda.
set -eu
cd "$(dirname "$0")/.."
if [ ! -x configure ] || [ configure.ac -nt configure ]; then
    autoreconf -fi
fi
if [ ! -f Makefile ] || [ configure -nt Makefile ] || [ $# -gt 0 ]; then
    ./configure "$@"
fi
make -j"$(nproc)"

#!/bin/sh
# The README's main command: installs what is missing, builds pipenet, imports
# Fashion-MNIST from Debian's dataset-fashion-mnist package into data/fashion-mnist
# (once), and trains models/fashion_mlp.json on it.
set -eu
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
if [ ! -f data/fashion-mnist/train.h5 ] || [ ! -f data/fashion-mnist/test.h5 ]; then
    ./pipenet import fashion-mnist --out data/fashion-mnist
fi
./pipenet train models/fashion_mlp.json "$@"

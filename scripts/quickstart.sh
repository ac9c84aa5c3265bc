#!/bin/sh
# The README's main command: installs what is missing, builds pipenet, imports
# Fashion-MNIST from Debian's dataset-fashion-mnist package into data/fashion-mnist
# (once), and trains models/fashion_mlp.json as a pipeline of 2 stages on 2 MPI
# ranks (jobs/mpirun.sh). Extra arguments go to `pipenet train`.
set -eu
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
if [ ! -f data/fashion-mnist/train.h5 ] || [ ! -f data/fashion-mnist/test.h5 ]; then
    ./pipenet import fashion-mnist --out data/fashion-mnist
fi
exec jobs/mpirun.sh -n 2 -p 2 models/fashion_mlp.json "$@"

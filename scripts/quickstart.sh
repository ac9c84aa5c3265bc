#!/bin/sh
# The README's main command: installs what is missing, builds pipenet and runs it.
# (Training the bundled Fashion-MNIST model lands with the trainer; until then
# this shows the layer library the models are built from.)
set -eu
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
./pipenet layers

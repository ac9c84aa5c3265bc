#!/bin/sh
# Runs the communication seam's checks on 4 MPI ranks (oversubscribed on small machines).
set -u
here=${TESTS_BUILDDIR:-$(cd "$(dirname "$0")" && pwd)}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
exec mpirun --oversubscribe -np 4 "$here/test_comm"

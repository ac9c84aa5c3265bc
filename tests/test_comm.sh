#!/bin/sh
# Runs the communication seam's checks on 4 MPI ranks (oversubscribed on small machines).
set -u
. "$(dirname "$0")/script_fixture.sh"
here=${TESTS_BUILDDIR:-$(cd "$(dirname "$0")" && pwd)}
mpirun --oversubscribe -np 4 "$here/test_comm"

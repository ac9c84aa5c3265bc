#!/bin/sh
# Runs the owner exchange's checks (tests/test_comm_owner.c) on 2 and then 4 MPI ranks
# (oversubscribed on small machines), then its stall check on 2: replica 1 never joins
# a push and the job must end (not hang) with the watchdog naming what it waited for.
set -u
. "$(dirname "$0")/script_fixture.sh"
here=${TESTS_BUILDDIR:-$(cd "$(dirname "$0")" && pwd)}
export CK_FORK=no
for np in 2 4; do
    echo "--- $np ranks"
    timeout 300 mpirun --oversubscribe -np $np "$here/test_comm_owner" || fail "$np ranks"
done
echo "--- the stall check, 2 ranks"
err=$tmp/err
timeout 120 mpirun --oversubscribe -np 2 "$here/test_comm_owner" --stall >/dev/null 2>"$err"
rc=$?
[ $rc -ne 124 ] || fail "the stalled push hung"
[ $rc -ne 0 ] || fail "the stalled push exited 0"
grep -q "the stall check: no progress for 2 s (--stall-timeout) waiting for the row gradients of the 2 replicas of stage 0" "$err" ||
    { cat "$err"; fail "no watchdog message naming the row gradients"; }
grep -q "from rank 1 (stage 0, replica 1)" "$err" ||
    { cat "$err"; fail "the message does not name rank 1"; }
echo "ok: the stalled push ended the job, naming the row gradients and rank 1"

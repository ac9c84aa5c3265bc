# Sourced by the shell tests right after `set -u`, before anything else: PIPENET (the
# program under test, ./pipenet unless given), a temporary directory $tmp removed at
# exit, fail, expect, and Open MPI allowed to run as root (CI runs as root).
PIPENET=${PIPENET:-./pipenet}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/pn_test.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# fail MESSAGE: the test fails, saying why
fail() { echo "FAIL: $*"; exit 1; }

# expect CODE WANT COMMAND...: COMMAND exits CODE and says WANT (a grep pattern);
# its output stays in $tmp/out
expect() {
    code=$1 want=$2; shift 2
    "$@" >"$tmp/out" 2>&1
    rc=$?
    [ $rc -eq "$code" ] || { cat "$tmp/out"; fail "exit $rc, not $code: $*"; }
    grep -q -- "$want" "$tmp/out" || { cat "$tmp/out"; fail "no '$want' from: $*"; }
}

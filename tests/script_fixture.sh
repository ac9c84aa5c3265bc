# Sourced by every shell test right after `set -u`, before anything else: PIPENET (the
# program under test, ./pipenet unless given), a temporary directory $tmp removed at
# exit (kept when KEEP_TMP is set, to look into a failure; a test that sets its own
# EXIT trap removes it there), fail, expect, need_fashion_mnist,
# import_fashion_mnist and need_h5_fixture, and Open MPI allowed to run as root (CI
# runs as root).
PIPENET=${PIPENET:-./pipenet}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/pn_test.XXXXXX") || exit 1
trap '[ -n "${KEEP_TMP:-}" ] || rm -rf "$tmp"' EXIT
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

# need_fashion_mnist: $SRC, the directory of Debian's Fashion-MNIST package; the test
# skips (77) where it is not installed
need_fashion_mnist() {
    SRC=/usr/share/datasets/fashion-mnist
    [ -d "$SRC" ] || { echo "SKIP: $SRC not installed (dataset-fashion-mnist)"; exit 77; }
}

# import_fashion_mnist: need_fashion_mnist, then the dataset imported into $tmp/fm
# (train.h5, test.h5)
import_fashion_mnist() {
    need_fashion_mnist
    "$PIPENET" import fashion-mnist --src "$SRC" --out "$tmp/fm" >/dev/null || fail "import"
}

# need_h5_fixture: $H5, the h5_fixture program (tests/h5_fixture.c: the HDF5 files
# pipenet never writes); the test skips (77) where it is not built
need_h5_fixture() {
    H5=${TESTS_BUILDDIR:-$(cd "$(dirname "$0")" && pwd)}/h5_fixture
    [ -x "$H5" ] || { echo "SKIP: $H5 not built (make check builds it)"; exit 77; }
}

#!/bin/sh
# `pipenet inspect A --compare B` answers honestly (docs/formats.md, the end):
#  1. NaN at the same place in both is equal, in the exact comparison and in the
#     relative L2 one (left out of the sums), and so are infinities of one sign; a
#     NaN or infinity against a number is a difference at any tolerance, named by
#     its first place; the summary's largest difference is a number;
#  2. dataset names of any length HDF5 allows (128 bytes and more, 5000 here);
#  3. a dataset of more dimensions than inspect shows (32) is listed, not a crash.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/script_fixture.sh"
fix=${TESTS_BUILDDIR:-$here}/h5_fixture
[ -x "$fix" ] || fail "no $fix (make check builds it)"
cd "$tmp" || exit 1

# 1. NaN and infinities
"$fix" floats a.h5 v 1 nan 3 inf -inf 0.5 || fail "h5_fixture floats"
"$fix" floats b.h5 v 1 nan 3 inf -inf 0.5
"$fix" floats c.h5 v 1 2 3 inf -inf 0.5 # the NaN is a number here
"$fix" floats d.h5 v 1 nan 3 -inf -inf 0.5 # an infinity of the other sign
"$fix" floats e.h5 v 1 nan 3 inf -inf 0.5000001 # a finite value a little off
expect 0 "compared 1 arrays of a.h5 and b.h5: 0 differ (exact comparison)" \
    "$PIPENET" inspect a.h5 --compare b.h5
expect 0 "0 differ; largest relative L2 difference 0 (/v), tolerance 1e-06" \
    "$PIPENET" inspect a.h5 --compare b.h5 --tolerance 1e-6
for tol in 0 0.5; do
    expect 1 "differs: /v: 1 of 6 values NaN or infinite where the other file has another value, first at \[1\] (nan in a.h5, 2 in c.h5)" \
        "$PIPENET" inspect a.h5 --compare c.h5 --tolerance $tol
    expect 1 "first at \[3\] (inf in a.h5, -inf in d.h5)" \
        "$PIPENET" inspect a.h5 --compare d.h5 --tolerance $tol
done
expect 1 "1 differ; largest relative L2 difference inf (/v), tolerance 0.5" \
    "$PIPENET" inspect a.h5 --compare c.h5 --tolerance 0.5
expect 1 "differs: /v: relative L2 difference" "$PIPENET" inspect a.h5 --compare e.h5
expect 0 "0 differ; largest relative L2 difference [0-9.e-]* (/v), tolerance 1e-06" \
    "$PIPENET" inspect a.h5 --compare e.h5 --tolerance 1e-6
echo "ok: NaN and inf at the same place agree; against a number they differ, named"

# 2. long names: 128 bytes, 300 with a group on the way, 5000
long128=$(printf 'n%.0s' $(seq 128))
long300=g/$(printf 'x%.0s' $(seq 298))
long5000=$(printf 'y%.0s' $(seq 5000))
for f in la lb lc; do
    "$fix" floats $f.h5 "$long128" 1 2 || fail "h5_fixture: a name of 128 bytes"
    "$fix" floats $f.h5 "$long300" 3 4 || fail "h5_fixture: a name of 300 bytes"
done
"$fix" floats la.h5 "$long5000" 5 6 && "$fix" floats lb.h5 "$long5000" 5 6 &&
    "$fix" floats lc.h5 "$long5000" 5 7 || fail "h5_fixture: a name of 5000 bytes"
expect 0 "compared 3 arrays of la.h5 and lb.h5: 0 differ" "$PIPENET" inspect la.h5 --compare lb.h5
expect 1 "compared 3 arrays of la.h5 and lc.h5: 1 differ" "$PIPENET" inspect la.h5 --compare lc.h5
grep -q "^differs: /$long5000: relative L2" "$tmp/out" || { cat "$tmp/out"; fail "the long name is not named whole"; }
echo "ok: dataset names of 128, 300 and 5000 bytes compare"

# 3. 32 dimensions
"$fix" deep deep.h5 d32 32 || fail "h5_fixture deep"
expect 0 "/d32 *float32 *?" "$PIPENET" inspect deep.h5
echo "PASS: inspect --compare"

#!/bin/sh
# `pipenet import libsvm` and `import synthetic-ctr` (docs/sparse.md): every importer of
# the table in --help; libsvm and libffm files (-1/+1 labels, empty rows, CRLF, blank
# and comment lines) read back value by value; each syntax error named by file, line
# and column, with nothing left in the output directory; a file spanning many chunks
# imported exactly; the train/test splits; scipy's csr_matrix over the written layout
# (when /usr/bin/python3 has h5py and scipy); synthetic-ctr's determinism and its
# stored planted scores.
set -u
. "$(dirname "$0")/script_fixture.sh"
H5=${TESTS_BUILDDIR:-$(dirname "$0")}/h5_fixture

# every dataset of the table has its usage line in --help
"$PIPENET" import nosuch --out "$tmp/x" >"$tmp/out" 2>&1
known=$(sed -n 's/.*(known: \([^)]*\)).*/\1/p' "$tmp/out" | tr -d ',')
[ -n "$known" ] || fail "no list of known datasets: $(cat "$tmp/out")"
"$PIPENET" import --help >"$tmp/help" || fail "import --help"
for d in $known; do
    grep -q "pipenet import $d " "$tmp/help" || fail "--help has no usage line for $d"
done
echo "$known" | grep -q 'libsvm' || fail "libsvm is not in the table: $known"
echo "$known" | grep -q 'synthetic-ctr' || fail "synthetic-ctr is not in the table: $known"
# every --format name (the table, as its refusal lists them) in --help with its line
"$PIPENET" import libsvm x --out "$tmp/x" --format nosuch >"$tmp/out" 2>&1
forms=$(sed -n 's/.*expected \(.*\), got.*/\1/p' "$tmp/out" | sed 's/,//g; s/ or / /')
[ -n "$forms" ] || fail "no list of forms: $(cat "$tmp/out")"
for n in $forms; do
    grep -q "^  *$n  *[a-z]" "$tmp/help" || fail "--help does not describe --format $n"
done
expect 2 "--seq is not an option of import libsvm" "$PIPENET" import libsvm x --out "$tmp/x" --seq 4
expect 2 "import libsvm needs at least one FILE" "$PIPENET" import libsvm --out "$tmp/x"
expect 2 "give one" "$PIPENET" import libsvm x --out "$tmp/x" --test x --test-fraction 0.5

# values, in the file's order, of dataset NAME of FILE on one line
vals() { "$H5" print "$1" "$2" | tr '\n' ' '; }
attr() { "$H5" attr "$1" "$2" "$3" | tr '\n' ' '; }

# libsvm: one-based indices, -1/+1 labels, an empty row, CRLF, blank and comment lines
printf '+1 1:0.5 3:2\n-1\n\n# a comment line\n1 2:1\t10:-3.5e2\r\n  0 1:1 # a trailing comment\n' \
    >"$tmp/a.svm"
expect 0 "wrote $tmp/o/train.h5: 4 samples" "$PIPENET" import libsvm "$tmp/a.svm" --out "$tmp/o"
grep -q "form libsvm, index base 1: 10 columns; 5 nonzeros" "$tmp/out" || fail "summary: $(cat "$tmp/out")"
f=$tmp/o/train.h5
[ "$(vals "$f" features/indptr)" = "0 2 2 4 5 " ] || fail "indptr: $(vals "$f" features/indptr)"
[ "$(vals "$f" features/indices)" = "0 2 1 9 0 " ] || fail "indices: $(vals "$f" features/indices)"
[ "$(vals "$f" features/values)" = "0.5 2 1 -350 1 " ] || fail "values: $(vals "$f" features/values)"
[ "$(vals "$f" labels)" = "1 0 1 0 " ] || fail "labels: $(vals "$f" labels)"
[ "$(attr "$f" features shape)" = "4 10 " ] || fail "shape: $(attr "$f" features shape)"
"$PIPENET" inspect "$f" >"$tmp/inspect" || fail "inspect"
for want in '/features/indptr  *int64  *\[5\]' '/features/indices  *int64  *\[5\]' \
    '/features/values  *float32  *\[5\]' '/labels  *int32  *\[4\]' \
    '^attributes of /features (a CSR group):$' '^  shape  *int64  *(4, 10)$'; do
    grep -q "$want" "$tmp/inspect" || fail "inspect lacks $want: $(cat "$tmp/inspect")"
done
grep -q 'fields' "$tmp/inspect" && fail "a libsvm file has fields"
[ "$(ls "$tmp/o")" = "train.h5" ] || fail "out holds $(ls "$tmp/o")"
# --index-base 0 and --columns
expect 0 "index base 0: 20 columns" "$PIPENET" import libsvm "$tmp/a.svm" --out "$tmp/o0" \
    --index-base 0 --columns 20
[ "$(vals "$tmp/o0/train.h5" features/indices)" = "1 3 2 10 1 " ] || fail "base 0 indices"

# libffm: zero-based fields and indices, num_fields, an empty row
printf '1 0:3:1 2:7:0.25\n0\n0 1:0:2\n' >"$tmp/a.ffm"
expect 0 "form libffm, index base 0: 8 columns, 3 fields" "$PIPENET" import libsvm "$tmp/a.ffm" \
    --out "$tmp/ffm"
f=$tmp/ffm/train.h5
[ "$(vals "$f" features/indptr)" = "0 2 2 3 " ] || fail "ffm indptr: $(vals "$f" features/indptr)"
[ "$(vals "$f" features/indices)" = "3 7 0 " ] || fail "ffm indices"
[ "$(vals "$f" features/fields)" = "0 2 1 " ] || fail "ffm fields: $(vals "$f" features/fields)"
[ "$(attr "$f" features num_fields)" = "3 " ] || fail "num_fields: $(attr "$f" features num_fields)"
"$PIPENET" inspect "$f" >"$tmp/inspect" || fail "inspect ffm"
grep -q '/features/fields  *int32  *\[3\]' "$tmp/inspect" || fail "fields not int32 [3]"
grep -q '^  num_fields  *int[0-9]*  *3$' "$tmp/inspect" || fail "inspect: no num_fields 3: $(cat "$tmp/inspect")"

# each mistake: exit 1, file, line and column named, nothing left under --out
bad() { # bad WANT LINE... [-- OPTIONS]: the lines as a file, refused saying WANT
    want=$1; shift
    : >"$tmp/bad.svm"
    while [ $# -gt 0 ] && [ "$1" != -- ]; do printf '%s\n' "$1" >>"$tmp/bad.svm"; shift; done
    [ $# -gt 0 ] && shift
    rm -rf "$tmp/bad"
    expect 1 "^pipenet: error: $tmp/bad.svm: $want" "$PIPENET" import libsvm "$tmp/bad.svm" \
        --out "$tmp/bad" "$@"
    [ -z "$(ls "$tmp/bad" 2>/dev/null)" ] || fail "a refused import left $(ls "$tmp/bad")"
}
bad "line 2, column 1: expected a label 0 or 1 (or -1 for 0, +1 for 1), found 'yes'" \
    "1 1:1" "yes 2:1"
bad "line 1, column 1: expected a label 0 or 1 .*found '2'" "2 1:1"
bad "line 1, column 3: expected index:value or field:index:value (no ':'), found '5'" "1 5"
bad "line 1, column 7: expected an index: an integer in \[1, .*found '-3'" "1 1:1 -3:1"
bad "line 1, column 3: expected an index: .*found '2.5'" "1 2.5:1"
bad "line 1, column 3: expected an index: .*indices count from 1.*found '0'" "1 0:1"
bad "line 3, column 5: expected a finite value (a float32), found 'nan'" "1 1:1" "" "0 2:nan"
bad "line 1, column 5: expected a finite value (a float32), found 'inf'" "1 1:inf"
bad "line 1, column 5: expected a finite value (a float32), found '1e39'" "1 1:1e39"
bad "line 1, column 5: expected a finite value (a float32), found ''" "1 1:"
bad "line 1, column 5: expected a finite value (a float32), found '\\\\x0b1'" "1 1:$(printf '\013')1"
bad "line 1, column 3: expected an index: an integer in \[1, 4\] (--columns), found '5'" \
    "1 5:1" -- --columns 4
bad "line 2, column 3: expected a field: an integer in \[0, 1\] (--fields), found '2'" \
    "1 0:1:1" "0 2:1:1" -- --fields 2
bad "line 2, column 3: expected index:value (the libsvm form, as $tmp/bad.svm line 1)" \
    "1 1:1" "0 0:2:1"
bad "line 1, column 3: expected field:index:value (the libffm form, as --format says)" \
    "1 1:1" -- --format libffm
bad "line 1, column 3: expected index:value or field:index:value (three" "1 1:2:3:4"
bad "line 2, column 1: expected a label .*found '\\\\x011'" "1 1:1" "$(printf '\001')1 2:1"

# streaming: 3000 samples over chunks of 7 values are the samples of one chunk
awk 'BEGIN { for (i = 0; i < 3000; i++) { line = i % 2; n = i % 5;
    for (k = 0; k < n; k++) line = line " " (1 + (i * 7 + k * 13) % 997) ":" (k + i % 3) / 4;
    print line } }' >"$tmp/big.svm"
expect 0 "wrote $tmp/big7/train.h5: 3000 samples" "$PIPENET" import libsvm "$tmp/big.svm" \
    --out "$tmp/big7" --chunk 7
"$PIPENET" inspect "$tmp/big7/train.h5" | grep -q 'indices  *int64  *\[6000\]  *chunks \[7\]' ||
    fail "not 6000 indices in chunks of 7: $("$PIPENET" inspect "$tmp/big7/train.h5")"
expect 0 "wrote" "$PIPENET" import libsvm "$tmp/big.svm" --out "$tmp/big"
for d in features/indptr features/indices features/values labels; do
    "$H5" print "$tmp/big7/train.h5" $d >"$tmp/a" && "$H5" print "$tmp/big/train.h5" $d >"$tmp/b" ||
        fail "print $d"
    cmp -s "$tmp/a" "$tmp/b" || fail "$d differs between --chunk 7 and the default"
done
# the indices, as awk computes them (one-based in the file)
awk '{ for (k = 2; k <= NF; k++) { split($k, p, ":"); print p[1] - 1 } }' "$tmp/big.svm" >"$tmp/want"
"$H5" print "$tmp/big7/train.h5" features/indices >"$tmp/got"
cmp -s "$tmp/want" "$tmp/got" || fail "indices differ from the file's"

# splits: the last 30% of 3000 samples; or a test file, columns shared by both
expect 0 "wrote $tmp/split/test.h5: 900 samples" "$PIPENET" import libsvm "$tmp/big.svm" \
    --out "$tmp/split" --test-fraction 0.3 --chunk 64
grep -q "wrote $tmp/split/train.h5: 2100 samples" "$tmp/out" || fail "train split: $(cat "$tmp/out")"
[ "$("$H5" print "$tmp/split/test.h5" labels | head -3 | tr '\n' ' ')" = "0 1 0 " ] ||
    fail "test.h5 does not start at sample 2100"
expect 0 "wrote $tmp/tf/test.h5: 4 samples" "$PIPENET" import libsvm "$tmp/big.svm" \
    --test "$tmp/a.svm" --out "$tmp/tf"
[ "$(attr "$tmp/tf/test.h5" features shape)" = "4 997 " ] || fail "test shape: $(attr "$tmp/tf/test.h5" features shape)"
[ "$(attr "$tmp/tf/train.h5" features shape)" = "3000 997 " ] || fail "train shape"
printf '1 1:1\n' >"$tmp/one.svm"
expect 1 "one.svm: 1 sample: --test-fraction needs 2" "$PIPENET" import libsvm "$tmp/one.svm" \
    --out "$tmp/one" --test-fraction 0.5

# synthetic-ctr: the same seed gives the same files; another seed others
ctr() { "$PIPENET" import synthetic-ctr --samples 3000 --test-samples 2000 --fields 5 \
    --vocab 50 --chunk 100 "$@"; }
ctr --out "$tmp/c1" --seed 7 >"$tmp/out" 2>&1 || fail "synthetic-ctr: $(cat "$tmp/out")"
ctr --out "$tmp/c2" --seed 7 >/dev/null 2>&1 || fail "synthetic-ctr again"
ctr --out "$tmp/c3" --seed 8 >/dev/null 2>&1 || fail "synthetic-ctr seed 8"
for d in features/indptr features/indices features/fields labels; do
    "$H5" print "$tmp/c1/test.h5" $d >"$tmp/a" && "$H5" print "$tmp/c2/test.h5" $d >"$tmp/b" ||
        fail "print $d"
    cmp -s "$tmp/a" "$tmp/b" || fail "$d differs between two runs of seed 7"
done
"$H5" print "$tmp/c1/test.h5" features/indices >"$tmp/a"
"$H5" print "$tmp/c3/test.h5" features/indices >"$tmp/b"
cmp -s "$tmp/a" "$tmp/b" && fail "seeds 7 and 8 give the same features"
f=$tmp/c1/test.h5
[ "$(attr "$f" features shape)" = "2000 250 " ] || fail "ctr shape: $(attr "$f" features shape)"
[ "$(attr "$f" features num_fields)" = "5 " ] || fail "ctr num_fields"
"$PIPENET" inspect "$f" | grep -q '/features/values' && fail "ctr wrote values (all 1: left out)"
# one feature per field, field f's column in [50 f, 50 f + 50)
"$H5" print "$f" features/indices | awk '{ f = (NR - 1) % 5; if ($1 < 50 * f || $1 >= 50 * f + 50) bad++ } END { exit bad > 0 }' ||
    fail "a column outside its field's range"
[ "$(vals "$f" features/indptr | awk '{ print $NF }')" = "10000" ] || fail "nnz is not 2000 x 5"
# default sizes (fewer samples): the planted scores are sane
"$PIPENET" import synthetic-ctr --samples 20000 --test-samples 20000 --out "$tmp/cd" \
    >"$tmp/out" 2>&1 || fail "synthetic-ctr defaults: $(cat "$tmp/out")"
auc=$(attr "$tmp/cd/test.h5" / planted_auc) loss=$(attr "$tmp/cd/test.h5" / planted_log_loss)
awk -v a="$auc" -v l="$loss" 'BEGIN { exit !(a > 0.6 && a < 0.95 && l > 0 && l < log(2)) }' ||
    fail "planted AUC $auc or log-loss $loss out of range"
grep -q "planted model on test.h5: log-loss .*, AUC 0\.[6-9]" "$tmp/out" || fail "summary: $(cat "$tmp/out")"

# scipy over the written layout reproduces the input (where python3 has h5py and scipy)
if /usr/bin/python3 -c 'import h5py, scipy.sparse' 2>/dev/null; then
    /usr/bin/python3 - "$tmp/o/train.h5" "$tmp/ffm/train.h5" <<'EOF' || fail "scipy check"
import sys, h5py, numpy as np, scipy.sparse as sp
with h5py.File(sys.argv[1]) as f:
    g = f["features"]
    assert g["indptr"].dtype == np.int64 and g["indices"].dtype == np.int64
    assert g["values"].dtype == np.float32 and f["labels"].dtype == np.int32
    assert g["indices"].maxshape == (None,)
    m = sp.csr_matrix((g["values"][()], g["indices"][()], g["indptr"][()]),
                      shape=tuple(g.attrs["shape"]))
    want = np.zeros((4, 10), np.float32)
    want[0, 0], want[0, 2], want[2, 1], want[2, 9], want[3, 0] = 0.5, 2, 1, -350, 1
    assert (m.toarray() == want).all(), m.toarray()
    assert list(f["labels"][()]) == [1, 0, 1, 0]
with h5py.File(sys.argv[2]) as f:
    g = f["features"]
    assert g["fields"].dtype == np.int32 and int(g.attrs["num_fields"]) == 3
EOF
else
    echo "skipped the scipy check: /usr/bin/python3 lacks h5py or scipy"
fi
echo "PASS: import libsvm, libffm and synthetic-ctr"

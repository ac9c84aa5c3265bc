#!/bin/sh
# `pipenet import`: --help and misuse; `import text` on a small file (its misuse and
# an empty file too); then (only where Debian's dataset-fashion-mnist package is
# installed; else skip) the real Fashion-MNIST import of its 60000 + 10000 samples,
# and a source directory with a truncated gzip file.
set -u
. "$(dirname "$0")/script_fixture.sh"
SRC=/usr/share/datasets/fashion-mnist

"$PIPENET" import --help | grep -q '^usage: pipenet import fashion-mnist' || fail "import --help"
"$PIPENET" import fashion-mnist --help | grep -q -- '--src DIR' || fail "dataset --help"
err=$("$PIPENET" import fashion-mnist 2>&1); rc=$?
[ $rc -eq 2 ] || fail "missing --out: exit $rc, expected 2"
echo "$err" | grep -q '^pipenet: error: .*--out' || fail "missing --out message: $err"
err=$("$PIPENET" import cifar --out /nonexistent 2>&1); rc=$?
[ $rc -eq 2 ] || fail "unknown dataset: exit $rc, expected 2"
echo "$err" | grep -q "unknown dataset 'cifar'" || fail "unknown dataset message: $err"

"$PIPENET" import --help | grep -q '^       pipenet import text FILE\.\.\. --out DIR --seq T' ||
    fail "import --help lacks text"
ttmp=$tmp/text
mkdir "$ttmp" || fail "mkdir"
i=0; while [ $i -lt 20 ]; do echo "line $i of a small text"; i=$((i + 1)); done > "$ttmp/a.txt"
err=$("$PIPENET" import text "$ttmp/a.txt" --out "$ttmp/t" 2>&1); rc=$?
[ $rc -eq 2 ] || fail "import text without --seq: exit $rc, expected 2"
echo "$err" | grep -q -- 'needs --seq T' || fail "missing --seq message: $err"
err=$("$PIPENET" import text "$ttmp/a.txt" --out "$ttmp/t" --seq 0 2>&1); rc=$?
[ $rc -eq 2 ] || fail "import text --seq 0: exit $rc, expected 2"
echo "$err" | grep -q "^pipenet: error: --seq: expected an integer" || fail "--seq 0 message: $err"
err=$("$PIPENET" import text --out "$ttmp/t" --seq 8 2>&1); rc=$?
[ $rc -eq 2 ] || fail "import text without FILE: exit $rc, expected 2"
: > "$ttmp/empty.txt"
err=$("$PIPENET" import text "$ttmp/a.txt" "$ttmp/empty.txt" --out "$ttmp/t" --seq 8 2>&1); rc=$?
[ $rc -eq 1 ] || fail "empty text file: exit $rc, expected 1"
echo "$err" | grep -q "^pipenet: error: $ttmp/empty.txt: empty file" || fail "empty: $err"
# 20 lines of 23 or 24 bytes: 470 bytes; 0.2 of them (94) for test.h5: (376 - 1) / 8 = 46
# train samples, (94 - 1) / 8 = 11 test samples
out=$("$PIPENET" import text "$ttmp/a.txt" --out "$ttmp/t" --seq 8 --eval-fraction 0.2 2>&1)
rc=$?
[ $rc -eq 0 ] || fail "import text exited $rc: $out"
echo "$out" | grep -qx "wrote $ttmp/t/train.h5: 46 samples" || fail "text train summary: $out"
echo "$out" | grep -qx "wrote $ttmp/t/test.h5: 11 samples" || fail "text test summary: $out"
"$PIPENET" inspect "$ttmp/t/train.h5" | grep -q '/tokens  *int32  *\[46, 8\]' ||
    fail "inspect: tokens shape"
rm -rf "$ttmp"

if [ ! -f "$SRC/train-images-idx3-ubyte.gz" ]; then
    echo "SKIP: $SRC not installed (apt install dataset-fashion-mnist)"
    exit 77
fi

out=$("$PIPENET" import fashion-mnist --out "$tmp/fm" 2>&1); rc=$?
[ $rc -eq 0 ] || fail "import exited $rc: $out"
echo "$out" | grep -qx "wrote $tmp/fm/train.h5: 60000 samples" || fail "no train summary: $out"
echo "$out" | grep -qx "wrote $tmp/fm/test.h5: 10000 samples" || fail "no test summary: $out"
[ "$(ls "$tmp/fm" | sort | tr '\n' ' ')" = "test.h5 train.h5 " ] ||
    fail "out dir holds: $(ls "$tmp/fm")"
# float32 features alone take N * 784 * 4 bytes (uncompressed chunks)
[ "$(wc -c < "$tmp/fm/train.h5")" -ge 188160000 ] || fail "train.h5 too small"
[ "$(wc -c < "$tmp/fm/test.h5")" -ge 31360000 ] || fail "test.h5 too small"
head -c 8 "$tmp/fm/train.h5" | od -An -c | grep -q 'H   D   F' || fail "train.h5 is not HDF5"
if command -v h5dump >/dev/null 2>&1; then
    h5dump -H "$tmp/fm/train.h5" | grep -q '( 60000, 784 )' || fail "h5dump: features shape"
    h5dump -H "$tmp/fm/test.h5" | grep -q '( 10000 )' || fail "h5dump: labels shape"
fi

# a truncated images file: exit 1, the file named, nothing left behind
mkdir "$tmp/bad" || fail "mkdir"
for f in train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz; do
    ln -s "$SRC/$f" "$tmp/bad/$f" || fail "ln"
done
head -c 1000000 "$SRC/train-images-idx3-ubyte.gz" > "$tmp/bad/train-images-idx3-ubyte.gz"
err=$("$PIPENET" import fashion-mnist --src "$tmp/bad" --out "$tmp/out_bad" 2>&1 >/dev/null); rc=$?
[ $rc -eq 1 ] || fail "truncated source: exit $rc, expected 1"
echo "$err" | grep -q "^pipenet: error: $tmp/bad/train-images-idx3-ubyte.gz: truncated" ||
    fail "truncated source message: $err"
[ -z "$(ls "$tmp/out_bad")" ] || fail "truncated source left: $(ls "$tmp/out_bad")"
echo "PASS: import"

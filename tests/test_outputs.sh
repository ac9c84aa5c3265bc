#!/bin/sh
# No output replaces an input: `train --metrics/--trace`, `plan --save-times`,
# `infer --out`, `export --out` and `import text --out` refuse, before any work and
# with exit 2 and one message naming the option and the path, a path that is one of
# the command's inputs (compared as files: "./x", links), the snapshot directory or a
# snapshot's name in it, or a directory; under mpirun rank 0 says it once and every
# rank stops. Outputs written whole go through a temporary name and a rename (a hard
# link to the old file keeps the old contents), a stream is written in place (a link
# to stdout stays a link). Skips (77) without the Debian dataset package.
set -u
. "$(dirname "$0")/script_fixture.sh"
import_fashion_mnist
here=$(cd "$(dirname "$0")/.." && pwd)
# a copy: a regression overwrites this one, not the source tree's
cp "$here/models/fashion_mlp.json" "$tmp/model.json"
model=$tmp/model.json data=$tmp/fm/train.h5 eval=$tmp/fm/test.h5

# train [options]: a few steps of the model under a timeout
train() {
    timeout -s KILL 120 "$PIPENET" train "$model" --data "$data" --eval "" --steps 4 \
        --batch 64 --threads 1 --log-every 1000 "$@"
}
# sums: the checksums of every input the cases below name (and $extra: more of them)
extra=
sums() { cksum "$model" "$data" "$eval" "$tmp/snap/"* "$tmp/resume.h5" $extra 2>/dev/null; }
# refused WANT COMMAND...: COMMAND exits 2 before any work, saying WANT once
refused() {
    want=$1; shift
    expect 2 "pipenet: error: $want" "$@"
    [ "$(grep -c "pipenet: error" "$tmp/out")" -eq 1 ] || { cat "$tmp/out"; fail "not one message: $*"; }
    grep -q "^training \|^step \|^measuring" "$tmp/out" && { cat "$tmp/out"; fail "worked before refusing: $*"; }
    [ "$(sums)" = "$before" ] || fail "an input changed: $*"
}

train --snapshot-dir "$tmp/snap" --snapshot-every 2 >"$tmp/first.out" 2>&1 ||
    { cat "$tmp/first.out"; fail "first run"; }
cp "$tmp/snap/snapshot-0000000002.h5" "$tmp/resume.h5"
ln -s "$data" "$tmp/data_link"
mkdir "$tmp/outdir"
before=$(sums)

# train: each input, spelled another way
refused "--metrics '$tmp/./model.json' is the model file" train --metrics "$tmp/./model.json"
refused "--metrics '$tmp/data_link' is the training data file" train --metrics "$tmp/data_link"
refused "--trace '$tmp/fm/../fm/test.h5' is the evaluation data file" \
    train --eval "$eval" --trace "$tmp/fm/../fm/test.h5"
refused "--metrics '$tmp/snap' is the snapshot directory" \
    train --snapshot-dir "$tmp/snap" --metrics "$tmp/snap"
refused "--trace '$tmp/snap/snapshot-0000000004.h5' is a name the run uses for its own files in the snapshot directory" \
    train --snapshot-dir "$tmp/snap" --trace "$tmp/snap/snapshot-0000000004.h5"
refused "--metrics '$tmp/snap/./snapshot-0000000006.h5' is a name the run uses" \
    train --snapshot-dir "$tmp/snap" --metrics "$tmp/snap/./snapshot-0000000006.h5"
refused "--metrics '$tmp/snap/pipenet.lock' is a name the run uses" \
    train --snapshot-dir "$tmp/snap" --metrics "$tmp/snap/pipenet.lock"
refused "--metrics '$tmp/./resume.h5' is the snapshot resumed from" \
    train --resume "$tmp/resume.h5" --metrics "$tmp/./resume.h5"
refused "--trace '$tmp/./both.json' is the --metrics file" \
    train --metrics "$tmp/both.json" --trace "$tmp/./both.json"
refused "--trace '$tmp/outdir' is a directory" train --trace "$tmp/outdir"
refused "--metrics '$tmp/outdir' is a directory" train --metrics "$tmp/outdir"
echo "ok: train refuses --metrics and --trace over its inputs and directories, before training"

# under mpirun: one message, from rank 0; every rank stops before training
mpirun --oversubscribe -np 2 "$PIPENET" train "$model" --data "$data" --eval "" --steps 4 \
    --batch 64 --threads 1 --stages 2 --metrics "$tmp/./data_link" >"$tmp/out" 2>&1
rc=$?
[ "$rc" -ne 0 ] || { cat "$tmp/out"; fail "mpirun: exit 0"; }
[ "$(grep -c "pipenet: error: --metrics '$tmp/./data_link' is the training data file" "$tmp/out")" -eq 1 ] ||
    { cat "$tmp/out"; fail "mpirun: not one message from rank 0"; }
grep -q "^training \|^step \|\[rank 1\]" "$tmp/out" && { cat "$tmp/out"; fail "mpirun: trained or rank 1 spoke"; }
[ "$(sums)" = "$before" ] || fail "mpirun: an input changed"
echo "ok: under mpirun, one message and no training"

# plan --save-times: the model file and a directory are refused before measuring;
# the file is written whole (a hard link to the old one keeps the old contents)
refused "--save-times '$tmp/./model.json' is the model file" \
    "$PIPENET" plan "$model" --measure --repeat 1 --save-times "$tmp/./model.json"
refused "--save-times '$tmp/outdir' is a directory" \
    "$PIPENET" plan "$model" --measure --repeat 1 --save-times "$tmp/outdir"
echo old >"$tmp/times.json"
ln "$tmp/times.json" "$tmp/times.old"
"$PIPENET" plan "$model" --measure --repeat 1 --save-times "$tmp/times.json" >"$tmp/out" 2>&1 ||
    { cat "$tmp/out"; fail "plan --save-times"; }
[ "$(cat "$tmp/times.old")" = old ] || fail "--save-times wrote into the old file, not a new one"
grep -q '"format": "pipenet layer times"' "$tmp/times.json" || fail "--save-times: no times"
echo "ok: plan --save-times refuses the model and directories, and writes a new file"

# --trace: written whole over a regular file, in place into a stream (a link of our
# own to stdout, as /dev/stdout is: a regression replaces this link, not the system's)
echo old >"$tmp/trace.json"
ln "$tmp/trace.json" "$tmp/trace.old"
train --trace "$tmp/trace.json" >"$tmp/out" 2>&1 || { cat "$tmp/out"; fail "train --trace"; }
[ "$(cat "$tmp/trace.old")" = old ] || fail "--trace wrote into the old file, not a new one"
grep -q '"traceEvents"' "$tmp/trace.json" || fail "--trace: no trace"
ln -s /proc/self/fd/1 "$tmp/stdout"
train --trace "$tmp/stdout" >"$tmp/out" 2>"$tmp/err" || { cat "$tmp/out" "$tmp/err"; fail "--trace to stdout"; }
[ -L "$tmp/stdout" ] || fail "--trace to a link to stdout replaced the link"
grep -q '"traceEvents"' "$tmp/out" && grep -q '^training ' "$tmp/out" ||
    fail "--trace to stdout: the trace or the progress lines are missing: $(head -c 300 "$tmp/out")"
ls "$tmp" | grep -q 'tmp-' && fail "a temporary file is left: $(ls "$tmp")"
echo "ok: --trace replaces a file whole and writes a stream in place"

# infer, export, import: the same rule (their HDF5 outputs refuse streams too)
"$PIPENET" export "$tmp/snap" --out "$tmp/model.h5" >"$tmp/out" 2>&1 || { cat "$tmp/out"; fail "export"; }
extra=$tmp/model.h5
before=$(sums)
refused "--out '$tmp/outdir' is a directory" "$PIPENET" export "$tmp/snap" --out "$tmp/outdir"
refused "--out '$tmp/stdout' is not a regular file" "$PIPENET" export "$tmp/snap" --out "$tmp/stdout"
refused "--out '$tmp/snap/../snap/snapshot-0000000004.h5' is the file exported from" \
    "$PIPENET" export "$tmp/snap" --out "$tmp/snap/../snap/snapshot-0000000004.h5"
refused "--out '$tmp/outdir' is a directory" \
    "$PIPENET" infer "$tmp/model.h5" --data "$eval" --out "$tmp/outdir"
refused "--out '$tmp/stdout' is not a regular file" \
    "$PIPENET" infer "$tmp/model.h5" --data "$eval" --out "$tmp/stdout"
[ -L "$tmp/stdout" ] || fail "an HDF5 output replaced the link to stdout"
mkdir "$tmp/text"
for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
    echo "line $i of a text that the importer would turn into samples"
done >"$tmp/text/train.h5"
extra="$tmp/model.h5 $tmp/text/train.h5"
before=$(sums)
refused "--out '$tmp/text/train.h5' is one of the files read" \
    "$PIPENET" import text "$tmp/text/./train.h5" --out "$tmp/text" --seq 4
echo "ok: infer, export and import text refuse the same outputs"
echo "PASS: outputs"

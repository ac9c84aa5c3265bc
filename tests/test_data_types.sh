#!/bin/sh
# Datasets as numpy writes them (docs/formats.md, "Element types"): HDF5 converts
# other widths on reading, and what it cannot read says what to write instead.
#  1. float64 features with int64 labels, uint8 labels, and float ids holding whole
#     numbers train exactly as the float32/int32 file (same parameter hash), read
#     from the file and from memory; float16 features train; the log says each
#     conversion once per dataset, also on 2 stages x 2 replicas; infer reads them;
#  2. a regression target of shape [N] (float64) trains as [N, 1] (float32);
#  3. ids beyond int32 (int64, uint64) and floats that are not whole numbers where
#     ids are expected are refused, naming file, dataset, sample and value, read
#     from memory or the file;
#  4. strings, enums, integers on a float input, and shapes that do not fit are
#     refused saying what the file holds and what to write; a missing "size" on an
#     input says that "ids": true may be what is meant.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/script_fixture.sh"
. "$here/tiny_fixture.sh"
cd "$tmp" || exit 1

# model FILE X Y [SIZE]: a classifier of X (size 4) with Y as its labels (ids), or,
# with SIZE, a regression onto Y of that size (mse)
model() {
    if [ $# -eq 4 ]; then
        y="{\"dataset\": \"$3\", \"size\": $4}" out=$4 loss=mse
    else
        y="{\"dataset\": \"$3\", \"ids\": true}" out=3 loss=softmax_xent
    fi
    cat >"$1" <<EOF
{"name": "tiny", "inputs": {"x": {"dataset": "$2", "size": 4}, "y": $y},
 "layers": [{"name": "out", "type": "fc", "input": "x", "size": $out},
            {"name": "loss", "type": "$loss", "input": ["out", "y"]}],
 "train": {"batch": 8, "seed": 1, "optimizer": {"type": "sgd", "lr": 0.1}}}
EOF
}
# says NAME COUNT TEXT: NAME.out holds TEXT on exactly COUNT lines
says() {
    n=$(grep -cF -- "$3" "$1.out")
    [ "$n" -eq "$2" ] || { cat "$1.out"; fail "$1: '$3' on $n lines, not $2"; }
}
# ids AT VALUE: 40 labels i % 3 (as h5_fixture dataset writes them), VALUE at sample AT
ids() {
    i=0
    while [ $i -lt 40 ]; do
        if [ $i -eq "$1" ]; then printf '%s ' "$2"; else printf '%d ' $((i % 3)); fi
        i=$((i + 1))
    done
}

"$fix" dataset plain.h5 40 || fail "h5_fixture dataset"
model m.json features labels
train plain m.json plain.h5
trained plain
plain=$(hash_of plain)

# 1. numpy's dtypes train as float32/int32 do
cp plain.h5 wide.h5
"$fix" retype wide.h5 features float64 && "$fix" retype wide.h5 labels int64 || fail "retype"
"$fix" typed wide.h5 labels_u8 uint8 40 $(ids -1 0) || fail "typed uint8"
"$fix" typed wide.h5 labels_f float64 40 $(ids -1 0) || fail "typed float64 ids"
"$fix" typed wide.h5 features_f16 float16 40x4 1 0.01 0.5 -2 || fail "typed float16"
for cache in 0 1024; do
    train "wide$cache" m.json wide.h5 --data-cache $cache
    trained "wide$cache" "$plain"
done
says wide0 1 "wide.h5: dataset '/features': float64 converted to float32 as it is read"
says wide0 1 "wide.h5: dataset '/labels': int64 converted to int32 as it is read (each value must fit an int32)"
model m_u8.json features labels_u8
train u8 m_u8.json wide.h5
trained u8 "$plain"
says u8 1 "dataset '/labels_u8': uint8 converted to int32 as it is read"
model m_f.json features labels_f
train fids m_f.json wide.h5
trained fids "$plain"
says fids 1 "dataset '/labels_f': float64 converted to int32 as it is read (each value must be a whole number)"
model m_f16.json features_f16 labels
train f16 m_f16.json wide.h5
trained f16
says f16 1 "dataset '/features_f16': float16 converted to float32 as it is read"
says plain 0 "converted"
cp wide.h5 wide_eval.h5
timeout 300 mpirun --oversubscribe -np 4 "$PIPENET" train m.json --data wide.h5 \
    --eval wide_eval.h5 --stages 2 --steps 4 --threads 1 --log-every 1000 >mpi.out 2>&1
rc=$?
trained mpi
for f in wide wide_eval; do # by one rank of the 4, the stage that reads it first
    says mpi 1 "] $f.h5: dataset '/features': float64 converted"
    says mpi 1 "] $f.h5: dataset '/labels': int64 converted"
done
"$PIPENET" train m.json --data plain.h5 --eval= --steps 4 --threads 1 --snapshot-dir snap \
    >snap.out 2>&1 || { cat snap.out; fail "snapshot"; }
snapshot=$(ls snap/snapshot-*.h5 | tail -1)
for f in plain wide; do
    "$PIPENET" infer "$snapshot" --data $f.h5 --out "p_$f.h5" >"infer_$f.out" 2>&1 ||
        { cat "infer_$f.out"; fail "infer on $f.h5"; }
done
expect 0 "0 differ" "$PIPENET" inspect p_wide.h5 --compare p_plain.h5
echo "ok: float64, float16, int64, uint8 and whole float ids train (and infer) as float32/int32, said once"

# 2. a regression target of numpy's shape [N]
cp plain.h5 reg.h5
"$fix" typed reg.h5 target float32 40x1 0.5 1.5 -2 3.25 || fail "typed target"
cp reg.h5 regN.h5
"$fix" retype regN.h5 target float64 40 || fail "retype target"
model r.json features target 1
train reg1 r.json reg.h5
trained reg1
train regN r.json regN.h5
trained regN "$(hash_of reg1)"
echo "ok: a target [N] (float64) trains as [N, 1] (float32)"

# 3. ids that do not fit, read from memory and from the file
cp plain.h5 bad.h5
"$fix" typed bad.h5 big int64 40 $(ids 7 5000000000) || fail "typed int64"
"$fix" typed bad.h5 huge uint64 40 $(ids 9 18446744073709551615) || fail "typed uint64"
"$fix" typed bad.h5 frac float64 40 $(ids 5 2.5) || fail "typed frac"
model m_big.json features big
model m_huge.json features huge
model m_frac.json features frac
for cache in 0 1024; do
    train "big$cache" m_big.json bad.h5 --data-cache $cache
    refused "big$cache" "bad.h5: dataset '/big', sample 7: id 5000000000 is outside int32's range, [-2147483648, 2147483647] (input 'y')"
    train "huge$cache" m_huge.json bad.h5 --data-cache $cache
    refused "huge$cache" "bad.h5: dataset '/huge', sample 9: id 18446744073709551615 is outside int32's range"
    train "frac$cache" m_frac.json bad.h5 --data-cache $cache
    refused "frac$cache" "bad.h5: dataset '/frac', sample 5: id 2.5 is not a whole number (input 'y'; a regression target takes a \"size\" in place of \"ids\": true)"
done
echo "ok: ids beyond int32 and fractions are refused with file, dataset, sample and value"

# 4. what no conversion makes numbers of, shapes that do not fit, a missing size
cp plain.h5 odd.h5
"$fix" typed odd.h5 names string 40 cat dog bird || fail "typed string"
"$fix" typed odd.h5 flags enum 40 0 1 || fail "typed enum"
"$fix" typed odd.h5 wide_labels int64 40x2 1 || fail "typed [N, 2]"
model m_names.json features names
train names m_names.json odd.h5
refused names "odd.h5: dataset '/names' holds strings, but input 'y' reads integer ids: write integers (numpy: class names become ids with np.unique(a, return_inverse=True)[1])"
model m_flags.json features flags
train flags m_flags.json odd.h5
refused flags "odd.h5: dataset '/flags' holds an enum, but input 'y' reads integer ids: write integers (numpy: a.astype('int32'); h5py stores numpy's bool as an enum)"
model m_xstr.json names labels
train xstr m_xstr.json odd.h5
refused xstr "odd.h5: dataset '/names' holds strings, but input 'x' reads floats: write floats (numpy: a.astype('float32'))"
model m_xint.json labels labels
train xint m_xint.json wide.h5
refused xint "wide.h5: dataset '/labels' holds int64, but input 'x' reads floats: if they are class ids, write \"ids\": true on input 'x' in place of its \"size\"; if they are values, write floats (numpy: a.astype('float32'))"
model m_shape.json features wide_labels
train shape m_shape.json odd.h5
refused shape "odd.h5: dataset '/wide_labels': shape [40, 2] does not fit input 'y' (one id a sample): write [40] or [40, 1], or set \"seq\": 2 on input 'y'"
model r2.json features wide_labels 1
train rshape r2.json odd.h5
refused rshape "odd.h5: dataset '/wide_labels' holds int64, but input 'y' reads floats"
"$fix" typed odd.h5 target2 float64 40x2 1 || fail "typed target2"
model r3.json features target2 1
train rshape2 r3.json odd.h5
refused rshape2 "odd.h5: dataset '/target2': shape [40, 2] does not fit input 'y' (one value a sample): write [40] or [40, 1], or set \"size\": 2 on input 'y'"
sed 's/, "ids": true//' m.json >nosize.json
train nosize nosize.json plain.h5
refused nosize "nosize.json: inputs.y.size: expected an integer >= 1 (required), or, if dataset 'labels' holds class ids (integers), \"ids\": true in its place, found nothing (layer 'y', data)"
echo "ok: strings, enums, integer features, shapes and a missing size say what to write"
echo "PASS: data types"

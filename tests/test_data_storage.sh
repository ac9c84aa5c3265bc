#!/bin/sh
# Data that is not there is not zeros (docs/formats.md, "Values in other files"):
# HDF5 reads a virtual dataset's (VDS) missing source, and the part of an external
# dataset's raw file past its end, as the fill value without an error. So:
#  1. a VDS over two source files with both there, and an external dataset over two
#     raw files with both whole, train (and read the same as the plain file);
#     `inspect` calls them "virtual" with their sources and "external" with their
#     files, not "contiguous";
#  2. a source file missing or short, or a raw file missing or cut short: `train`
#     refuses the file before training, naming the file, the dataset and the source;
#     `inspect` lists why and exits 1; `inspect --compare` refuses to compare;
#  3. a raw file cut short during a run is found at the next epoch's start;
#  4. a snapshot whose parameter is virtual or external is refused even when its
#     source is there (a snapshot holds its own values, under its checksums);
#  5. `infer` (the same reader) runs on a whole VDS and refuses a broken one.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/script_fixture.sh"
. "$here/tiny_fixture.sh"
cd "$tmp" || exit 1 # external files are found from the current directory (HDF5's rule)
tiny_model model.json

"$fix" dataset plain.h5 40 || fail "h5_fixture dataset"
train plain model.json plain.h5
[ "$rc" -eq 0 ] || { cat plain.out; fail "plain: exit $rc"; }
plain_hash=$(hash_of plain)

# 1. whole: a VDS over part0.h5 and part1.h5 (found beside it), an external dataset
# over raw files (found from the current directory)
cp plain.h5 vds.h5
"$fix" relocate vds.h5 features virtual part0.h5 part1.h5 || fail "relocate virtual"
"$fix" relocate vds.h5 labels virtual labels.h5 || fail "relocate virtual labels"
cp plain.h5 ext.h5
"$fix" relocate ext.h5 features external f0.raw f1.raw || fail "relocate external"
for kind in vds ext; do
    train "$kind" model.json "$kind.h5"
    [ "$rc" -eq 0 ] || { cat "$kind.out"; fail "$kind: a whole $kind dataset refused (exit $rc)"; }
    [ "$(hash_of "$kind")" = "$plain_hash" ] ||
        fail "$kind: $(hash_of "$kind"), the plain file's $plain_hash"
done
expect 0 '/features .*\[40, 4\] *virtual$' "$PIPENET" inspect vds.h5
grep -q 'sources: part0.h5:features, part1.h5:features$' "$tmp/out" || { cat "$tmp/out"; fail "vds: no sources"; }
expect 0 '/features .*\[40, 4\] *external$' "$PIPENET" inspect ext.h5
grep -q 'files: f0.raw, f1.raw$' "$tmp/out" || { cat "$tmp/out"; fail "ext: no files"; }
! grep -q '/features .*contiguous\|NOT ALL' "$tmp/out" || { cat "$tmp/out"; fail "ext: contiguous, or not all there"; }
expect 0 "0 differ" "$PIPENET" inspect vds.h5 --compare plain.h5
echo "ok: a whole VDS and external dataset train as the plain file ($plain_hash), inspect names their sources"

# 2. broken: a missing source file, a missing raw file, a raw file cut short
mv part1.h5 part1.h5.away
train vds_missing model.json vds.h5
refused vds_missing "vds.h5: dataset '/features' is virtual: its rows 20 to 39 come from file" \
    "'part1.h5' (dataset 'features'), which cannot be found"
expect 1 "NOT ALL THERE: vds.h5: dataset '/features' is virtual" "$PIPENET" inspect vds.h5
grep -q "1 dataset whose values are not all there" "$tmp/out" || { cat "$tmp/out"; fail "inspect: no summary"; }
expect 1 "part1.h5" "$PIPENET" inspect vds.h5 --compare plain.h5
mv part1.h5.away part1.h5
"$fix" dataset short.h5 10 && mv short.h5 part1.h5 # 10 rows where 20 are mapped
train vds_short model.json vds.h5
refused vds_short "part1.h5', which holds 10 rows (40 values) where the mapping takes 80 values"
mv f1.raw f1.raw.away
train ext_missing model.json ext.h5
refused ext_missing "ext.h5: dataset '/features' is stored in external file 'f1.raw', which cannot be opened"
head -c 100 f1.raw.away >f1.raw
train ext_short model.json ext.h5
refused ext_short "external file 'f1.raw', which is cut short: it holds 100 bytes, the dataset takes bytes 0 to 320"
expect 1 "NOT ALL THERE: .*cut short" "$PIPENET" inspect ext.h5
echo "ok: a missing or short source or raw file is refused by train and inspect, naming it"

# 3. a raw file cut short during the run: found at the next epoch's start (the file
# is read from disk, --data-cache 0; 5 steps an epoch)
mv f1.raw.away f1.raw
"$PIPENET" train model.json --data ext.h5 --eval= --steps 100000 --threads 1 --data-cache 0 \
    --log-every 1000 --metrics steps.jsonl >during.out 2>&1 &
run=$!
n=0
while ! grep -q '"step"' steps.jsonl 2>/dev/null && [ $n -lt 600 ]; do sleep 0.1; n=$((n + 1)); done
truncate -s 100 f1.raw
wait $run
rc=$?
refused during "external file 'f1.raw', which is cut short"
echo "ok: a raw file cut short during the run stops it at the next epoch"

# 4. snapshots hold their own values
train snap model.json plain.h5 --snapshot-dir snap
snap=$(ls snap/snapshot-*.h5 | tail -1)
[ -f "$snap" ] || { cat snap.out; fail "no snapshot"; }
cp "$snap" vsnap.h5 && cp "$snap" esnap.h5
"$fix" relocate vsnap.h5 /params/out/w virtual w.h5 || fail "relocate the snapshot's out/w"
"$fix" relocate esnap.h5 /params/out/w external w.raw || fail "relocate the snapshot's out/w"
expect 1 "vsnap.h5: dataset '/params/out/w' is virtual (its values are in w.h5:/params/out/w), but this file must hold its own values" \
    "$PIPENET" inspect vsnap.h5
expect 1 "esnap.h5: dataset '/params/out/w' is external (its values are in w.raw)" \
    "$PIPENET" inspect esnap.h5
train resumed model.json plain.h5 --resume vsnap.h5 --steps 8
refused resumed "dataset '/params/out/w' is virtual"
echo "ok: a snapshot with a virtual or external parameter is refused, its source there or not"

# 5. infer reads dataset files through the same reader: whole, it runs; a source
# missing, it refuses
cp plain.h5 vinfer.h5
"$fix" relocate vinfer.h5 features virtual q0.h5 q1.h5 || fail "relocate virtual"
"$PIPENET" infer "$snap" --data vinfer.h5 >infer.out 2>&1 || { cat infer.out; fail "infer on a whole VDS"; }
mv q0.h5 q0.h5.away
"$PIPENET" infer "$snap" --data vinfer.h5 >infer_missing.out 2>&1
rc=$?
refused infer_missing "vinfer.h5: dataset '/features' is virtual: its rows 0 to 19 come from file 'q0.h5'"
echo "ok: infer runs on a whole VDS and refuses one with a source missing"
echo "PASS: data storage"

#!/bin/sh
# `pipenet train` end to end on a slice of Fashion-MNIST: runs, metrics lines,
# identical losses for the same seed, different for another seed, --steps, snapshots
# named by the model file, the warning and last line that say what is kept, and clean
# errors for bad options, bad models and missing data. Skips (77) without the
# Debian dataset package.
set -u
. "$(dirname "$0")/script_fixture.sh"
import_fashion_mnist
here=$(cd "$(dirname "$0")/.." && pwd)
model=$here/models/fashion_mlp.json

run() { # run NAME SEED [extra args]: 25 steps of batch 64 with metrics
    name=$1 seed=$2; shift 2
    "$PIPENET" train "$model" --data "$tmp/fm/train.h5" --eval "$tmp/fm/test.h5" \
        --steps 25 --batch 64 --seed "$seed" --threads 1 --metrics "$tmp/$name.jsonl" "$@" \
        >"$tmp/$name.out" 2>&1 || { cat "$tmp/$name.out"; fail "train $name exited non-zero"; }
}
run a 7
run b 7
run c 8

# metrics: 25 step lines with the promised fields, then one evaluation line
[ "$(grep -c '"step"' "$tmp/a.jsonl")" -eq 26 ] || fail "expected 26 metrics lines"
for key in '"step": 25' '"epoch": 1' '"loss":' '"lr":' '"samples_per_s":' '"eval_loss":' \
           '"eval_accuracy":'; do
    grep -q "$key" "$tmp/a.jsonl" || fail "metrics lack $key"
done
losses() { grep -o '"loss": [^,]*' "$1"; }
[ "$(losses "$tmp/a.jsonl")" = "$(losses "$tmp/b.jsonl")" ] || fail "same seed, different losses"
[ "$(losses "$tmp/a.jsonl")" != "$(losses "$tmp/c.jsonl")" ] || fail "other seed, same losses"
first=$(losses "$tmp/a.jsonl" | head -1 | cut -d' ' -f2)
last=$(losses "$tmp/a.jsonl" | tail -1 | cut -d' ' -f2)
awk "BEGIN { exit !($last < $first) }" || fail "loss did not fall ($first -> $last)"
grep -q 'eval accuracy' "$tmp/a.out" || fail "no evaluation line in the output"
# epoch_times FILE STEPS: the epoch line's time and rate (docs/training.md,
# "Progress"): the STEPS steps' time, never "0.0 s", and STEPS x 64 samples over it
epoch_times() {
    awk -v n="$2" '/^epoch 1: / { found = 1
            if (!match($0, /\([0-9.]+ m?s, [0-9]+ samples\/s\)$/)) { bad = 1; exit }
            split(substr($0, RSTART + 1, RLENGTH - 2), f, /[ ,]+/)
            s = f[2] == "ms" ? f[1] / 1000 : f[1]
            if (s <= 0) { bad = 1; exit }
            d = (n * 64 / s - f[3]) / f[3]; if (d > 0.05 || d < -0.05) bad = 1 }
         END { exit bad || !found }' "$1" ||
        fail "epoch line's time and samples/s: $(grep '^epoch 1:' "$1")"
}
epoch_times "$tmp/a.out" 25
grep -q 'tokens' "$tmp/a.jsonl" "$tmp/a.out" && fail "tokens/s for a model without sequences"

# --eval-every 10: evaluations after steps 10 and 20 as well as at the (last) step 25,
# in the output and the metrics, epochs counted from 1 in both
run e 7 --eval-every 10
[ "$(grep -o '"step": [0-9]*, "epoch": 1, "eval_loss"' "$tmp/e.jsonl" | cut -d' ' -f2 | tr '\n' ' ')" = \
  "10, 20, 25, " ] || fail "--eval-every 10: evaluation lines $(grep eval_loss "$tmp/e.jsonl")"
grep -q '^step 10, epoch 1: eval loss [0-9.]*  eval accuracy [0-9.]*%$' "$tmp/e.out" ||
    fail "--eval-every: no line for step 10: $(cat "$tmp/e.out")"
[ "$(losses "$tmp/a.jsonl")" = "$(losses "$tmp/e.jsonl")" ] || fail "evaluations changed the training"

# snapshots named by the model file's train section: snapshot_dir relative to the
# current directory (as its data paths are), not to the model file's; snapshot_every
# and keep; each overridden on the command line, --snapshot-dir "" dropping the
# directory
mkdir -p "$tmp/models" "$tmp/run"
cat >"$tmp/models/snap.json" <<EOF
{"name": "snap", "inputs": {"x": {"dataset": "features", "size": 784},
                            "y": {"dataset": "labels", "ids": true}},
 "layers": [{"name": "h", "type": "fc", "input": "x", "size": 16, "act": "relu"},
            {"name": "out", "type": "fc", "input": "h", "size": 10},
            {"name": "loss", "type": "softmax_xent", "input": ["out", "y"]}],
 "train": {"data": "$tmp/fm/train.h5", "eval": "", "steps": 6, "batch": 64,
           "snapshot_dir": "snaps", "snapshot_every": 2, "keep": 2,
           "optimizer": {"type": "sgd", "lr": 0.1}}}
EOF
snap() { # snap NAME [options]: the model above, run in $tmp/run; output in $tmp/NAME.out
    name=$1
    shift
    (cd "$tmp/run" && "$PIPENET" train "$tmp/models/snap.json" --threads 1 "$@") \
        >"$tmp/$name.out" 2>&1 || { cat "$tmp/$name.out"; fail "train $name exited non-zero"; }
}
listing() { ls "$1" | tr '\n' ' '; }
snap file
[ "$(listing "$tmp/run/snaps")" = "snapshot-0000000004.h5 snapshot-0000000006.h5 " ] ||
    fail "model file's snapshot_dir, snapshot_every 2, keep 2: $(listing "$tmp/run/snaps")"
[ ! -e "$tmp/models/snaps" ] || fail "snapshot_dir was taken from the model file's directory"
epoch_times "$tmp/file.out" 6 # milliseconds, snapshots left out
snap cli --snapshot-dir other --snapshot-every 3 --keep 1
[ "$(listing "$tmp/run/other")" = "snapshot-0000000006.h5 " ] ||
    fail "--snapshot-dir other --snapshot-every 3 --keep 1: $(listing "$tmp/run/other")"
grep -q "^snapshot at step 3: other/snapshot-0000000003.h5" "$tmp/cli.out" ||
    fail "--snapshot-every 3 over the model's 2: $(cat "$tmp/cli.out")"
[ "$(listing "$tmp/run/snaps")" = "snapshot-0000000004.h5 snapshot-0000000006.h5 " ] ||
    fail "--snapshot-dir other wrote into the model file's directory: $(listing "$tmp/run/snaps")"
snap none --snapshot-dir ""
grep -q "snapshot at step" "$tmp/none.out" && fail "--snapshot-dir \"\" wrote a snapshot"
[ "$(listing "$tmp/run")" = "other snaps " ] || fail "--snapshot-dir \"\": $(listing "$tmp/run")"
sed 's/"keep": 2/"keep": 0/' "$tmp/models/snap.json" >"$tmp/models/keep0.json"
"$PIPENET" train "$tmp/models/keep0.json" >"$tmp/e7" 2>&1; [ $? -eq 1 ] || fail "keep 0 accepted"
grep -q "keep0.json: train.keep: expected an integer in \[1, 1048576\], found 0" "$tmp/e7" ||
    fail "keep 0 message: $(cat "$tmp/e7")"
echo "ok: snapshot_dir, snapshot_every and keep from the model file, and over them the options"

# nothing lost silently: without a snapshot directory a run warns once, at its start,
# naming both ways to give one (on 2 ranks too), and its last line says nothing was
# kept; with one, its last line names the final snapshot and the export command,
# which works as printed (quoted for the shell)
unkept='pipenet: warning: no snapshot directory: nothing of this run will be kept'
grep -q "$unkept" "$tmp/file.out" "$tmp/cli.out" && fail "warned with a snapshot directory"
[ "$(grep -c "$unkept" "$tmp/none.out")" -eq 1 ] || fail "no single warning: $(cat "$tmp/none.out")"
grep -q "(give --snapshot-dir DIR, or \"snapshot_dir\" in the train section of $tmp/models/snap.json)" \
    "$tmp/none.out" || fail "the warning names no option: $(cat "$tmp/none.out")"
[ "$(tail -1 "$tmp/none.out")" = 'nothing kept: no snapshot directory (--snapshot-dir DIR, or "snapshot_dir" in the model'"'"'s train section)' ] ||
    fail "last line without a snapshot directory: $(tail -1 "$tmp/none.out")"
[ "$(tail -1 "$tmp/file.out")" = "final snapshot: snaps/snapshot-0000000006.h5; export it with: pipenet export snaps/snapshot-0000000006.h5 --out MODEL.h5" ] ||
    fail "last line with a snapshot directory: $(tail -1 "$tmp/file.out")"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpirun --oversubscribe -np 2 "$PIPENET" train "$tmp/models/snap.json" --snapshot-dir "" \
    --stages 2 --steps 2 --threads 1 >"$tmp/none2.out" 2>&1 || fail "2 ranks: $(cat "$tmp/none2.out")"
[ "$(grep -c "$unkept" "$tmp/none2.out")" -eq 1 ] || fail "2 ranks: not one warning: $(cat "$tmp/none2.out")"
snap quoted --snapshot-dir "$tmp/it's here" --steps 2
last=$(tail -1 "$tmp/quoted.out")
command=${last#*; export it with: pipenet }
[ "$command" != "$last" ] && [ "${command% --out MODEL.h5}" != "$command" ] ||
    fail "no export command in the last line: $last"
(cd "$tmp/run" && eval "\"\$PIPENET\" ${command% --out MODEL.h5} --out \"\$tmp/quoted.h5\"") \
    >"$tmp/quoted_export.out" 2>&1 || fail "$command: $(cat "$tmp/quoted_export.out")"
grep -q "^exported $tmp/it's here/snapshot-0000000002.h5 (pipenet-snapshot, step 2) to $tmp/quoted.h5" \
    "$tmp/quoted_export.out" || fail "$command: $(cat "$tmp/quoted_export.out")"
echo "ok: warned once without a snapshot directory; the last line names the snapshot and" \
     "its export command, which works"

# errors: exit 2 for misuse, 1 for bad input, message names the culprit
"$PIPENET" train "$model" --batch zero >"$tmp/e1" 2>&1; [ $? -eq 2 ] || fail "--batch zero"
grep -q "pipenet: error: --batch" "$tmp/e1" || fail "--batch message: $(cat "$tmp/e1")"
"$PIPENET" train >/dev/null 2>&1; [ $? -eq 2 ] || fail "no model accepted"
"$PIPENET" train "$model" --seed " -1" >"$tmp/e0" 2>&1; [ $? -eq 2 ] || fail "--seed ' -1' accepted"
grep -q "pipenet: error: --seed: expected a non-negative integer, got ' -1'" "$tmp/e0" ||
    fail "--seed message: $(cat "$tmp/e0")"
"$PIPENET" train "$tmp" >"$tmp/e0" 2>&1; [ $? -eq 1 ] || fail "a directory accepted as the model"
grep -q "pipenet: error: $tmp: is a directory, not a model file" "$tmp/e0" ||
    fail "directory message: $(cat "$tmp/e0")"
"$PIPENET" train "$model" --data "$tmp/none.h5" >"$tmp/e2" 2>&1; [ $? -eq 1 ] || fail "missing data"
grep -q "none.h5" "$tmp/e2" || fail "missing data message: $(cat "$tmp/e2")"
printf '{"inputs": {"x": {"dataset": "features", "size": 784}},\n "layers": [{"name": "a", "type": "fc", "input": "x", "sise": 3}]}\n' >"$tmp/bad.json"
"$PIPENET" train "$tmp/bad.json" >"$tmp/e3" 2>&1; [ $? -eq 1 ] || fail "bad model accepted"
grep -q "bad.json: layers\[0\].sise: expected one of the keys size, bias, act, tie, found an unknown key (layer 'a', fc)" "$tmp/e3" ||
    fail "bad model message: $(cat "$tmp/e3")"
printf '{"inputs": {"x": {"dataset": "features", "size": 100}, "y": {"dataset": "labels", "ids": true}},\n "layers": [{"name": "o", "type": "fc", "input": "x", "size": 10}, {"name": "l", "type": "softmax_xent", "input": ["o", "y"]}]}\n' >"$tmp/wide.json"
"$PIPENET" train "$tmp/wide.json" --data "$tmp/fm/train.h5" >"$tmp/e4" 2>&1; [ $? -eq 1 ] || fail "size mismatch accepted"
grep -q "train.h5" "$tmp/e4" && grep -q "features" "$tmp/e4" || fail "size mismatch message: $(cat "$tmp/e4")"
printf '{"inputs": {"x": {"dataset": "features", "size": 784}, "y": {"dataset": "labels", "ids": true}},\n "layers": [{"name": "o", "type": "fc", "input": "x", "size": 5}, {"name": "l", "type": "softmax_xent", "input": ["o", "y"]}]}\n' >"$tmp/five.json"
"$PIPENET" train "$tmp/five.json" --data "$tmp/fm/train.h5" >"$tmp/e5" 2>&1; [ $? -eq 1 ] || fail "labels beyond the classes accepted"
grep -q "train.h5: dataset '/labels', sample [0-9]*: id [5-9] is outside \[0, 5) (layer 'l')" "$tmp/e5" ||
    fail "label message: $(cat "$tmp/e5")"
# a warm-up longer than the run: named as such, not as a total_steps nobody wrote
sed 's/"schedule": {"type": "cosine"}/"schedule": {"type": "cosine", "warmup_steps": 30}/' \
    "$model" >"$tmp/warm.json"
grep -q '"warmup_steps": 30' "$tmp/warm.json" || fail "could not make the warm-up model"
"$PIPENET" train "$tmp/warm.json" --data "$tmp/fm/train.h5" --eval "" --steps 6 >"$tmp/e6" 2>&1
[ $? -eq 1 ] || fail "a warm-up of 30 steps in a run of 6 accepted"
grep -q "warm.json: the cosine schedule's warmup_steps (30) leave nothing of a run of 6 steps" \
    "$tmp/e6" || fail "warm-up message: $(cat "$tmp/e6")"
echo "PASS: train"

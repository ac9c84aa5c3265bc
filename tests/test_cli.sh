#!/bin/sh
# The pipenet program's surface: help, version, `layers`, the train section's keys
# against docs/training.md, exit 2 for every command's misuse, and the bundled models
# read as models.
set -u
. "$(dirname "$0")/script_fixture.sh"
here=$(cd "$(dirname "$0")/.." && pwd)

"$PIPENET" --help | grep -q '^usage: pipenet' || fail "--help prints no usage"
"$PIPENET" --version | grep -Eq '^pipenet [0-9]+\.[0-9]+' || fail "--version"

# `layers` lists the layer table, one line a type under a header, and docs/layers.md's
# table documents the same types, no more, no fewer
"$PIPENET" layers >"$tmp/layers" || fail "layers exited non-zero"
head -1 "$tmp/layers" | grep -Eq '^type +inputs +description$' || fail "layers header: $(head -1 "$tmp/layers")"
sed 1d "$tmp/layers" | grep -Ev '^[a-z_]+ +[0-9]+(\+|-[0-9]+)? +[^ ]' &&
    fail "layers lines not of the form: type inputs description"
sed 1d "$tmp/layers" | awk '{ print $1 }' | sort >"$tmp/listed"
awk '/^\| type \|/ { on = 1; next } on && !/^\|/ { exit }
     on && /^\| `/ { split($0, f, "`"); print f[2] }' "$here/docs/layers.md" | sort >"$tmp/documented"
[ "$(wc -l <"$tmp/listed")" -ge 2 ] || fail "layers lists $(wc -l <"$tmp/listed") types"
[ "$(sort -u "$tmp/listed" | wc -l)" -eq "$(wc -l <"$tmp/listed")" ] || fail "layers lists a type twice"
diff "$tmp/documented" "$tmp/listed" >"$tmp/layers.diff" ||
    fail "docs/layers.md's layer types (<) differ from pipenet layers' (>): $(cat "$tmp/layers.diff")"

err=$("$PIPENET" frobnicate 2>&1); rc=$?
[ $rc -eq 2 ] || fail "unknown command exit $rc, expected 2"
echo "$err" | grep -q "pipenet: error: unknown command 'frobnicate'" || fail "unknown command message: $err"
err=$("$PIPENET" layers extra 2>&1) && fail "layers accepted an argument"
echo "$err" | grep -q "pipenet: error:" || fail "layers misuse message: $err"

"$PIPENET" inspect --help | grep -q 'usage: pipenet inspect' || fail "inspect --help"
missing=./no-such-dir-$$/missing.h5
err=$("$PIPENET" inspect "$missing" 2>&1); rc=$?
[ $rc -eq 1 ] || fail "inspect of a missing file exit $rc, expected 1"
echo "$err" | grep -q "pipenet: error: .*$missing" || fail "inspect message does not name the file: $err"

# The train section's keys: docs/training.md's table names those the parser takes
# (its message for an unknown key lists them all, from pn_train_keys), no more, no
# fewer, and `train --help` shows each beside its option as [train.KEY...]
cat >"$tmp/keys.json" <<'EOF'
{"inputs": {"x": {"dataset": "f", "size": 2}},
 "layers": [{"name": "o", "type": "fc", "input": "x", "size": 1}], "train": {"bogus": 1}}
EOF
err=$("$PIPENET" train "$tmp/keys.json" 2>&1) && fail "an unknown train key accepted"
keys=$(echo "$err" |
    sed -n 's/.*train\.bogus: expected one of the keys \(.*\), found an unknown key$/\1/p')
[ -n "$keys" ] || fail "unknown train key message: $err"
echo "$keys" | tr -d ' ' | tr ',' '\n' | sort >"$tmp/parsed"
awk '/^\| `train` key \|/ { on = 1; next } on && !/^\|/ { exit }
     on && /^\| `/ { split($0, f, "`"); print f[2] }' "$here/docs/training.md" | sort >"$tmp/documented"
[ "$(wc -l <"$tmp/parsed")" -ge 10 ] || fail "only $(wc -l <"$tmp/parsed") train keys in: $keys"
diff "$tmp/documented" "$tmp/parsed" >"$tmp/keys.diff" ||
    fail "docs/training.md's train keys (<) differ from the parser's (>): $(cat "$tmp/keys.diff")"
grep -qF "train.bogus: expected one of the keys $keys, found an unknown key" \
    "$here/docs/training.md" ||
    fail "docs/training.md's example of an unknown train key lists other keys than: $keys"
"$PIPENET" train --help >"$tmp/help"
while read -r key; do
    grep -q "\[train\.$key[],.]" "$tmp/help" || fail "train --help shows no [train.$key]"
done <"$tmp/parsed"

# Every wrong command line, of every command, exits 2 with one "pipenet: error:"
# line first (docs/running.md's table of exit statuses): bad or missing values,
# unknown or ambiguous options, and options that conflict or lack their object
misuse() {
    "$@" >"$tmp/misuse" 2>&1
    rc=$?
    [ $rc -eq 2 ] || { cat "$tmp/misuse"; fail "exit $rc, not 2 (a wrong command line): $*"; }
    head -1 "$tmp/misuse" | grep -q '^pipenet: error: ..' ||
        fail "no 'pipenet: error:' line first from: $* ($(head -1 "$tmp/misuse"))"
}
m=$here/models/fashion_mlp.json
misuse "$PIPENET" layers extra
misuse "$PIPENET" train
misuse "$PIPENET" train "$m" "$m"
misuse "$PIPENET" train "$m" --bogus
misuse "$PIPENET" train "$m" -x
misuse "$PIPENET" train "$m" --steps
misuse "$PIPENET" train "$m" --steps 0
misuse "$PIPENET" train "$m" --snapshot 3
grep -q "option '--snapshot' is ambiguous: it could be --snapshot-dir, --snapshot-every" \
    "$tmp/misuse" || fail "ambiguous option message: $(cat "$tmp/misuse")"
misuse "$PIPENET" train "$m" --deterministic=1
misuse "$PIPENET" train "$m" --schedule zigzag
misuse "$PIPENET" train "$m" --virtual-stages 2 --schedule gpipe
misuse "$PIPENET" train "$m" --resume-override
misuse "$PIPENET" train "$m" --resume auto
grep -q -- "--resume auto: no snapshot directory to look in (give --snapshot-dir DIR" \
    "$tmp/misuse" || fail "--resume auto message: $(cat "$tmp/misuse")"
misuse "$PIPENET" train "$m" --keep 2
misuse "$PIPENET" train "$m" --snapshot-every 5 --snapshot-dir ""
misuse "$PIPENET" train "$m" --metrics "$m"
misuse "$PIPENET" plan "$m" --bogus
misuse "$PIPENET" plan "$m" --schedule zigzag
misuse "$PIPENET" plan "$m" --threads 2
misuse "$PIPENET" infer "$tmp/m.h5"
misuse "$PIPENET" infer "$tmp/m.h5" --data "$tmp/d.h5" --batch 0
misuse "$PIPENET" infer "$tmp/m.h5" --data "$tmp/d.h5" --out "$tmp/d.h5"
misuse "$PIPENET" export "$tmp/s.h5"
misuse "$PIPENET" export "$tmp/s.h5" --out
misuse "$PIPENET" generate "$tmp/m.h5" --prompt x
misuse "$PIPENET" generate "$tmp/m.h5" --prompt x --tokens 3 --top-k 0
misuse "$PIPENET" inspect
misuse "$PIPENET" inspect "$tmp/m.h5" --compare
misuse "$PIPENET" inspect "$tmp/m.h5" --tolerance 1
misuse "$PIPENET" import
misuse "$PIPENET" import fashion-mnist --out "$tmp/fm" --seq 3
misuse "$PIPENET" import text "$tmp/t.txt" --out "$tmp/t"
misuse "$PIPENET" frobnicate
# a snapshot directory from the model file serves --resume auto: past the command
# line, the missing data is an error of the run (1)
cat >"$tmp/sd.json" <<EOF
{"inputs": {"x": {"dataset": "f", "size": 2}, "y": {"dataset": "l", "ids": true}},
 "layers": [{"name": "o", "type": "fc", "input": "x", "size": 2},
            {"name": "loss", "type": "softmax_xent", "input": ["o", "y"]}],
 "train": {"snapshot_dir": "$tmp/sd"}}
EOF
"$PIPENET" train "$tmp/sd.json" --resume auto >"$tmp/sd.out" 2>&1; rc=$?
[ $rc -eq 1 ] && grep -q "no training data" "$tmp/sd.out" ||
    fail "--resume auto with the model's snapshot_dir: exit $rc, $(cat "$tmp/sd.out")"
# every bundled model (models/*.json) is one pipenet takes: `plan` reads it whole
models=$(cd "$(dirname "$0")/../models" && pwd)
for m in "$models"/*.json; do
    "$PIPENET" plan "$m" >"$tmp/plan.out" 2>&1 || fail "pipenet plan $m: $(cat "$tmp/plan.out")"
done
echo "PASS: cli"

#!/bin/sh
# The pipenet program's surface: help, version, `layers`, and errors for misuse.
set -u
PIPENET=${PIPENET:-./pipenet}
fail() { echo "FAIL: $*"; exit 1; }

"$PIPENET" --help | grep -q '^usage: pipenet' || fail "--help prints no usage"
"$PIPENET" --version | grep -Eq '^pipenet [0-9]+\.[0-9]+' || fail "--version"
"$PIPENET" layers --help | grep -q 'usage: pipenet layers' || fail "layers --help"

out=$("$PIPENET" layers) || fail "layers exited non-zero"
for t in data fc act embedding layernorm add concat dropout attention softmax_xent mse lstm gru seq_pool; do
    echo "$out" | grep -Eq "^$t +[0-9]" || fail "layers does not list $t"
done
[ "$(echo "$out" | wc -l)" -eq 15 ] || fail "layers lists $(($(echo "$out" | wc -l) - 1)) types, expected 14"

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
here=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
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
echo "PASS: cli"

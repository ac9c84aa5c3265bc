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
echo "PASS: cli"

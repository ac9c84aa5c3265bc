#!/bin/sh
# A resumed run trims its --metrics file back to the snapshot's step, but only a
# regular file: a FIFO (with a reader), a link to this program's own stdout (what
# /dev/stdout is) and /dev/stdout itself redirected to a file are never read back,
# renamed over or truncated; the run appends to them and says so once on stderr.
# A link to a regular file is trimmed through the file it names and stays a link.
# Every run is under a timeout: reading its own output back would block for ever
# (SIGTERM is caught), so a regression fails instead of hanging. Skips (77) without
# the Debian dataset package.
set -u
. "$(dirname "$0")/script_fixture.sh"
import_fashion_mnist
here=$(cd "$(dirname "$0")/.." && pwd)
model=$here/models/fashion_mlp.json

# train NAME [options]: 10 steps under a timeout; stdout in $tmp/NAME.out, stderr in
# $tmp/NAME.err, the exit status in $rc (137: killed by the timeout)
train() {
    name=$1; shift
    timeout -s KILL 60 "$PIPENET" train "$model" --data "$tmp/fm/train.h5" --eval "" \
        --steps 10 --batch 64 --threads 1 --log-every 1000 "$@" >"$tmp/$name.out" 2>"$tmp/$name.err"
    rc=$?
}
# ran NAME: the run exited 0, and did not block until the timeout killed it
ran() {
    [ "$rc" -ne 137 ] || fail "$1: blocked until killed after 60 s (reading its own output?)"
    [ "$rc" -eq 0 ] || { cat "$tmp/$1.out" "$tmp/$1.err"; fail "$1: exit $rc"; }
}
# steps FILE: the steps of FILE's metrics lines, on one line
steps() { grep -o '"step": [0-9]*' "$1" | cut -d' ' -f2 | tr '\n' ' '; }
# said_once NAME: the run's stderr says once that it appends without trimming
said_once() {
    [ "$(grep -c "is not a regular file: appending to it without dropping" "$tmp/$1.err")" -eq 1 ] ||
        fail "$1: no single line about appending: $(cat "$tmp/$1.err")"
}

train first --snapshot-dir "$tmp/snap" --snapshot-every 5 --metrics "$tmp/first.jsonl"
ran first
snap5=$tmp/snap/snapshot-0000000005.h5
[ -f "$snap5" ] || fail "no snapshot at step 5: $(ls "$tmp/snap")"

# a FIFO, its reader started first
mkfifo "$tmp/fifo"
cat "$tmp/fifo" >"$tmp/fifo.lines" &
reader=$!
train fifo --resume "$snap5" --metrics "$tmp/fifo"
kill "$reader" 2>/dev/null
wait "$reader" 2>/dev/null
ran fifo
[ -p "$tmp/fifo" ] || fail "fifo: the FIFO was replaced"
[ "$(steps "$tmp/fifo.lines")" = "6 7 8 9 10 " ] ||
    fail "fifo: the reader got steps '$(steps "$tmp/fifo.lines")', not 6..10"
said_once fifo
echo "ok: a FIFO is appended to, never read back"

# a link of the test's own to /proc/self/fd/1, as /dev/stdout is (a regression
# replaces this link, not the system's /dev/stdout), stdout redirected to a file
ln -s /proc/self/fd/1 "$tmp/stdout"
train linked --resume "$snap5" --metrics "$tmp/stdout"
ran linked
[ -L "$tmp/stdout" ] || fail "linked: the link to /proc/self/fd/1 was replaced by a file"
[ "$(steps "$tmp/linked.out")" = "6 7 8 9 10 " ] ||
    fail "linked: stdout holds steps '$(steps "$tmp/linked.out")', not 6..10: $(cat "$tmp/linked.out")"
grep -q "^resuming from $snap5: step 5" "$tmp/linked.out" ||
    fail "linked: the progress lines on stdout were lost: $(cat "$tmp/linked.out")"
said_once linked
echo "ok: a link to stdout stays a link; metrics and progress lines both reach the file"

# a link to a regular file holding the first run's 10 steps: trimmed to 5 through the
# link, which stays, then 6..10 again
cp "$tmp/first.jsonl" "$tmp/real.jsonl"
ln -s "$tmp/real.jsonl" "$tmp/link.jsonl"
train tolink --resume "$snap5" --metrics "$tmp/link.jsonl"
ran tolink
[ -L "$tmp/link.jsonl" ] || fail "tolink: the link to a regular file was replaced"
[ "$(steps "$tmp/real.jsonl")" = "1 2 3 4 5 6 7 8 9 10 " ] ||
    fail "tolink: the file holds steps '$(steps "$tmp/real.jsonl")', not 1..10 once each"
grep -q "^metrics: dropped 5 lines past step 5" "$tmp/tolink.out" ||
    fail "tolink: no word of the trim: $(cat "$tmp/tolink.out")"
grep -q "not a regular file" "$tmp/tolink.err" && fail "tolink: a regular file called a stream"
echo "ok: a link to a regular file is trimmed through it and stays a link"

# /dev/stdout itself, once the cases above (the same code path through a link of our
# own) have passed, so that a regression cannot replace the system's link
if [ -L /dev/stdout ]; then
    train devstdout --resume "$snap5" --metrics /dev/stdout
    ran devstdout
    [ -L /dev/stdout ] || fail "devstdout: /dev/stdout is no longer a link"
    [ "$(steps "$tmp/devstdout.out")" = "6 7 8 9 10 " ] ||
        fail "devstdout: stdout holds steps '$(steps "$tmp/devstdout.out")', not 6..10"
    grep -q "^resuming from $snap5: step 5" "$tmp/devstdout.out" ||
        fail "devstdout: the progress lines were lost: $(cat "$tmp/devstdout.out")"
    said_once devstdout
    echo "ok: --metrics /dev/stdout redirected to a file: appended, /dev/stdout intact"
else
    echo "note: /dev/stdout is not a link here: its own case skipped"
fi
echo "PASS: metrics_stream"

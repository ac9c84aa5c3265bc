#!/bin/sh
# `pipenet generate` end to end: a tiny character GPT trained 30 steps on generated
# text (`import text`), snapshot, `export`; then generate prints N bytes, a seed fixes
# the text and another one (likely) changes it, greedy ignores the seed, the cache
# changes nothing but the speed, beam 1 is greedy and beam 4 scores at least as well,
# a long prompt gets a note, examples/generate runs; tiny lstm and gru models give the
# same text cached and not, sampled and in a beam, across window cuts; a missing
# model, a model that is not over byte tokens, a reverse lstm, --tokens 0 and --top-k 0
# are refused with exit 1 or 2.
set -u
. "$(dirname "$0")/script_fixture.sh"
EXAMPLES=${TESTS_BUILDDIR:-./tests}/../examples

"$PIPENET" generate --help | grep -q '^usage: pipenet generate MODEL.h5 --prompt' ||
    fail "generate --help"

. "$(dirname "$0")/lm_fixture.sh"
import_times_table 400

# gpt VOCAB: the tiny GPT with VOCAB embedding rows and logits
gpt() {
    tiny_gpt "$1" '{"batch": 16, "steps": 30, "seed": 3, "optimizer": {"type": "adam", "lr": 0.01}}'
}
# rnn TYPE [REVERSE]: a tiny character model over a recurrent layer of TYPE, trained
# one step: further trained, it says nothing but spaces, and its beams would all be
# alike whether or not the search reorders their states right
rnn() {
    cat <<JSON
{"name": "tiny_$1",
 "inputs": {"x": {"dataset": "tokens", "ids": true, "seq": 16},
            "y": {"dataset": "targets", "ids": true, "seq": 16}},
 "layers": [
  {"name": "embed", "type": "embedding", "input": "x", "vocab": 256, "size": 16},
  {"name": "rnn", "type": "$1", "input": "embed", "size": 24, "reverse": ${2:-false}},
  {"name": "logits", "type": "fc", "input": "rnn", "size": 256},
  {"name": "loss", "type": "softmax_xent", "input": ["logits", "y"]}],
 "train": {"batch": 16, "steps": 1, "seed": 3, "optimizer": {"type": "adam", "lr": 0.01}}}
JSON
}
# model NAME JSON-MAKER ARGS...: trains the model JSON-MAKER ARGS prints and exports it
# to $tmp/NAME.h5
model() {
    name=$1
    shift
    "$@" >"$tmp/$name.json"
    "$PIPENET" train "$tmp/$name.json" --data "$tmp/lm/train.h5" --threads 1 --log-every 1000 \
        --snapshot-dir "$tmp/snap_$name" >"$tmp/train_$name.out" 2>&1 ||
        { cat "$tmp/train_$name.out"; fail "train $name"; }
    "$PIPENET" export "$tmp/snap_$name" --out "$tmp/$name.h5" >"$tmp/export_$name.out" 2>&1 ||
        { cat "$tmp/export_$name.out"; fail "export $name"; }
}
model gpt gpt 256
model words gpt 300
model lstm rnn lstm
model gru rnn gru
model back rnn lstm true
M=$tmp/gpt.h5

# gen NAME ARGS...: generate after "3 times 4 is" into $tmp/NAME (stderr: NAME.err)
gen() {
    name=$1
    shift
    "$PIPENET" generate "$M" --prompt "3 times 4 is" "$@" >"$tmp/$name" 2>"$tmp/$name.err" ||
        { cat "$tmp/$name.err"; fail "generate $*"; }
}
# logprob NAME: the log-probability generate reported
logprob() { sed -n 's/.*log-prob \([-0-9.e+]*\) .*/\1/p' "$tmp/$1.err"; }
# same_logprob A B: both runs reported a log-prob, equal to 1e-3 (printed to 4 places)
same_logprob() {
    a=$(logprob "$1") b=$(logprob "$2")
    [ -n "$a" ] && [ -n "$b" ] &&
        awk -v a="$a" -v b="$b" 'BEGIN { d = a - b; exit !(d < 1e-3 && d > -1e-3) }'
}

gen s1 --tokens 40 --seed 1
[ "$(wc -c <"$tmp/s1")" -eq 40 ] || fail "--tokens 40 printed $(wc -c <"$tmp/s1") bytes"
grep -Eq '^generated 40 tokens in [0-9.]+ s \([0-9.]+ tokens/s, cached, sampled\), log-prob' \
    "$tmp/s1.err" || fail "summary line: $(cat "$tmp/s1.err")"
gen s1b --tokens 40 --seed 1
# the run's snapshot directory loads as its newest snapshot (the export above)
"$PIPENET" generate "$tmp/snap_gpt" --prompt "3 times 4 is" --tokens 40 --seed 1 \
    >"$tmp/dir" 2>"$tmp/dir.err" || { cat "$tmp/dir.err"; fail "generate from a directory"; }
cmp -s "$tmp/s1" "$tmp/dir" || fail "the snapshot directory and its export gave two texts"
cmp -s "$tmp/s1" "$tmp/s1b" || fail "seed 1 twice gave two texts"
gen s2 --tokens 40 --seed 2
cmp -s "$tmp/s1" "$tmp/s2" && fail "seeds 1 and 2 gave the same 40 bytes at temperature 1"
gen nc1 --tokens 40 --seed 1 --no-cache
cmp -s "$tmp/s1" "$tmp/nc1" || fail "--no-cache changed the sampled text"
grep -q "no cache" "$tmp/nc1.err" || fail "no 'no cache' in $(cat "$tmp/nc1.err")"
gen k5 --tokens 40 --seed 1 --top-k 5 --temperature 0.7
gen k5b --tokens 40 --seed 1 --top-k 5 --temperature 0.7 --no-cache
cmp -s "$tmp/k5" "$tmp/k5b" || fail "--no-cache changed the top-k text"

gen g1 --tokens 40 --temperature 0 --seed 1
gen g2 --tokens 40 --temperature 0 --seed 77
cmp -s "$tmp/g1" "$tmp/g2" || fail "greedy depends on the seed"
gen b1 --tokens 40 --beam 1
cmp -s "$tmp/g1" "$tmp/b1" || fail "beam 1 differs from greedy"
gen b4 --tokens 40 --beam 4
gen b4n --tokens 40 --beam 4 --no-cache
cmp -s "$tmp/b4" "$tmp/b4n" || fail "--no-cache changed the beam search"
[ "$(wc -c <"$tmp/b4")" -eq 40 ] || fail "beam 4 printed $(wc -c <"$tmp/b4") bytes"
lg=$(logprob g1) l4=$(logprob b4)
[ -n "$lg" ] && [ -n "$l4" ] || fail "no log-prob in $(cat "$tmp/g1.err" "$tmp/b4.err")"
awk -v g="$lg" -v b="$l4" 'BEGIN { exit !(b >= g - 1e-4) }' ||
    fail "beam 4 log-prob $l4 below greedy's $lg"
echo "greedy: $(cat "$tmp/g1" | tr '\n' '|') ($lg)"
echo "beam 4: $(cat "$tmp/b4" | tr '\n' '|') ($l4)"

# lstm and gru carry their state: the cache changes nothing over 40 tokens, more
# than the window of 16 (so the window is cut and stepped through again), sampled
# and in a beam of 3; a reverse lstm is refused, naming the layer
for r in lstm gru; do
    M=$tmp/$r.h5
    gen "$r.s" --tokens 40 --seed 5 --temperature 0.8
    gen "$r.sn" --tokens 40 --seed 5 --temperature 0.8 --no-cache
    cmp -s "$tmp/$r.s" "$tmp/$r.sn" || fail "$r: --no-cache changed the sampled text"
    same_logprob "$r.s" "$r.sn" ||
        fail "$r: log-prob $(logprob "$r.s") cached, $(logprob "$r.sn") not"
    gen "$r.b" --tokens 40 --beam 3
    gen "$r.bn" --tokens 40 --beam 3 --no-cache
    cmp -s "$tmp/$r.b" "$tmp/$r.bn" || fail "$r: --no-cache changed the beam search"
    same_logprob "$r.b" "$r.bn" ||
        fail "$r: beam log-prob $(logprob "$r.b") cached, $(logprob "$r.bn") not"
    echo "$r sampled: $(tr -c '[:print:]' '.' <"$tmp/$r.s") ($(logprob "$r.s"))"
    echo "$r beam 3: $(tr -c '[:print:]' '.' <"$tmp/$r.b") ($(logprob "$r.b"))"
done
M=$tmp/gpt.h5

# a prompt longer than the window (16): a note, and the same text as its last 16 bytes
long="0 times 0 is 0.
3 times 4 is 12.
5 times"
short=$(printf '%s' "$long" | tail -c 16)
"$PIPENET" generate "$M" --prompt "$long" --tokens 20 --seed 4 >"$tmp/long" 2>"$tmp/long.err" ||
    fail "long prompt"
grep -q "note: the prompt has 40 bytes, more than the model's window of 16" "$tmp/long.err" ||
    fail "no note on the long prompt: $(cat "$tmp/long.err")"
"$PIPENET" generate "$M" --prompt "$short" --tokens 20 --seed 4 >"$tmp/short" 2>"$tmp/short.err" ||
    fail "short prompt"
grep -q "note" "$tmp/short.err" && fail "a note on a prompt of 16 bytes"
cmp -s "$tmp/long" "$tmp/short" || fail "a long prompt is not its last 16 bytes"

# the example program, through pipenet.h only
if [ -x "$EXAMPLES/generate" ]; then
    "$EXAMPLES/generate" "$M" "3 times 4 is" 30 1 1 >"$tmp/ex" 2>"$tmp/ex.err" ||
        { cat "$tmp/ex.err"; fail "examples/generate"; }
    head -c 30 "$tmp/s1" | cmp -s - "$tmp/ex" ||
        fail "examples/generate differs from pipenet generate --seed 1"
fi

# refusals: exit PIPENET ARGS... with status E and a message matching RE
refuse() {
    e=$1 re=$2
    shift 2
    "$PIPENET" generate "$@" >"$tmp/r.out" 2>"$tmp/r.err"
    rc=$?
    [ $rc -eq "$e" ] || fail "generate $* exited $rc, not $e: $(cat "$tmp/r.err")"
    grep -q "$re" "$tmp/r.err" || fail "generate $*: no '$re' in: $(cat "$tmp/r.err")"
    [ -s "$tmp/r.out" ] && fail "generate $* printed to stdout"
    return 0
}
refuse 1 "cannot open\|No such file\|does not exist" "$tmp/missing.h5" --prompt a --tokens 3
refuse 1 "not a byte-level language model: input 'x' holds ids below 300" \
    "$tmp/words.h5" --prompt a --tokens 3
refuse 1 "layer 'rnn' step at position 0: lstm with \"reverse\": true cannot generate" \
    "$tmp/back.h5" --prompt a --tokens 3
refuse 2 "^pipenet: error: --tokens" "$M" --prompt a --tokens 0
refuse 2 "^pipenet: error: --top-k" "$M" --prompt a --tokens 3 --top-k 0
refuse 2 "^pipenet: error: --temperature" "$M" --prompt a --tokens 3 --temperature -1
refuse 2 "needs --prompt" "$M" --tokens 3
refuse 2 "at least one byte" "$M" --prompt "" --tokens 3
refuse 2 "needs --tokens" "$M" --prompt a
echo "PASS: generate"

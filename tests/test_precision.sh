#!/bin/sh
# --precision bf16 (math/precision.h, docs/training.md "Precision (bf16)"):
#  a. under --deterministic, one parameter hash per model on every layout in bf16 (1
#     process; 2 stages under gpipe and 1f1b; 2 replicas; --recompute;
#     --no-share-memory; the GPT also 2 stages x 2 virtual stages), for the tiny
#     GPT, an MLP and a sparse model (dcn: feature crosses, row-sparse tables); and
#     that hash is not fp32's;
#  b. the stage links carry half the bytes of fp32's (the run's "stage links" line),
#     per step (evaluations apart), and the memory line names a stage's work area
#     only where it has one;
#  c. the loss after 40 steps within 2% of fp32's;
#  d. snapshots hold fp32 masters: a bf16 run resumed in bf16 gives the uninterrupted
#     run's hash (masters saved rounded would not), and resumed in fp32 (or fp32 resumed in bf16) one hash on 1 process
#     and on 2 stages;
#  e. a bad value of --precision or of the train key is refused naming what is taken.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/script_fixture.sh"
. "$here/lm_fixture.sh"
need_h5_fixture
PIPENET=$(cd "$(dirname "$PIPENET")" && pwd)/$(basename "$PIPENET")
# the bundled models' "snapshot_dir" (runs/...) is relative: into $tmp, not a
# directory that another test running beside this one uses too
cd "$tmp" || fail "cd $tmp"
models=$here/../models
export OPENBLAS_NUM_THREADS=1

gpt_job 40
"$PIPENET" import synthetic-ctr --out "$tmp/ctr" --samples 2048 --test-samples 64 >/dev/null ||
    fail "import synthetic-ctr"
# shellcheck disable=SC2046
"$H5" typed "$tmp/digits.h5" features float32 512x64 $(awk 'BEGIN { for (i = 0; i < 67; i++)
    printf "%.4f ", ((i * 37) % 67) / 67 - 0.5 }') || fail "write digits.h5"
"$H5" typed "$tmp/digits.h5" labels int32 512 3 1 4 1 5 9 2 6 5 3 5 8 9 7 || fail "labels"

# run NAME MODEL DATA RANKS STEPS ARGS...: the output in $tmp/NAME
run() {
    name=$1 model=$2 data=$3 np=$4 steps=$5; shift 5
    timeout -s KILL 600 mpirun --oversubscribe -np "$np" "$PIPENET" train "$model" \
        --data "$data" --eval "" --steps "$steps" --batch 16 --threads 1 --deterministic \
        --log-every 1000 --stall-timeout 120 "$@" >"$tmp/$name" 2>&1
    rc=$?
    [ $rc -eq 0 ] || { cat "$tmp/$name"; fail "$name: exit $rc"; }
}
hash_of() { # NAME STEPS
    h=$(sed -n "s/^parameter hash after $2 steps: //p" "$tmp/$1")
    [ -n "$h" ] || { cat "$tmp/$1"; fail "$1 printed no parameter hash"; }
    echo "$h"
}

# a. one hash per model over the layouts, in bf16; another in fp32
layouts() { # MODEL DATA TAG [LAYOUT]: LAYOUT one more (ranks and options)
    m=$1 d=$2 tag=$3
    run "$tag.1" "$m" "$d" 1 6 --precision bf16
    want=$(hash_of "$tag.1" 6)
    for lay in "2 --stages 2 --schedule gpipe --micro-batches 4" \
               "2 --stages 2 --schedule 1f1b --micro-batches 4" \
               "2 --stages 1 --micro-batches 2" \
               "2 --stages 2 --micro-batches 4 --recompute" \
               "2 --stages 2 --micro-batches 4 --no-share-memory" \
               "1 --no-share-memory" ${4:+"$4"}; do
        # shellcheck disable=SC2086
        set -- $lay
        np=$1
        shift
        run "$tag.x" "$m" "$d" "$np" 6 "$@" --precision bf16
        got=$(hash_of "$tag.x" 6)
        [ "$got" = "$want" ] ||
            fail "$tag in bf16: hash $got on '$lay', not the 1 process's $want"
    done
    run "$tag.fp32" "$m" "$d" 1 6
    [ "$(hash_of "$tag.fp32" 6)" != "$want" ] ||
        fail "$tag: the bf16 hash is fp32's ($want): nothing was rounded"
    echo "$tag: bf16 hash $want on every layout (fp32: $(hash_of "$tag.fp32" 6))"
}
layouts "$tmp/gpt.json" "$tmp/lm/train.h5" gpt \
    "2 --stages 2 --schedule interleaved --virtual-stages 2 --micro-batches 4"
layouts "$models/digits_mlp.json" "$tmp/digits.h5" mlp
layouts "$models/dcn.json" "$tmp/ctr/train.h5" dcn

# b. and c. the links' bytes and the loss, fp32 against bf16, over 40 steps on 2 stages
run links.fp32 "$tmp/gpt.json" "$tmp/lm/train.h5" 2 40 --stages 2 --metrics "$tmp/fp32.jsonl"
run links.bf16 "$tmp/gpt.json" "$tmp/lm/train.h5" 2 40 --stages 2 --metrics "$tmp/bf16.jsonl" \
    --precision bf16
kib() { sed -n 's/^stage links: \([0-9.]*\) KiB sent per step per rank.*/\1/p' "$tmp/$1"; }
f=$(kib links.fp32) b=$(kib links.bf16)
[ -n "$f" ] && [ -n "$b" ] || { cat "$tmp/links.bf16"; fail "no 'stage links' line"; }
awk -v f="$f" -v b="$b" 'BEGIN { exit !(b * 2 == f) }' ||
    fail "stage links: $b KiB per step in bf16, $f in fp32: not half"
# a step's bytes: the evaluations' sends are not spread over the steps
run links.eval "$tmp/gpt.json" "$tmp/lm/train.h5" 2 40 --stages 2 --precision bf16 \
    --eval "$tmp/lm/test.h5" --eval-every 10
[ "$(kib links.eval)" = "$b" ] ||
    fail "stage links: $(kib links.eval) KiB per step with evaluations, $b without"
last() { tail -n 1 "$tmp/$1.jsonl" | sed -n 's/.*"loss": \([0-9.e+-]*\),.*/\1/p'; }
lf=$(last fp32) lb=$(last bf16)
awk -v f="$lf" -v b="$lb" 'BEGIN { d = (b - f) / f; if (d < 0) d = -d; exit !(d < 0.02) }' ||
    fail "loss after 40 steps: $lb in bf16, $lf in fp32: more than 2% apart"
echo "links: $f KiB per step in fp32, $b in bf16; loss after 40 steps $lf fp32, $lb bf16"
# the memory line names a work area only for the stages that have one: here stage 1
# holds the loss alone (its input received, its output its own), so none
cat >"$tmp/mlp3.json" <<'JSON'
{"name": "mlp3", "inputs": {"x": {"dataset": "features", "size": 64},
                            "y": {"dataset": "labels", "ids": true}},
 "layers": [
  {"name": "fc1", "type": "fc", "input": "x", "size": 128, "act": "relu", "stage": 0},
  {"name": "fc2", "type": "fc", "input": "fc1", "size": 64, "act": "tanh", "stage": 0},
  {"name": "out", "type": "fc", "input": "fc2", "size": 10, "stage": 0},
  {"name": "loss", "type": "softmax_xent", "input": ["out", "y"], "stage": 1}],
 "train": {"batch": 16, "seed": 1, "optimizer": {"type": "adam", "lr": 0.001}}}
JSON
run work "$tmp/mlp3.json" "$tmp/digits.h5" 2 2 --micro-batches 2 --precision bf16
grep -q "^activation memory: stage 0 .*bf16 work area [0-9.]*), stage 1 [^+]*+ [^+]*+ scratch [0-9.]*)$" \
    "$tmp/work" || { grep "^activation memory" "$tmp/work"; fail "work area: stage 0 has one, stage 1 none"; }

# d. resume across precisions (snapshots hold the fp32 masters)
g="$tmp/gpt.json" d="$tmp/lm/train.h5"
run whole "$g" "$d" 1 20 --precision bf16
run half "$g" "$d" 1 10 --precision bf16 --snapshot-dir "$tmp/snap"
run rest "$g" "$d" 1 20 --precision bf16 --snapshot-dir "$tmp/snap" --resume auto
[ "$(hash_of rest 20)" = "$(hash_of whole 20)" ] ||
    fail "bf16 resumed in bf16: $(hash_of rest 20), not the uninterrupted $(hash_of whole 20)"
for to in fp32 bf16; do
    from=$([ $to = fp32 ] && echo bf16 || echo fp32)
    run "$to.a" "$g" "$d" 1 10 --precision $from --snapshot-dir "$tmp/$to.s1"
    run "$to.b" "$g" "$d" 1 20 --precision $to --snapshot-dir "$tmp/$to.s1" --resume auto
    run "$to.c" "$g" "$d" 2 10 --precision $from --snapshot-dir "$tmp/$to.s2" --stages 2 \
        --micro-batches 4
    run "$to.d" "$g" "$d" 2 20 --precision $to --snapshot-dir "$tmp/$to.s2" --stages 2 \
        --micro-batches 4 --resume auto
    [ "$(hash_of "$to.b" 20)" = "$(hash_of "$to.d" 20)" ] ||
        fail "$from resumed in $to: $(hash_of "$to.b" 20) on 1 process, $(hash_of "$to.d" 20) on 2 stages"
    echo "$from resumed in $to: $(hash_of "$to.b" 20) on 1 process and 2 stages"
done

# e. refusals
expect 2 "expected fp32 or bf16, got 'bf17'" "$PIPENET" train "$g" --data "$d" --precision bf17
sed 's/"batch": 16/"batch": 16, "precision": "half"/' "$g" >"$tmp/bad.json"
expect 1 "bad.json: train.precision: expected" "$PIPENET" train "$tmp/bad.json" --data "$d"
"$PIPENET" train --help | grep -q "bf16  " || fail "--help does not list bf16"
echo "PASS"

# Sourced by the tests that need a GPU (test_cuda_train.sh, test_cuda_snapshot.sh)
# and bench/bench_gpu.sh, after PIPENET is set.

# need_gpu: exits 77 (a skip for make check) unless this pipenet was built with CUDA
# and sees a GPU; exits 1 when its CUDA module cannot be had (missing, not loading,
# another pipenet's): that is a broken build, not a machine without a GPU. It asks
# infer, which places its device before reading any file.
need_gpu() {
    why=$("$PIPENET" infer /nonexistent/model.h5 --data /nonexistent/data.h5 --device cuda 2>&1)
    case $why in
    *"device cuda: this pipenet was built without CUDA"* | *"device cuda: no CUDA device is visible"*)
        echo "SKIP: ${why#pipenet: error: }"; exit 77 ;;
    *"device cuda: "*) echo "FAIL: ${why#pipenet: error: }"; exit 1 ;;
    esac
}

# step_loss METRICS STEP: the training loss of step STEP in a --metrics file
step_loss() { sed -n "s/^{\"step\": $2, .*\"loss\": \([0-9.e+-]*\),.*/\1/p" "$1"; }

# The tolerance of one step's loss, compared between two runs K steps after they last
# had the same state (a cuda run and a cpu run from one seed: K = the step; a resume
# and the run that wrote its snapshot: K = steps since the snapshot):
#   rtol(K) = LOSS_RTOL_BASE + LOSS_RTOL_PER_STEP x K.
# Why it grows: the two devices add in other orders (cuBLAS against OpenBLAS, the
# kernels' reductions against the CPU's loops), so each step's gradients differ by
# fp32 rounding (about 1e-6 relative). Adam divides each update by sqrt(v) + eps: where
# a gradient is near zero, a rounding-sized difference in it becomes a difference of
# the order of lr in the update, and the runs' parameters, so their losses, drift
# apart a little more with every step. BASE covers step 1 (the same parameters, only
# the forward pass's rounding), PER_STEP the drift: 1.1e-3 after 20 steps, below what
# one step of training changes the tiny GPT's loss late in those runs (0.6% at step
# 20), far below what a wrong kernel does (percents, from the first step).
LOSS_RTOL_BASE=1e-4
LOSS_RTOL_PER_STEP=5e-5
# Parameters after such runs: a relative L2 difference per parameter (pipenet inspect
# --compare), printed by test_cuda_train.sh for the record. Most follow each other to
# rounding; a parameter whose gradient is zero in exact arithmetic (the attention's
# key bias) drifts with Adam by each device's rounding (1% on the CUDA stand-in), so
# the tests compare what the trained models compute instead.
PARAM_RTOL=1e-3

# loss_rtol K: rtol(K) above
loss_rtol() {
    awk -v k="$1" -v a="$LOSS_RTOL_BASE" -v b="$LOSS_RTOL_PER_STEP" 'BEGIN {
        printf "%.3g\n", a + b * k }'
}

# same_losses A B FIRST LAST: steps FIRST..LAST of metrics files A and B have losses
# within loss_rtol of each other (K = 1 at FIRST: the runs had one state before it);
# prints every step, fails naming one. And B's loss moved from FIRST to LAST by more
# than 10 times the last tolerance, so that agreeing within it says something.
same_losses() {
    s=$3 k=1
    while [ "$s" -le "$4" ]; do
        a=$(step_loss "$1" "$s") b=$(step_loss "$2" "$s") r=$(loss_rtol $k)
        [ -n "$a" ] && [ -n "$b" ] || { echo "no loss of step $s in $1 or $2"; return 1; }
        awk -v a="$a" -v b="$b" -v r="$r" -v s="$s" 'BEGIN {
            d = a - b; if (d < 0) d = -d; m = b < 0 ? -b : b
            printf "step %d: %s %s relative difference %.2e (at most %s)\n", s, a, b,
                   (m > 0 ? d / m : d), r
            exit !(d <= r * m) }' || return 1
        s=$((s + 1)) k=$((k + 1))
    done
    awk -v f="$(step_loss "$2" "$3")" -v l="$(step_loss "$2" "$4")" -v r="$r" 'BEGIN {
        d = f - l; if (d < 0) d = -d; m = f < 0 ? -f : f
        if (d > 10 * r * m) exit 0
        printf "the loss moved by %.2e (relative) from the first step to the last: not ten " \
               "times the tolerance %s, too little to compare\n", (m > 0 ? d / m : d), r
        exit 1 }'
}

# same_binary_evals CPU CUDA N: metrics files CPU and CUDA of a binary classifier
# (sigmoid_xent) hold N evaluations each whose log-loss (2e-3 relative) and AUC
# (0.01) agree; prints them, fails naming the first that differs
same_binary_evals() {
    evals() { sed -n 's/.*"eval_loss": \([0-9.e-]*\), "eval_auc": \([0-9.e-]*\)}$/\1 \2/p' "$1"; }
    evals "$1" >"$tmp/evals_cpu"
    evals "$2" >"$tmp/evals_cuda"
    [ "$(wc -l <"$tmp/evals_cpu")" -eq "$3" ] || fail "cpu: not $3 evaluations: $(cat "$1")"
    [ "$(wc -l <"$tmp/evals_cuda")" -eq "$3" ] || fail "cuda: not $3 evaluations: $(cat "$2")"
    paste "$tmp/evals_cpu" "$tmp/evals_cuda" | awk '{
        printf "eval: loss %s %s, AUC %s %s\n", $1, $3, $2, $4
        d = $1 - $3; if (d < 0) d = -d; if (d > 2e-3 * $1) { print "FAIL: eval losses differ"; exit 1 }
        d = $2 - $4; if (d < 0) d = -d; if (d > 0.01) { print "FAIL: eval AUCs differ"; exit 1 } }' ||
        exit 1
}

# same_binary_training MODEL TRAIN EVAL: MODEL (a binary classifier of 16 steps)
# trained on TRAIN, evaluated on EVAL every 8 steps, on the cpu and on cuda (metrics
# $tmp/m_DEVICE, snapshots in $tmp/snap_DEVICE): the cuda run names its GPU, and the
# two follow the same losses (same_losses) and evaluations (same_binary_evals)
same_binary_training() {
    for d in cpu cuda; do
        "$PIPENET" train "$1" --data "$2" --eval "$3" --eval-every 8 \
            --threads 1 --device $d --metrics "$tmp/m_$d" --snapshot-dir "$tmp/snap_$d" \
            >"$tmp/out_$d" 2>&1 || { cat "$tmp/out_$d"; fail "train --device $d"; }
    done
    grep -q "^device: cuda:0" "$tmp/out_cuda" || { cat "$tmp/out_cuda"; fail "the cuda run names no GPU"; }
    same_losses "$tmp/m_cuda" "$tmp/m_cpu" 1 16 || fail "the losses of cuda and cpu differ"
    same_binary_evals "$tmp/m_cpu" "$tmp/m_cuda" 2
}

# same_binary_inference MODEL DATA H5_FIXTURE: `infer` of MODEL on DATA on the cpu and
# on cuda writes the same logits (1e-5 relative), the same predictions and the same
# AUC, which it leaves in $auc_cpu
same_binary_inference() {
    for d in cpu cuda; do
        "$PIPENET" infer "$1" --data "$2" --out "$tmp/pred_$d.h5" --device $d \
            >"$tmp/infer_$d" 2>&1 || { cat "$tmp/infer_$d"; fail "infer --device $d"; }
        for k in outputs scores predictions; do
            "$3" print "$tmp/pred_$d.h5" $k >"$tmp/${k}_$d" || fail "read $k of pred_$d.h5"
        done
    done
    paste "$tmp/outputs_cpu" "$tmp/outputs_cuda" | awk '{ d = $1 - $2; if (d < 0) d = -d
        if (d > 1e-5 * (1 + ($2 < 0 ? -$2 : $2))) { printf "FAIL: logit %d: cpu %s, cuda %s\n", NR, $1, $2; exit 1 } }' ||
        exit 1
    cmp -s "$tmp/predictions_cpu" "$tmp/predictions_cuda" || fail "the predictions differ"
    auc_cpu=$(sed -n 's/^AUC \([0-9.]*\) .*/\1/p' "$tmp/infer_cpu")
    auc_cuda=$(sed -n 's/^AUC \([0-9.]*\) .*/\1/p' "$tmp/infer_cuda")
    [ -n "$auc_cpu" ] && [ "$auc_cpu" = "$auc_cuda" ] || fail "infer's AUC: cpu '$auc_cpu', cuda '$auc_cuda'"
}

# keep_hash NAME STEPS: adds to $hashes the parameter hash that the run whose output is
# $tmp/NAME printed after STEPS steps (fails without one), and prints it
keep_hash() {
    h=$(sed -n "s/^parameter hash after $2 steps: //p" "$tmp/$1")
    [ -n "$h" ] || { cat "$tmp/$1"; fail "$1 printed no parameter hash"; }
    echo "--deterministic, $1: $h"
    hashes="${hashes:-} $h"
}

# one_hash WHAT: every hash kept by keep_hash is the same, else fails saying WHAT
one_hash() {
    # shellcheck disable=SC2086
    [ "$(echo $hashes | tr ' ' '\n' | sort -u | wc -l)" -eq 1 ] || fail "$1:$hashes"
}

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

# same_losses A B FIRST LAST RTOL: steps FIRST..LAST of metrics files A and B have
# losses within RTOL of each other (relative); prints every step, fails naming one
same_losses() {
    s=$3
    while [ "$s" -le "$4" ]; do
        a=$(step_loss "$1" "$s") b=$(step_loss "$2" "$s")
        [ -n "$a" ] && [ -n "$b" ] || { echo "no loss of step $s in $1 or $2"; return 1; }
        awk -v a="$a" -v b="$b" -v r="$5" -v s="$s" 'BEGIN {
            d = a - b; if (d < 0) d = -d; m = b < 0 ? -b : b
            printf "step %d: %s %s relative difference %.2e\n", s, a, b, (m > 0 ? d / m : d)
            exit !(d <= r * m) }' || return 1
        s=$((s + 1))
    done
}

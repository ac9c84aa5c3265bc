#!/bin/sh
# GPU training throughput of pipenet against PyTorch on the same GPU, the same model
# (models/gpt2_small.json: 12 pre-norm blocks, width 768, 12 heads, T 1024, vocab
# 50304, 163M parameters; bench/torch_gpt.py builds it layer for layer) and batch,
# one after the other: tokens/s (median step after 2 warm-up steps), MFU and peak GPU
# memory of each, and pipenet's ratio to PyTorch.
#
# Precision: pipenet computes in fp32 (cuBLAS without TF32: docs/running.md), so the
# reference is PyTorch fp32 eager with TF32 off and its attention materialized
# (math): the same arithmetic. A second PyTorch row, TF32 on and
# scaled_dot_product_attention, shows what a PyTorch user gets with those switched
# on; it is not the comparison. MFU: FLOPs per token from `pipenet plan` (forward +
# backward, T x T attention counted whole; the standard 6N + 12 L T d is printed
# beside it) times tokens/s over the GPU's dense peak for the precision used (fp32
# for the first two rows, TF32 for the third), from a table of GPU names below or
# PEAK_FP32_TFLOPS / PEAK_TF32_TFLOPS. Peak memory: the largest memory.used of
# nvidia-smi (polled every 100 ms) during the run, less the value before it (the
# CUDA context included), and PyTorch's own max_memory_reserved.
#
# Usage: bench/bench_gpu.sh [OUTDIR]   (PIPENET, PYTHON, BATCH, STEPS from the
# environment, and TRAIN_ARGS: more options for pipenet's run, such as
# --no-share-memory; results in OUTDIR, default a temporary folder: bench_gpu.txt and
# each run's log). Skips (77) without CUDA in the build, a GPU, or nvidia-smi.
# About 30 s on an H200 (2026-11-25).
set -u
PIPENET=${PIPENET:-./pipenet}
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/tests/gpu_fixture.sh"
need_gpu
command -v nvidia-smi >/dev/null || { echo "SKIP: no nvidia-smi"; exit 77; }
if [ -z "${PYTHON:-}" ]; then
    for p in /opt/torch/.venv/bin/python python3; do
        command -v "$p" >/dev/null && "$p" -c "import torch" 2>/dev/null && PYTHON=$p && break
    done
fi
[ -n "${PYTHON:-}" ] || { echo "SKIP: no python with torch (set PYTHON)"; exit 77; }
BATCH=${BATCH:-8} STEPS=${STEPS:-12}
out=${1:-$(mktemp -d "${TMPDIR:-/tmp}/pn_bench_gpu.XXXXXX")}
mkdir -p "$out" || exit 1
model=$here/models/gpt2_small.json
T=1024
fail() { echo "FAIL: $*"; exit 1; }

# random bytes as base64 text: 2 MB, about 1900 windows of 1024 tokens
head -c 1500000 /dev/urandom | base64 -w 0 >"$out/text.txt"
"$PIPENET" import text "$out/text.txt" --out "$out/data" --seq $T --eval-fraction 0.01 \
    >"$out/import.log" 2>&1 || { cat "$out/import.log"; fail "import text"; }
rm -f "$out/text.txt"

gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader -i "${CUDA_VISIBLE_DEVICES:-0}" | head -n 1)
case $gpu in # dense peaks in TFLOPS: fp32 (no tensor cores), tf32 (tensor cores)
*H200*) fp32=66.9 tf32=494.7 ;;
*H100*PCIe*) fp32=51.2 tf32=378.0 ;;
*H100*NVL*) fp32=60.0 tf32=417.0 ;;
*H100*) fp32=66.9 tf32=494.7 ;; # SXM
*A100*) fp32=19.5 tf32=156.0 ;;
*) fp32=0 tf32=0 ;;
esac
fp32=${PEAK_FP32_TFLOPS:-$fp32} tf32=${PEAK_TF32_TFLOPS:-$tf32}

# FLOPs per token: pipenet plan's MFLOP/sample (forward + backward) over T
"$PIPENET" plan "$model" --batch "$BATCH" >"$out/plan.log" 2>&1 || { cat "$out/plan.log"; fail "plan"; }
mflop=$(awk '$1 == "total" {print $5}' "$out/plan.log")
pn_params=$(awk '$1 == "total" {print $4}' "$out/plan.log")
[ -n "$mflop" ] || fail "no FLOP count from pipenet plan"
flops_token=$(awk -v m="$mflop" -v t=$T 'BEGIN {printf "%.0f", m * 1e6 / t}')
standard=$(awk -v t=$T 'BEGIN { d = 768; L = 12; v = 50304
    n = L * (12 * d * d + 13 * d) + 2 * d + d * v + v   # blocks, ln_f, logits (no embeddings)
    printf "%.0f", 6 * n + 12 * L * t * d }')

# measure NAME COMMAND...: runs it while polling nvidia-smi; peak MiB into $out/NAME.mem
measure() {
    name=$1; shift
    base=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -n 1)
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 100 \
        >"$out/$name.poll" 2>/dev/null &
    poll=$!
    "$@" >"$out/$name.log" 2>&1
    rc=$?
    kill "$poll" 2>/dev/null
    wait "$poll" 2>/dev/null
    awk -v b="$base" '$1 + 0 > m {m = $1 + 0} END {print m - b}' "$out/$name.poll" >"$out/$name.mem"
    [ $rc -eq 0 ] || { tail -n 20 "$out/$name.log"; fail "$name exited $rc"; }
}

measure pipenet "$PIPENET" train "$model" --data "$out/data/train.h5" --eval= --device cuda \
    --batch "$BATCH" --micro-batches 1 --steps "$STEPS" --threads 4 \
    --metrics "$out/pipenet_metrics.jsonl" ${TRAIN_ARGS:-}
# pipenet's tokens/s: the median of the steps after the first two
pn_tps=$(sed -n 's/^{"step": \([0-9]*\),.*"tokens_per_s": \([0-9.e+]*\)}$/\1 \2/p' \
    "$out/pipenet_metrics.jsonl" | awk '$1 > 2 {print $2}' | sort -g |
    awk '{v[NR] = $1} END {if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2)}')
[ -n "$pn_tps" ] || fail "no tokens_per_s in $out/pipenet_metrics.jsonl"

torch_run() { # torch_run NAME ARGS...
    name=$1; shift
    measure "$name" "$PYTHON" "$here/bench/torch_gpt.py" --batch "$BATCH" --steps "$STEPS" \
        --seq $T "$@"
    grep '^tokens_per_s=' "$out/$name.log" | tail -n 1
}
torch_fp32=$(torch_run torch_fp32 --attention math)
torch_tf32=$(torch_run torch_tf32 --attention sdpa --tf32)
field() { echo "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }

{
    echo "GPU: $gpu (peak fp32 $fp32, tf32 $tf32 TFLOPS dense)"
    echo "model: $(basename "$model"), batch $BATCH x T $T = $((BATCH * T)) tokens/step," \
        "$STEPS steps (median of steps 3..$STEPS)"
    echo "FLOPs/token: $flops_token (pipenet plan, used for MFU); 6N + 12LTd: $standard"
    echo "parameters: pipenet $pn_params, torch $(field "$torch_fp32" params)" \
        "(torch $(field "$torch_fp32" torch))"
    printf '%-34s %12s %8s %14s %16s\n' run tokens/s MFU "peak MiB (smi)" "torch reserved"
    row() { # row LABEL TOKENS_PER_S PEAK_TFLOPS MEM RESERVED
        awk -v l="$1" -v t="$2" -v p="$3" -v f="$flops_token" -v m="$4" -v r="$5" 'BEGIN {
            mfu = p > 0 ? sprintf("%.1f%%", 100 * t * f / (p * 1e12)) : "?"
            printf "%-34s %12.0f %7s %14s %16s\n", l, t, mfu, m, r }'
    }
    row "pipenet fp32" "$pn_tps" "$fp32" "$(cat "$out/pipenet.mem")" "-"
    row "pytorch fp32, math attention" "$(field "$torch_fp32" tokens_per_s)" "$fp32" \
        "$(cat "$out/torch_fp32.mem")" "$(field "$torch_fp32" max_reserved_mib)"
    row "pytorch tf32, sdpa (not compared)" "$(field "$torch_tf32" tokens_per_s)" "$tf32" \
        "$(cat "$out/torch_tf32.mem")" "$(field "$torch_tf32" max_reserved_mib)"
    awk -v a="$pn_tps" -v b="$(field "$torch_fp32" tokens_per_s)" \
        -v m="$(cat "$out/pipenet.mem")" -v n="$(cat "$out/torch_fp32.mem")" 'BEGIN {
        speed = b > 0 ? a / b : 0; memory = n > 0 ? m / n : 0
        printf "pipenet / pytorch fp32: %.2fx the tokens/s, %.2fx the peak memory\n",
            speed, memory }'
} | tee "$out/bench_gpu.txt"
echo "logs and results in $out"

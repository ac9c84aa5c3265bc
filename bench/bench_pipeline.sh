#!/bin/sh
# Pipeline efficiency: how close P ranks come to the ideal speed-up of a pipeline,
#   efficiency = (samples/s on P stages / samples/s on 1 rank) / (P M / (M + P - 1)),
# with the same M micro-batches of the same size in both runs and 1 BLAS thread per
# rank (target >= 0.9 at P = 2, M = 8). The runs of each model alternate, round by
# round, between 1 rank and P stages, so a machine that gets busier slows both; each
# run's rate is the median of its per-step samples/s after the first WARM steps, and
# the figure is the median over rounds of each round's ratio.
#
# usage: bench/bench_pipeline.sh [PIPENET] [--rounds R] [--steps N] [--stages P]
#                                [--micro-batches M] [--schedule S] [--virtual-stages V]
# Data: data/fashion-mnist/train.h5 (the quick start's; imported from Debian's
# dataset-fashion-mnist when missing) for fashion_mlp, and for char_gpt a token file
# made from this repository's docs with `pipenet import text` (the speed does not
# depend on the text).
set -u
cd "$(dirname "$0")/.."
PIPENET=./pipenet
case ${1:-} in -*|'') ;; *) PIPENET=$1; shift ;; esac
ROUNDS=5 STEPS=40 WARM=10 P=2 M=8 SCHEDULE=1f1b VIRTUAL=
while [ $# -gt 0 ]; do
    case $1 in
    --rounds) ROUNDS=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --stages) P=$2; shift 2 ;;
    --micro-batches) M=$2; shift 2 ;;
    --schedule) SCHEDULE=$2; shift 2 ;;
    --virtual-stages) VIRTUAL="--virtual-stages $2"; shift 2 ;;
    *) echo "bench_pipeline: unknown option $1" >&2; exit 2 ;;
    esac
done
[ "$STEPS" -gt "$WARM" ] || { echo "bench_pipeline: --steps must exceed $WARM" >&2; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
MPIRUN=${MPIRUN:-mpirun}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/pn_bench_pipeline.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

fm=data/fashion-mnist/train.h5
if [ ! -f "$fm" ]; then
    "$PIPENET" import fashion-mnist --out data/fashion-mnist >/dev/null ||
        { echo "bench_pipeline: no $fm and no Fashion-MNIST to import" >&2; exit 1; }
fi
"$PIPENET" import text docs/*.md README.md --out "$tmp/text" --seq 64 >/dev/null ||
    { echo "bench_pipeline: import text failed" >&2; exit 1; }

# median of the per-step samples/s after the warm-up, from a metrics file
rate() {
    sed -n 's/^{"step": \([0-9]*\), .*"samples_per_s": \([0-9.e+-]*\).*/\1 \2/p' "$1" |
        awk -v w="$WARM" '$1 > w { print $2 }' | sort -g |
        awk '{ v[NR] = $1 } END { if (NR == 0) exit 1; print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

ideal=$(awk -v p="$P" -v m="$M" 'BEGIN { printf "%.4f", p * m / (m + p - 1) }')
echo "pipeline efficiency: $P stages ($SCHEDULE${VIRTUAL:+, $VIRTUAL}) vs 1 rank, M = $M, 1 BLAS thread per rank,"
echo "$ROUNDS alternating rounds of $STEPS steps (rates: median of steps > $WARM); ideal speed-up $ideal"
printf '%-12s %10s %10s %10s %10s\n' model "1 rank/s" "$P stages/s" speed-up efficiency
for model in fashion_mlp char_gpt; do
    case $model in
    fashion_mlp) data=$fm ;;
    char_gpt) data=$tmp/text/train.h5 ;;
    esac
    args="models/$model.json --data $data --eval= --steps $STEPS --threads 1 --log-every 1000"
    args="$args --micro-batches $M"
    : >"$tmp/one" ; : >"$tmp/many" ; : >"$tmp/ratio"
    r=0
    while [ $r -lt "$ROUNDS" ]; do
        "$PIPENET" train $args --metrics "$tmp/m1" >"$tmp/out1" 2>&1 ||
            { cat "$tmp/out1"; exit 1; }
        $MPIRUN --oversubscribe -np "$P" "$PIPENET" train $args --stages "$P" \
            --schedule "$SCHEDULE" $VIRTUAL --metrics "$tmp/mp" >"$tmp/outp" 2>&1 ||
            { cat "$tmp/outp"; exit 1; }
        a=$(rate "$tmp/m1") && b=$(rate "$tmp/mp") || { echo "bench_pipeline: no rates" >&2; exit 1; }
        echo "$a" >>"$tmp/one"; echo "$b" >>"$tmp/many"
        awk -v a="$a" -v b="$b" 'BEGIN { print b / a }' >>"$tmp/ratio"
        r=$((r + 1))
    done
    one=$(median <"$tmp/one") many=$(median <"$tmp/many") speedup=$(median <"$tmp/ratio")
    awk -v m="$model" -v a="$one" -v b="$many" -v s="$speedup" -v i="$ideal" \
        'BEGIN { printf "%-12s %10.1f %10.1f %10.3f %10.3f\n", m, a, b, s, s / i }'
    printf '  speed-ups by round: %s\n' "$(tr '\n' ' ' <"$tmp/ratio")"
done

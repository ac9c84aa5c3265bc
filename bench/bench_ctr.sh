#!/bin/sh
# Click-through training speed on the CPU: DeepFM (models/deepfm.json: 26 fields of
# 16-wide embeddings, FM, a 3 x 400 relu DNN with dropout, the wide part; here at
# batch 1024, adam)
# in pipenet against the same model in PyTorch (bench/torch_ctr.py:
# nn.EmbeddingBag(sum, sparse=True), SparseAdam for the tables, Adam for the rest),
# on the same synthetic-ctr data, samples/s on 1 and 2 BLAS/intra-op threads.
# Runs alternate, round by round (pipenet 1 thread, torch 1, pipenet 2, torch 2), so
# a machine that gets busier slows both; each run's rate is its median step (pipenet:
# the per-step samples/s of the metrics after the first WARM steps; torch_ctr.py:
# after its own warm-up), and each ratio the median over rounds of that round's
# pipenet / torch (target >= 1.5). torch_ctr.py caps the system BLAS's threads
# (OPENBLAS_NUM_THREADS, which torch.set_num_threads does not reach) and waits
# passively (OMP_WAIT_POLICY), its fastest setting on this shared machine.
#
# Then the table-size check: pipenet DeepFM's step time with tables of 10^4 and 10^7
# rows (the model's "rows" edited: 10^4 or 10^7 rows, of which the data's 2600
# columns are ever touched), PyTorch beside it. Table gradients are
# row-sparse (src/layers/row_grad.h), so the two should be within about 10%.
#
# usage: bench/bench_ctr.sh [PIPENET] [--rounds R] [--steps N] [--out DIR]
#   PYTHON: a python with torch and h5py (default /usr/bin/python3, else python3).
# Results: DIR/bench_ctr.txt (default a temporary folder) and each run's log; the
# last line is the summary.
set -u
cd "$(dirname "$0")/.." || exit 1
PIPENET=./pipenet
case ${1:-} in -*|'') ;; *) PIPENET=$1; shift ;; esac
ROUNDS=5 STEPS=40 WARM=10 OUT=
while [ $# -gt 0 ]; do
    case $1 in
    --rounds) ROUNDS=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    *) echo "bench_ctr: unknown option $1" >&2; exit 2 ;;
    esac
done
[ "$STEPS" -gt "$WARM" ] || { echo "bench_ctr: --steps must exceed $WARM" >&2; exit 2; }
if [ -z "${PYTHON:-}" ]; then
    for p in /usr/bin/python3 python3; do
        "$p" -c "import torch, h5py" 2>/dev/null && PYTHON=$p && break
    done
fi
[ -n "${PYTHON:-}" ] || { echo "SKIP: no python with torch and h5py (set PYTHON)"; exit 77; }
out=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/pn_bench_ctr.XXXXXX")}
mkdir -p "$out" || exit 1
BATCH=1024
# enough samples for either program's steps: 1024 x (STEPS + torch's warm-up)
"$PIPENET" import synthetic-ctr --out "$out/data" --samples $((BATCH * (STEPS + WARM + 2))) \
    --test-samples 1000 >"$out/import.log" 2>&1 || { cat "$out/import.log"; exit 1; }
data=$out/data/train.h5

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) exit 1; print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# rate METRICS: median per-step samples/s after the warm-up
rate() {
    sed -n 's/^{"step": \([0-9]*\), .*"samples_per_s": \([0-9.e+-]*\).*/\1 \2/p' "$1" |
        awk -v w="$WARM" '$1 > w { print $2 }' | median
}
# pn NAME MODEL THREADS: pipenet's median samples/s
pn() {
    "$PIPENET" train "$2" --data "$data" --eval= --steps "$STEPS" --threads "$3" --batch $BATCH \
        --log-every 1000 --snapshot-dir "$out/snap" --metrics "$out/$1.jsonl" >"$out/$1.log" 2>&1 ||
        { cat "$out/$1.log" >&2; return 1; }
    rm -rf "$out/snap"
    rate "$out/$1.jsonl"
}
# torch NAME THREADS [ROWS]: PyTorch's median samples/s
torch() {
    "$PYTHON" bench/torch_ctr.py --data "$data" --batch $BATCH --steps $((STEPS - WARM)) \
        --warmup "$WARM" --threads "$2" ${3:+--rows "$3"} >"$out/$1.log" 2>&1 ||
        { cat "$out/$1.log" >&2; return 1; }
    sed -n 's/.*samples_per_s=\([0-9.]*\) .*/\1/p' "$out/$1.log"
}

for t in 1 2; do : >"$out/pn$t" ; : >"$out/torch$t" ; : >"$out/ratio$t"; done
r=0
while [ $r -lt "$ROUNDS" ]; do
    for t in 1 2; do
        a=$(pn "pn_t${t}_r$r" models/deepfm.json $t) && b=$(torch "torch_t${t}_r$r" $t) || exit 1
        echo "$a" >>"$out/pn$t"; echo "$b" >>"$out/torch$t"
        awk -v a="$a" -v b="$b" 'BEGIN { print a / b }' >>"$out/ratio$t"
    done
    r=$((r + 1))
done

# the table-size check: the model with "rows" set for both tables
: >"$out/rows.txt"
for rows in 10000 10000000; do
    sed "s/\"rows\": 2600,/\"rows\": $rows,/" models/deepfm.json >"$out/deepfm_$rows.json"
    a=$(pn "pn_rows$rows" "$out/deepfm_$rows.json" 2) && b=$(torch "torch_rows$rows" 2 $rows) || exit 1
    echo "$rows $a $b" >>"$out/rows.txt"
done

{
    echo "DeepFM (models/deepfm.json), batch $BATCH, synthetic-ctr 26 fields x 100 ids;" \
        "$ROUNDS alternating rounds; pipenet: median of steps $((WARM + 1))..$STEPS," \
        "torch: median of $((STEPS - WARM)) steps after $WARM; $(sed -n 's/.*\(torch=[^ ]*\).*/\1/p' "$out/torch_t1_r0.log")"
    echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
    printf '%-8s %14s %14s %10s   %s\n' threads "pipenet/s" "pytorch/s" ratio "ratios by round"
    for t in 1 2; do
        printf '%-8s %14.0f %14.0f %10.2f   %s\n' "$t" "$(median <"$out/pn$t")" \
            "$(median <"$out/torch$t")" "$(median <"$out/ratio$t")" "$(tr '\n' ' ' <"$out/ratio$t")"
    done
    echo "table rows (2 threads, one run each): pipenet step ms, pytorch step ms"
    awk '{ printf "  %9d rows: pipenet %8.1f ms, pytorch %8.1f ms\n", $1, 1024000 / $2, 1024000 / $3 }' "$out/rows.txt"
    awk -v r1="$(median <"$out/ratio1")" -v r2="$(median <"$out/ratio2")" \
        'NR == 1 { a = $2 } NR == 2 { b = $2 } END {
        printf "summary: pipenet / pytorch DeepFM samples/s %.2fx (1 thread), %.2fx (2 threads), target 1.5x; 10^7 / 10^4 table rows: %.1fx the step time\n", r1, r2, a / b }' "$out/rows.txt"
} | tee "$out/bench_ctr.txt"
echo "logs and results in $out"

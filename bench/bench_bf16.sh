#!/bin/sh
# bf16 against fp32 on models/char_gpt.json (docs/training.md "Precision (bf16)"):
# STEPS steps (default 1000) of each precision, one after the other on one process,
# and per precision: the final training loss (mean of the last 20 steps' losses,
# from --metrics: one step's loss is one batch's, noisy), the evaluation loss after
# the run, seconds per step (the run's wall time / steps), the peak resident memory
# (/usr/bin/time -f %M) and the run's "activation memory" line. Then the bf16/fp32
# ratio of each, and whether the final losses are within 2% (issue 23's bound).
# Data: the fortunes (docs/language-models.md: apt-get install fortunes), imported
# into OUT; without them the times table of tests/lm_fixture.sh (learned fast, so the
# 2% means less: said in the output).
#
# usage: bench/bench_bf16.sh [PIPENET] [--steps N] [--out DIR] [--threads T]
set -u
cd "$(dirname "$0")/.." || exit 1
PIPENET=./pipenet
case ${1:-} in -*|'') ;; *) PIPENET=$1; shift ;; esac
STEPS=1000 OUT= THREADS=1
while [ $# -gt 0 ]; do
    case $1 in
    --steps) STEPS=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    *) echo "bench_bf16: unknown option $1" >&2; exit 2 ;;
    esac
done
[ -x /usr/bin/time ] || { echo "bench_bf16: needs GNU time (/usr/bin/time)"; exit 77; }
out=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/bench_bf16.XXXXXX")}
mkdir -p "$out"
FORTUNES=/usr/share/games/fortunes
if [ -d "$FORTUNES" ]; then
    data="fortunes"
    # shellcheck disable=SC2046
    "$PIPENET" import text $(find "$FORTUNES" -maxdepth 1 -type f ! -name '*.dat' ! -name '*.u8' | sort) \
        --out "$out/data" --seq 64 >"$out/import.log" 2>&1 || { cat "$out/import.log"; exit 1; }
else
    data="the times table (no fortunes: apt-get install fortunes)"
    tmp=$out
    . tests/lm_fixture.sh
    times_table 20000 >"$out/text.txt"
    "$PIPENET" import text "$out/text.txt" --out "$out/data" --seq 64 >"$out/import.log" 2>&1 ||
        { cat "$out/import.log"; exit 1; }
fi
echo "char_gpt, $STEPS steps of batch 32 on $data, $THREADS BLAS thread(s), $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg)"
for p in fp32 bf16; do
    start=$(date +%s.%N)
    /usr/bin/time -f %M -o "$out/$p.rss" "$PIPENET" train models/char_gpt.json \
        --data "$out/data/train.h5" --eval "$out/data/test.h5" --steps "$STEPS" \
        --threads "$THREADS" --precision $p --metrics "$out/$p.jsonl" --log-every 1000 \
        --eval-every "$STEPS" \
        --snapshot-dir "" >"$out/$p.log" 2>&1 || { cat "$out/$p.log"; exit 1; }
    end=$(date +%s.%N)
    final=$(tail -n 20 "$out/$p.jsonl" | sed -n 's/.*"loss": \([0-9.e+-]*\),.*/\1/p' |
            awk '{ s += $1; n++ } END { printf "%.4f", s / n }')
    evalloss=$(sed -n 's/.*eval loss \([0-9.]*\).*/\1/p' "$out/$p.log" | tail -n 1)
    sps=$(awk -v a="$start" -v b="$end" -v n="$STEPS" 'BEGIN { printf "%.4f", (b - a) / n }')
    echo "$p $final $evalloss $sps $(cat "$out/$p.rss")" >"$out/$p.row"
    printf '%-5s final loss %s  eval loss %s  %s s/step  peak RSS %s KiB\n' $p "$final" \
        "${evalloss:-?}" "$sps" "$(cat "$out/$p.rss")"
    grep '^activation memory' "$out/$p.log" | sed 's/^/      /'
done
read -r _ lf ef sf rf <"$out/fp32.row"
read -r _ lb eb sb rb <"$out/bf16.row"
awk -v lf="$lf" -v lb="$lb" -v sf="$sf" -v sb="$sb" -v rf="$rf" -v rb="$rb" 'BEGIN {
    d = (lb - lf) / lf
    printf "bf16/fp32: final loss %+.3f%% (%s 2%%), time per step %.2fx, peak RSS %.2fx\n",
           100 * d, (d < 0.02 && d > -0.02) ? "within" : "NOT within", sb / sf, rb / rf
}'
echo "(outputs in $out)"

#!/bin/sh
# Speed of tables sharded by rows across replicas against replicated ones: DeepFM
# (models/deepfm.json: 26 fields, 16-wide embedding_bag, sparse_fc wide part, FM, a
# 3 x 400 relu DNN; adam) at batch 1024 on `mpirun -np 2` (2 replicas, 1 BLAS
# thread each), its embedding_bag and sparse_fc replicated (every replica holds the
# tables, their row gradients allgathered at the step's end and every replica updates
# every touched row) or sharded ("shard": "rows": replica r holds ids r mod 2; each
# micro-batch's forward pulls its distinct rows from their owners, the step's end
# pushes the row gradients to them, each updates its own rows). On synthetic-ctr data
# the script generates: 100 ids a field (2600 columns, the model's tables as they
# are: almost every row is touched every step) and 100000 ids a field (2.6M
# columns and rows: the tables 2.6M x 16 and 2.6M x 1, a step touches a small part).
#
# Runs alternate (replicated, sharded, each vocabulary in turn, round by round), so a
# machine that gets busier slows both; a run's rate is the median of its per-step
# samples/s (--metrics) after the first WARM steps, and the table's figure the median
# over rounds; "vs repl." is the median over rounds of the round's sharded /
# replicated rate (two runs back to back: the fairest pairing on a shared machine). Bytes per step per rank: what the row-sparse exchanges hand MPI for
# other ranks, counted in src/mpi (pn_comm_row_bytes_sent: ids, rows and counts; the
# gathers' entries once per other replica, the owner exchange's its share for
# others), averaged over the run's steps and ranks as `pipenet train` reports it; the
# dense parameters' all-reduce (the same in both) is not in it. With a python3, one
# more run of each with --trace gives the share of step time spent waiting in the
# row exchanges (counts, ids, rows; a wait for the other replica included; an
# exchange started early counts from its wait): a forward's pulls are posted at the
# seams of the passes before it (pull ahead) and its layer waits for what is left;
# the push starts when the step's passes end and moves while the dense gradients'
# all-reduce and sums finish.
#
# usage: bench/bench_shard.sh [PIPENET] [--rounds R] [--steps N] [--out DIR]
# Results: DIR/bench_shard.txt (default a temporary folder) and each run's log.
# Exits 77 without mpirun.
set -u
cd "$(dirname "$0")/.." || exit 1
PIPENET=./pipenet
case ${1:-} in -*|'') ;; *) PIPENET=$1; shift ;; esac
ROUNDS=5 STEPS=30 WARM=10 OUT=
while [ $# -gt 0 ]; do
    case $1 in
    --rounds) ROUNDS=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    *) echo "bench_shard: unknown option $1" >&2; exit 2 ;;
    esac
done
[ "$STEPS" -gt "$WARM" ] || { echo "bench_shard: --steps must exceed $WARM" >&2; exit 2; }
. bench/mpi_fixture.sh
bench_mpi bench_shard
BATCH=1024 FIELDS=26

# data and the two models for each vocabulary (ids a field)
for vocab in 100 100000; do
    "$PIPENET" import synthetic-ctr --out "$out/data$vocab" --vocab $vocab \
        --samples $((BATCH * (STEPS + 2))) --test-samples 1000 >"$out/import$vocab.log" 2>&1 ||
        { cat "$out/import$vocab.log"; exit 1; }
    cols=$((FIELDS * vocab))
    sed "s/\"columns\": 2600/\"columns\": $cols/; s/\"rows\": 2600/\"rows\": $cols/g" \
        models/deepfm.json >"$out/replicated$vocab.json"
    sed 's/"type": "\(embedding_bag\|sparse_fc\)", \(.*\)}/"type": "\1", \2, "shard": "rows"}/' \
        "$out/replicated$vocab.json" >"$out/sharded$vocab.json"
    [ "$(grep -c '"shard": "rows"' "$out/sharded$vocab.json")" -eq 2 ] &&
        [ "$(grep -c "\"rows\": $cols" "$out/sharded$vocab.json")" -eq 2 ] ||
        { echo "bench_shard: models/deepfm.json changed; its copies are not what they should be" >&2
          exit 1; }
done

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) exit 1; print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
rate() {
    sed -n 's/^{"step": \([0-9]*\), .*"samples_per_s": \([0-9.e+-]*\).*/\1 \2/p' "$1" |
        awk -v w="$WARM" '$1 > w { print $2 }' | median
}
# run NAME MODEL DATA [options]: one 2-rank run, its log in NAME.log
run() {
    name=$1 model=$2 data=$3; shift 3
    "$MPIRUN" --oversubscribe -np 2 "$PIPENET" train "$model" --data "$data" --eval= \
        --steps "$STEPS" --batch $BATCH --threads 1 --log-every 1000 --snapshot-dir "" "$@" \
        >"$out/$name.log" 2>&1 || { cat "$out/$name.log" >&2; return 1; }
}

r=0
while [ $r -lt "$ROUNDS" ]; do
    for vocab in 100 100000; do
        for layout in replicated sharded; do
            n=${layout}${vocab}_r$r
            run "$n" "$out/$layout$vocab.json" "$out/data$vocab/train.h5" \
                --metrics "$out/$n.jsonl" || exit 1
            rate "$out/$n.jsonl" >>"$out/$layout$vocab.rates"
            sed -n 's/^row-sparse exchange: \([0-9.]*\) KiB sent per step per rank.*/\1/p' \
                "$out/$n.log" >>"$out/$layout$vocab.kib"
            grep -o 'parameter hash after [0-9]* steps: [0-9a-f]*' "$out/$n.log" \
                >>"$out/$layout$vocab.hash"
        done
        # this round's sharded / replicated: the two ran back to back, under one load
        awk -v a="$(tail -1 "$out/sharded$vocab.rates")" \
            -v b="$(tail -1 "$out/replicated$vocab.rates")" 'BEGIN { print a / b }' \
            >>"$out/ratio$vocab"
    done
    r=$((r + 1))
done

# share of step time in the row exchanges, per rank, from one traced run of each
share() {
    python3 - "$1" "$WARM" <<'PY'
import json, sys
ev = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e.get("ph") == "X"]
warm = int(sys.argv[2])
# the steps after the warm-up, per rank, and the exchanges that fall inside them
steps = {}
for e in ev:
    if e["name"] == "step" and e.get("args", {}).get("step", 0) > warm:
        steps.setdefault(e["pid"], []).append((e["ts"], e["ts"] + e["dur"]))
ex, sparse, opt, seams = {}, 0.0, 0.0, 0.0
for e in ev:
    if not any(a <= e["ts"] < b for a, b in steps.get(e["pid"], [])): continue
    if e["name"].startswith(("owner exchange", "row-sparse")):
        ex[e["pid"]] = ex.get(e["pid"], 0) + e["dur"]
    # rank 0's parts of the pulls ahead run between passes (the take is in the forward)
    if e["pid"] == 0 and e["name"] in ("pull ahead: ask", "pull ahead: send",
                                       "pull ahead: answer"):
        seams += e["dur"]
    # rank 0's forward of the two tables' layers (a sharded one's pull inside) and update
    if e["pid"] == 0 and e["cat"] == "forward" and e["name"] in ("emb", "wide"):
        sparse += e["dur"]
    if e["pid"] == 0 and e["cat"] == "optimizer": opt += e["dur"]
n = len(steps[0])
print(" ".join("%.0f%%" % (100 * ex.get(p, 0) / sum(b - a for a, b in steps[p]))
               for p in sorted(steps)),
      "%.2f %.2f %.2f %.2f" % (sum(b - a for a, b in steps[0]) / n / 1e3, sparse / n / 1e3,
                               opt / n / 1e3, seams / n / 1e3))
PY
}
for vocab in 100 100000; do
    for layout in replicated sharded; do
        if command -v python3 >/dev/null 2>&1 &&
            run "trace_$layout$vocab" "$out/$layout$vocab.json" "$out/data$vocab/train.h5" \
                --trace "$out/trace_$layout$vocab.json"; then
            share "$out/trace_$layout$vocab.json" >"$out/$layout$vocab.share" 2>/dev/null ||
                echo "- - - - - -" >"$out/$layout$vocab.share"
        else
            echo "- - - - - -" >"$out/$layout$vocab.share"
        fi
    done
done

{
    echo "DeepFM, batch $BATCH, mpirun -np 2 (2 replicas, 1 thread each), synthetic-ctr" \
        "$FIELDS fields; $ROUNDS alternating rounds, median of steps $((WARM + 1))..$STEPS per run," \
        "median over runs; load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
    printf '%-10s %-10s %10s %9s %14s   %-10s %8s %8s %8s %8s\n' "ids/field" layout "samples/s" \
        "vs repl." "KiB/step/rank" "exch r0 r1" "step ms" "tbl fwd" "update" "ahead"
    for vocab in 100 100000; do
        for layout in replicated sharded; do
            v=$(median <"$out/$layout$vocab.rates")
            ratio=1
            [ $layout = sharded ] && ratio=$(median <"$out/ratio$vocab")
            set -- $(cat "$out/$layout$vocab.share")
            printf '%-10s %-10s %10.0f %9.2f %14.1f   %-10s %8s %8s %8s %8s\n' $vocab $layout \
                "$v" "$ratio" "$(median <"$out/$layout$vocab.kib")" "$1 $2" "$3" "$4" "$5" "$6"
        done
        # sharding moves rows, not results: both train to one parameter hash
        [ "$(sort -u "$out/replicated$vocab.hash" "$out/sharded$vocab.hash" | wc -l)" -eq 1 ] &&
            echo "  $vocab ids/field: one parameter hash in every run of both layouts" ||
            echo "  $vocab ids/field: the parameter hashes differ (sharded against replicated)"
    done
    echo "exch: the share of the traced run's steps $((WARM + 1))..$STEPS waiting in row exchanges" \
        "(ranks 0, 1); step ms, tbl fwd (the forward of emb and wide: a sharded one waits there" \
        "for rows pulled ahead), update and ahead (the parts of the pulls ahead run between" \
        "passes: waits, the owner's gather): rank 0's ms per step in that run"
    echo "sharded / replicated by round: $(for v in 100 100000; do printf '%s ids: %s; ' $v "$(tr '\n' ' ' <"$out/ratio$v")"; done)"
    echo "rates by run: $(for f in "$out"/*.rates; do printf '%s: %s; ' "$(basename "$f" .rates)" "$(tr '\n' ' ' <"$f")"; done)"
} | tee "$out/bench_shard.txt"
echo "logs and results in $out"

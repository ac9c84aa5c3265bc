#!/bin/sh
# Snapshot write and read of a large training state, through the real `pipenet
# train`, and the memory they take: models/gpt2_small.json (163M parameters, adamw:
# values and the slots m and v, a 1.96 GB snapshot file) cut into P pipeline stages
# on `mpirun -np P` (P = 1, 2, 4 by default, one replica), on the CPU. Step 13's
# measure of parallel snapshot writes (docs/snapshots.md): every writer writes its
# part straight from its arena and rank 0 an index over them (P = 1: one file), and
# a resume has every rank read its own parameters. (The "before" figures, when rank
# 0 gathered every stage's state and wrote one file, are in docs/snapshots.md.) (bench_snapshot.c,
# `make bench`, times pn_checkpoint_save and _load alone on a small model in a loop;
# this script runs the whole program on a large one, with each rank's memory.)
#
# For each P and round, three runs of the same model in a fresh snapshot directory:
#   nosnap  one step of batch 1, --snapshot-dir "": the training alone, whose peak
#           RSS the snapshot run's is compared with;
#   write   the same step with --snapshot-dir: the final snapshot. "write s" is rank
#           0's "snapshot" span of the --trace (pn_checkpoint_save: the parts, the
#           index, fsync, verify, rename, keep-K; the same time as the "snapshot at step 1:
#           PATH (X s)" line);
#   read    --resume of that file with --steps 1, the snapshot's own step: only the
#           load happens ("already at step 1 of 1: nothing to train"). "read s" is
#           rank 0's "resume" span of the --trace (pn_checkpoint_load: open, verify,
#           read its own parameters). The file was just written, so it is read from the page
#           cache (this script does not drop caches: the machine is shared).
# Each rank runs under GNU time (/usr/bin/time -f %M, its maximum RSS); the table
# shows rank 0's and the largest of the other ranks'. "snap +MiB" is rank 0's peak
# in the write run less its peak in the nosnap run: what the snapshot adds on top
# of training (0 when training's own peak is higher). The model's learning-rate
# warm-up is set to 0 in a copy so that one step is a whole run; the data is any
# text (/usr/share/common-licenses, else a generated file) cut into samples of 1024
# bytes by `pipenet import text`. Every rank gets one BLAS thread.
#
# usage: bench/bench_snapshot.sh [PIPENET] [--stages "1 2 4"] [--rounds R] [--out DIR]
#   MPIRUN: the launcher (default mpirun). The snapshot directory is DIR/snap-*
#   (default DIR: a temporary folder under $TMPDIR, else /tmp), deleted after each
#   round; it needs about 2 GB free, and the runs about 8 GiB of memory at P = 1.
# Results: DIR/bench_snapshot.txt (the table, medians last) and every run's log.
# Exits 77 without mpirun or /usr/bin/time.
set -u
cd "$(dirname "$0")/.." || exit 1
PIPENET=./pipenet
case ${1:-} in -*|'') ;; *) PIPENET=$1; shift ;; esac
STAGES="1 2 4" ROUNDS=2 OUT=
while [ $# -gt 0 ]; do
    case $1 in
    --stages) STAGES=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    *) echo "bench_snapshot: unknown option $1" >&2; exit 2 ;;
    esac
done
. bench/mpi_fixture.sh
bench_mpi bench_snapshot peak-rss

# the data: any text, 1024-byte samples (the model's seq); a few hundred suffice
if [ -d /usr/share/common-licenses ]; then
    cat /usr/share/common-licenses/* >"$out/text.txt" 2>/dev/null
else
    seq 1 60000 >"$out/text.txt"
fi
"$PIPENET" import text "$out/text.txt" --out "$out/data" --seq 1024 >"$out/import.log" 2>&1 ||
    { cat "$out/import.log"; exit 1; }
sed 's/"warmup_steps": *[0-9]*/"warmup_steps": 0/' models/gpt2_small.json >"$out/model.json"

# each rank under GNU time, its maximum RSS (KiB) into $RSS_PREFIX.RANK
cat >"$out/rss.sh" <<'SH'
#!/bin/sh
rank=${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-0}}
exec /usr/bin/time -f %M -o "$RSS_PREFIX.$rank" "$@"
SH
chmod +x "$out/rss.sh"

# run NAME P [train options...]: one run, its log NAME.log, trace NAME.trace.json
run() {
    name=$1 np=$2
    shift 2
    RSS_PREFIX=$out/$name.rss nice "$MPIRUN" --oversubscribe -x RSS_PREFIX -np "$np" \
        "$out/rss.sh" "$PIPENET" train "$out/model.json" --device cpu --stages "$np" \
        --data "$out/data/train.h5" --eval= --batch 1 --steps 1 --threads 1 \
        --log-every 1000 --trace "$out/$name.trace.json" "$@" >"$out/$name.log" 2>&1 ||
        { cat "$out/$name.log"; exit 1; }
}
# span NAME EVENT: rank 0's EVENT span in NAME's trace, seconds
span() {
    grep "\"name\":\"$2\",.*\"pid\":0," "$out/$1.trace.json" | head -1 |
        sed 's/.*"dur":\([0-9.]*\).*/\1/' | awk '{ printf "%.2f", $1 / 1e6 }'
}
# rss NAME RANK: that rank's peak RSS, MiB; others NAME P: the largest of ranks 1..P-1
rss() { awk '{ printf "%.0f", $1 / 1024 }' "$out/$1.rss.$2"; }
others() {
    [ "$2" -gt 1 ] || { echo -; return; }
    r=1 m=0
    while [ $r -lt "$2" ]; do
        v=$(rss "$1" $r)
        [ "$v" -gt "$m" ] && m=$v
        r=$((r + 1))
    done
    echo $m
}

rows=$out/rows.txt
: >"$rows"
for p in $STAGES; do
    round=1
    while [ $round -le "$ROUNDS" ]; do
        tag=p$p.r$round snap=$out/snap-$p-$round
        rm -rf "$snap"
        run $tag.nosnap "$p" --snapshot-dir ""
        run $tag.write "$p" --snapshot-dir "$snap"
        file=$(ls "$snap"/snapshot-*.h5 | grep -v '\.part-' | head -1)
        bytes=$(cat "$snap"/snapshot-* | wc -c) # the index and its parts
        run $tag.read "$p" --snapshot-dir "$snap" --resume "$file"
        grep -q "nothing to train" "$out/$tag.read.log" ||
            { echo "bench_snapshot: $tag.read trained (see $out/$tag.read.log)" >&2; exit 1; }
        rm -rf "$snap"
        extra=$(($(rss $tag.write 0) - $(rss $tag.nosnap 0)))
        [ $extra -lt 0 ] && extra=0
        # P round write_s read_s file_MB (all files of the snapshot) nosnap0 write0 write_others snap+ read0 read_others
        echo "$p $round $(span $tag.write snapshot) $(span $tag.read resume)" \
            "$(awk -v b="$bytes" 'BEGIN { printf "%.0f", b / 1e6 }')" \
            "$(rss $tag.nosnap 0) $(rss $tag.write 0) $(others $tag.write "$p") $extra" \
            "$(rss $tag.read 0) $(others $tag.read "$p")" \
            "$(cut -d' ' -f1 /proc/loadavg)" >>"$rows"
        round=$((round + 1))
    done
done

{
    echo "models/gpt2_small.json (adamw), P stages on mpirun -np P, batch 1, 1 step, CPU;" \
        "$ROUNDS round(s); load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "peak RSS in MiB; r0 = rank 0, others = the largest of ranks 1..P-1;" \
        "snap+ = r0's write-run peak less its nosnap-run peak"
    hdr() {
        printf '%-2s %-6s %8s %7s %8s | %9s %8s %7s %6s | %8s %7s\n' P "$1" "write s" \
            "read s" "file MB" "nosnap r0" "write r0" others snap+ "read r0" others
    }
    fmt='%-2s %-6s %8s %7s %8s | %9s %8s %7s %6s | %8s %7s\n'
    hdr round
    while read -r p r w rd mb n0 w0 wo ex r0 ro load; do
        printf "$fmt" "$p" "$r" "$w" "$rd" "$mb" "$n0" "$w0" "$wo" "$ex" "$r0" "$ro"
    done <"$rows"
    echo
    # medians over rounds (of an even count: the mean of the middle two), per column
    hdr median
    for p in $STAGES; do
        med() {
            awk -v p="$p" -v c="$1" '$1 == p { print $c }' "$rows" | sort -g |
                awk '{ v[NR] = $1 } END { if (v[1] == "-") print "-"; else if (NR % 2)
                    print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
        }
        printf "$fmt" "$p" "" "$(med 3)" "$(med 4)" "$(med 5)" "$(med 6)" "$(med 7)" \
            "$(med 8)" "$(med 9)" "$(med 10)" "$(med 11)"
    done
} | tee "$out/bench_snapshot.txt"
echo "logs and results in $out"

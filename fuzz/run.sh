#!/bin/sh
# Runs the fuzz targets built by fuzz.mk (`make fuzz`), niced, each for SECONDS or
# RUNS executions from its corpus OUT/corpus/<target> (seeded from fuzz/seeds and
# models/, or make_seeds.sh and fuzz/seeds/<name> for the HDF5 targets); one line
# per target. A finding is saved in OUT/findings/ and fails the script once every
# target has run.
# usage: run.sh OUT SRCDIR "TARGETS" SECONDS [RUNS]
set -u
out=$1 srcdir=$2 targets=$3 seconds=$4 runs=${5:-}
mkdir -p "$out/findings"
# Allocations past 1 GiB fail (pipenet must then report that it is out of memory)
# rather than count as a finding or swap the machine; leaks are findings.
ASAN_OPTIONS=${ASAN_OPTIONS:-allocator_may_return_null=1:max_allocation_size_mb=1024:detect_leaks=1:exitcode=86}
LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$srcdir/tests/sanitizers.supp:print_suppressions=0}
UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
OPENBLAS_NUM_THREADS=1
export ASAN_OPTIONS LSAN_OPTIONS UBSAN_OPTIONS OPENBLAS_NUM_THREADS
if [ -n "$runs" ]; then limit="-runs=$runs"; else limit="-max_total_time=$seconds"; fi
failed=0
for t in $targets; do
    name=${t#fuzz_}
    corpus=$out/corpus/$t
    mkdir -p "$corpus"
    case $name in
    graph) seeds="$srcdir/fuzz/seeds/graph $srcdir/models" ;;
    train_config) seeds="$srcdir/fuzz/seeds/train_config" ;;
    *) seeds="$out/seeds/$name"
       [ -d "$seeds" ] || "$srcdir/fuzz/make_seeds.sh" "$seeds"
       # inputs one decision away cannot reach (two decisions, or a value past 7)
       [ -d "$srcdir/fuzz/seeds/$name" ] && seeds="$seeds $srcdir/fuzz/seeds/$name" ;;
    esac
    dict=
    [ -f "$srcdir/fuzz/$name.dict" ] && dict="-dict=$srcdir/fuzz/$name.dict"
    log=$out/$t.log
    # -close_fd_mask=3: the targets' own messages would flood the terminal; libFuzzer
    # and the sanitizers still report on a copy of stderr.
    nice -n 19 "$out/$t" "$corpus" $seeds $limit $dict -close_fd_mask=3 -timeout=30 \
        -rss_limit_mb=3072 -malloc_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$out/findings/$t-" >"$log" 2>&1
    rc=$?
    done_runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    if [ $rc -eq 0 ]; then
        echo "$t: ${done_runs:-?} executions, no finding (log: $log)"
    else
        failed=1
        echo "$t: FINDING after ${done_runs:-?} executions (exit $rc); see $log and $out/findings/" >&2
        grep -m1 -E "ERROR: |runtime error|^fuzz: " "$log" >&2
    fi
done
exit $failed

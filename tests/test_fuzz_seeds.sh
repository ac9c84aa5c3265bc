#!/bin/sh
# Replays every fuzz target's seeds (fuzz/README.md) through the target built with
# fuzz/replay.c: the targets compile in every build, and the inputs they start
# from (models, train sections, one decision off each default file) are handled
# without a crash or an unexplained refusal. The fuzzing itself is `make fuzz`.
set -u
. "$(dirname "$0")/script_fixture.sh"
src=$(cd "$(dirname "$0")/.." && pwd)
build=${TESTS_BUILDDIR:-$src/tests}/..
"$src/fuzz/make_seeds.sh" "$tmp/seeds" 24 || exit 1
failed=0
replay() {
    prog=$1
    shift
    if ! "$build/fuzz/$prog" "$@" >"$tmp/out" 2>&1; then
        echo "FAIL: $prog on its seeds:"
        tail -20 "$tmp/out"
        failed=1
    fi
}
replay replay_graph "$src/fuzz/seeds/graph" "$src/models"
replay replay_train_config "$src/fuzz/seeds/train_config"
replay replay_dataset "$tmp/seeds" "$src/fuzz/seeds/dataset"
replay replay_snapshot "$tmp/seeds" "$src/fuzz/seeds/snapshot"
replay replay_records "$tmp/seeds"
replay replay_libsvm "$tmp/seeds" "$src/fuzz/seeds/libsvm"
replay replay_csr "$tmp/seeds"
[ $failed -eq 0 ] && echo "PASS: every fuzz target on its seeds"
exit $failed

#!/bin/sh
# The README's test command: installs what is missing, builds, runs `make check`,
# then the GPU tests on the CUDA stand-in (scripts/test_cuda_sim.sh: a second build
# against tools/cuda-sim), and closes with the Check summary of each suite, one
# "N passed, N failed" line and the stand-in's results.
set -u
cd "$(dirname "$0")/.."
scripts/install-deps.sh || exit 1
# test-only: tests/test_slurm.sh brings up a one-node Slurm, and skips without one
scripts/install-deps.sh slurm-wlm munge ||
    echo "test.sh: no slurm-wlm and munge: tests/test_slurm.sh will skip" >&2
# test-only: tests/test_own_data.sh runs docs/own-data.md's example on scikit-learn's
# bundled datasets, and skips without them
scripts/install-deps.sh python3-sklearn python3-h5py ||
    echo "test.sh: no python3-sklearn and python3-h5py: tests/test_own_data.sh will skip" >&2
scripts/build.sh || exit 1

start=$(date +%s)
make -j"$(nproc)" check
status=$?
end=$(date +%s)

# The GPU path, run on the CUDA stand-in (tools/cuda-sim) by a second build
scripts/test_cuda_sim.sh >cuda-sim.log 2>&1
sim_status=$?

echo
echo "== test suites ($((end - start)) s) =="
for log in tests/*.log; do
    [ -f "$log" ] || continue
    line=$(grep -E '^[0-9]+%: Checks: ' "$log" | tail -n 1)
    result=$(grep -E '^:test-result: ' "${log%.log}.trs" 2>/dev/null | tail -n 1 | cut -d' ' -f2)
    printf '%-34s %-5s %s\n' "$(basename "$log" .log)" "$result" "$line"
done
grep -h '^gradient checks:' tests/*.log 2>/dev/null
if [ -f test-suite.log ]; then
    pass=$(grep -h '^:test-result: PASS' tests/*.trs | wc -l)
    fail=$(grep -hE '^:test-result: (FAIL|ERROR|XPASS)' tests/*.trs | wc -l)
    skip=$(grep -h '^:test-result: SKIP' tests/*.trs | wc -l)
    echo "$pass passed, $fail failed, $skip skipped"
fi
echo
echo "== the GPU path on the CUDA stand-in (scripts/test_cuda_sim.sh, cuda-sim.log) =="
grep -E "^  test_|cases, |GPU tests on" cuda-sim.log
[ $status -eq 0 ] || cat test-suite.log
[ $sim_status -eq 0 ] || { echo "the GPU tests on the stand-in failed:"; tail -n 60 cuda-sim.log; }
[ $status -eq 0 ] && [ $sim_status -eq 0 ]

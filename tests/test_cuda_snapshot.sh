#!/bin/sh
# Snapshots cross between a GPU and the CPU: the tiny GPT of lm_fixture.sh trained
# 20 steps on cuda and on cpu, each writing a snapshot at step 10; the cuda run's
# step-10 snapshot resumes on the cpu, the cpu's on cuda, and the resumed steps
# 11..20 have the losses of the run that wrote the snapshot (gpu_fixture.sh's
# loss_rtol, growing from 1.5e-4 at step 11 to 6e-4 at step 20: two devices). The
# export of the GPU run is an ordinary pipenet-model file (pipenet inspect reads it),
# and infer --device cuda on it agrees with --device cpu: every score within a
# relative L2 difference of 1e-4, every prediction equal. Where mpirun is, the same
# crossing for a snapshot of parts: 2 stages on cuda, each writing its own part from
# device memory, resumed on one cpu process, and the cpu's resumed on 2 cuda stages.
# Skips (77) without CUDA in the build or a GPU.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/script_fixture.sh"
. "$here/gpu_fixture.sh"
. "$here/lm_fixture.sh"
need_gpu

import_times_table 600
tiny_gpt 256 '{"batch": 16, "steps": 20, "seed": 11,
           "optimizer": {"type": "adam", "lr": 0.01}}' >"$tmp/gpt.json"
train() { # train NAME DEVICE ARGS...
    name=$1 dev=$2; shift 2
    "$PIPENET" train "$tmp/gpt.json" --data "$tmp/lm/train.h5" --eval= --threads 1 \
        --device "$dev" --metrics "$tmp/m_$name" "$@" >"$tmp/out_$name" 2>&1 ||
        { cat "$tmp/out_$name"; fail "train $name (--device $dev)"; }
}
train cuda cuda --snapshot-dir "$tmp/snap_cuda" --snapshot-every 10 --keep 5
train cpu cpu --snapshot-dir "$tmp/snap_cpu" --snapshot-every 10 --keep 5
train cuda_on_cpu cpu --resume "$tmp/snap_cuda/snapshot-0000000010.h5"
train cpu_on_cuda cuda --resume "$tmp/snap_cpu/snapshot-0000000010.h5"
step_loss "$tmp/m_cuda_on_cpu" 10 | grep -q . && fail "the resumed run ran step 10 again"
echo "a cuda snapshot resumed on the cpu:"
same_losses "$tmp/m_cuda_on_cpu" "$tmp/m_cuda" 11 20 || fail "cuda -> cpu resume"
echo "a cpu snapshot resumed on cuda:"
same_losses "$tmp/m_cpu_on_cuda" "$tmp/m_cpu" 11 20 || fail "cpu -> cuda resume"
# 2 stages on cuda (where mpirun is): each stage writes its part from device memory
# through its staging buffer, and reads its own parameters back through it
if command -v mpirun >/dev/null 2>&1; then
    mtrain() { # mtrain NAME ARGS...: 2 stages on cuda
        name=$1; shift
        mpirun --oversubscribe -np 2 "$PIPENET" train "$tmp/gpt.json" --data "$tmp/lm/train.h5" \
            --eval= --threads 1 --device cuda --stages 2 --metrics "$tmp/m_$name" "$@" \
            >"$tmp/out_$name" 2>&1 || { cat "$tmp/out_$name"; fail "train $name (2 stages, cuda)"; }
    }
    mtrain cuda2 --snapshot-dir "$tmp/snap_cuda2" --snapshot-every 10 --keep 5
    [ -f "$tmp/snap_cuda2/snapshot-0000000010.part-001-000.h5" ] ||
        fail "2 stages on cuda wrote no part per stage: $(ls "$tmp/snap_cuda2")"
    train cuda2_on_cpu cpu --resume "$tmp/snap_cuda2/snapshot-0000000010.h5"
    mtrain cpu_on_cuda2 --resume "$tmp/snap_cpu/snapshot-0000000010.h5"
    echo "a snapshot of 2 cuda stages resumed on one cpu process:"
    same_losses "$tmp/m_cuda2_on_cpu" "$tmp/m_cuda2" 11 20 || fail "2 cuda stages -> cpu resume"
    echo "a cpu snapshot resumed on 2 cuda stages:"
    same_losses "$tmp/m_cpu_on_cuda2" "$tmp/m_cpu" 11 20 || fail "cpu -> 2 cuda stages resume"
fi

"$PIPENET" export "$tmp/snap_cuda" --out "$tmp/gpu.h5" >"$tmp/out" 2>&1 || { cat "$tmp/out"; fail "export"; }
"$PIPENET" inspect "$tmp/gpu.h5" >"$tmp/inspect" 2>&1 || { cat "$tmp/inspect"; fail "inspect"; }
grep -q "^format: *pipenet-model" "$tmp/inspect" || { cat "$tmp/inspect"; fail "not a pipenet-model"; }
for d in cpu cuda; do
    "$PIPENET" infer "$tmp/gpu.h5" --data "$tmp/lm/test.h5" --device $d --out "$tmp/pred_$d.h5" \
        >"$tmp/infer_$d" 2>&1 || { cat "$tmp/infer_$d"; fail "infer --device $d"; }
    cat "$tmp/infer_$d"
done
grep -q "device cuda:0" "$tmp/infer_cuda" || fail "infer --device cuda did not run on cuda:0"
"$PIPENET" inspect "$tmp/pred_cuda.h5" --compare "$tmp/pred_cpu.h5" --tolerance 1e-4 ||
    fail "infer on cuda and on cpu differ"
echo "PASS: snapshots cross between cuda and cpu; a GPU export infers alike on both"

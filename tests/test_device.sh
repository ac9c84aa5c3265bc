#!/bin/sh
# Placement (--device, "device" in the model's train section; its names are one
# table, enumerated by tests/test_choices.c): cuda where this build has no CUDA or no
# GPU is visible is a clear error before any training, on one process and under
# mpirun (one message); auto falls back to the CPU with the CPU's parameter hash; the
# layout line names each rank's device; a bad value is a usage or config error. infer
# and generate take the same choice: cpu and auto (no GPU) write the same predictions
# (inspect --compare) and the same bytes. CUDA_VISIBLE_DEVICES= hides every GPU, so
# the error is tested on machines with a GPU too (the GPU path itself:
# docs/running.md, GPU runs; the CUDA module's loading: tests/test_cuda_module.sh).
set -u
. "$(dirname "$0")/script_fixture.sh"
here=$(cd "$(dirname "$0")/.." && pwd)
model=$here/models/fashion_mlp.json
CUDA_VISIBLE_DEVICES=
export CUDA_VISIBLE_DEVICES

why="device cuda: \(this pipenet was built without CUDA\|no CUDA device is visible to this process (CUDA_VISIBLE_DEVICES=)\)"

# the error comes before the data is even opened (this file does not exist)
expect 1 "$why" "$PIPENET" train "$model" --data "$tmp/none.h5" --device cuda
grep -q "none.h5" "$tmp/out" && fail "the data was opened before the device was placed"
sed 's/"train": {/"train": {"device": "cuda", /' "$model" >"$tmp/cuda.json"
grep -q '"device": "cuda"' "$tmp/cuda.json" || fail "could not add train.device to $model"
expect 1 "$why" "$PIPENET" train "$tmp/cuda.json" --data "$tmp/none.h5"
# under mpirun: every rank fails at setup, the message comes once
expect 1 "$why" mpirun --oversubscribe -np 2 "$PIPENET" train "$model" --stages 2 \
    --data "$tmp/none.h5" --device cuda
[ "$(grep -c "device cuda:" "$tmp/out")" -eq 1 ] || { cat "$tmp/out"; fail "not one message from 2 ranks"; }
# bad values
expect 2 "--device: expected .*, got 'gpu'" "$PIPENET" train "$model" --device gpu
sed 's/"train": {/"train": {"device": "gpu", /' "$model" >"$tmp/gpu.json"
expect 1 "train.device: expected a device" "$PIPENET" train "$tmp/gpu.json" --data "$tmp/none.h5"
"$PIPENET" train --help | grep -q -- "--device D" || fail "train --help lacks --device"
# infer: the same resolution, before any file is read
expect 1 "$why" "$PIPENET" infer "$tmp/none.h5" --data "$tmp/none.h5" --device cuda
grep -q "none.h5" "$tmp/out" && fail "infer opened a file before the device was placed"
expect 2 "--device: expected .*, got 'gpu'" "$PIPENET" infer "$tmp/none.h5" \
    --data "$tmp/none.h5" --device gpu
echo "ok: --device cuda without CUDA or GPU is an error before training; bad values refused"

# infer of a real export (the tiny GPT of lm_fixture.sh, 5 steps): cpu and auto (no
# GPU visible) write the same predictions, value for value (inspect --compare,
# exact); cuda is the error above; a file that differs is found
. "$here/tests/lm_fixture.sh"
import_times_table 300
tiny_gpt 256 '{"batch": 8, "steps": 5, "seed": 2, "optimizer": {"type": "adam", "lr": 0.01}}' \
    >"$tmp/gpt.json"
"$PIPENET" train "$tmp/gpt.json" --data "$tmp/lm/train.h5" --eval= --threads 1 \
    --snapshot-dir "$tmp/snap" --snapshot-every 5 >"$tmp/out" 2>&1 || { cat "$tmp/out"; fail "train"; }
"$PIPENET" export "$tmp/snap" --out "$tmp/gpt.h5" >"$tmp/out" 2>&1 || { cat "$tmp/out"; fail "export"; }
for d in cpu auto; do
    "$PIPENET" infer "$tmp/gpt.h5" --data "$tmp/lm/test.h5" --device $d --out "$tmp/pred_$d.h5" \
        >"$tmp/infer_$d" 2>&1 || { cat "$tmp/infer_$d"; fail "infer --device $d"; }
done
grep -q "device cuda" "$tmp/infer_auto" && fail "auto without a GPU ran on one: $(cat "$tmp/infer_auto")"
expect 0 "0 differ (exact" "$PIPENET" inspect "$tmp/pred_cpu.h5" --compare "$tmp/pred_auto.h5"
expect 1 "$why" "$PIPENET" infer "$tmp/gpt.h5" --data "$tmp/lm/test.h5" --device cuda
"$PIPENET" infer "$tmp/snap" --data "$tmp/lm/test.h5" --batch 7 --output ln_f \
    --out "$tmp/pred_ln.h5" >"$tmp/out" 2>&1 || { cat "$tmp/out"; fail "infer --output ln_f"; }
expect 1 "differs: /scores" "$PIPENET" inspect "$tmp/pred_cpu.h5" --compare "$tmp/pred_ln.h5"
expect 2 "option '--compare' needs a value" "$PIPENET" inspect "$tmp/pred_cpu.h5" --compare
expect 2 "unknown option '-x'" "$PIPENET" inspect -x "$tmp/pred_cpu.h5"
echo "ok: infer --device cpu and auto give the same predictions; cuda is refused without a GPU"
# generate: the same bytes on cpu and auto here, cuda refused, a bad name a usage error
for d in cpu auto; do
    "$PIPENET" generate "$tmp/gpt.h5" --prompt "ab" --tokens 12 --seed 3 --device $d \
        >"$tmp/gen_$d" 2>"$tmp/gen_$d.err" || { cat "$tmp/gen_$d.err"; fail "generate --device $d"; }
done
[ -s "$tmp/gen_cpu" ] && cmp -s "$tmp/gen_cpu" "$tmp/gen_auto" ||
    fail "generate: --device cpu and auto gave different bytes"
expect 1 "$why" "$PIPENET" generate "$tmp/gpt.h5" --prompt "ab" --tokens 4 --device cuda
expect 2 "--device: expected .*, got 'gpu'" \
    "$PIPENET" generate "$tmp/gpt.h5" --prompt "ab" --tokens 4 --device gpu
echo "ok: generate --device cpu and auto give the same bytes; cuda is refused without a GPU"

SRC=/usr/share/datasets/fashion-mnist
[ -d "$SRC" ] || { echo "SKIP: $SRC not installed: no training run"; exit 0; }
"$PIPENET" import fashion-mnist --src "$SRC" --out "$tmp/fm" >/dev/null || fail "import"
run() { # run NAME ARGS...: 3 steps, the parameter hash line into $tmp/NAME
    name=$1; shift
    "$@" --data "$tmp/fm/train.h5" --eval= --steps 3 --threads 1 --log-every 1000 \
        >"$tmp/$name" 2>&1 || { cat "$tmp/$name"; fail "$name exited non-zero"; }
}
run cpu "$PIPENET" train "$model" --device cpu
run auto "$PIPENET" train "$model" --device auto
[ "$(grep "parameter hash" "$tmp/auto")" = "$(grep "parameter hash" "$tmp/cpu")" ] ||
    fail "auto without a GPU does not train as cpu: $(grep hash "$tmp/auto") vs $(grep hash "$tmp/cpu")"
grep -q "^device:" "$tmp/cpu" && fail "one process on the cpu printed a device line"
run mpi mpirun --oversubscribe -np 2 "$PIPENET" train "$model" --stages 2 --device auto
grep -q "^layout: .*, device cpu$" "$tmp/mpi" || { cat "$tmp/mpi"; fail "the layout line does not name the device"; }
echo "ok: auto without a GPU trains on the cpu (same hash), the layout line says so"

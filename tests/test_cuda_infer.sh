#!/bin/sh
# Inference on a GPU against the CPU, from one export of the tiny GPT of lm_fixture.sh
# (trained 60 steps on the cpu): `pipenet infer --device cuda` writes the CPU's
# predictions and scores within 1e-4 (relative L2: cuBLAS adds in another order);
# `pipenet generate --device cuda` writes the CPU's bytes greedily (temperature 0),
# sampling with a seed and by beam search, and, without the key/value cache, the
# cached run's bytes. Skips (77) without CUDA in the build or a GPU.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/script_fixture.sh"
. "$here/gpu_fixture.sh"
. "$here/lm_fixture.sh"
need_gpu

import_times_table 300
tiny_gpt 256 '{"batch": 16, "steps": 60, "seed": 4, "optimizer": {"type": "adam", "lr": 0.02}}' \
    >"$tmp/gpt.json"
"$PIPENET" train "$tmp/gpt.json" --data "$tmp/lm/train.h5" --eval= --threads 1 \
    --snapshot-dir "$tmp/snap" --snapshot-every 60 >"$tmp/out" 2>&1 || { cat "$tmp/out"; fail "train"; }
"$PIPENET" export "$tmp/snap" --out "$tmp/gpt.h5" >"$tmp/out" 2>&1 || { cat "$tmp/out"; fail "export"; }

for d in cpu cuda; do
    "$PIPENET" infer "$tmp/gpt.h5" --data "$tmp/lm/test.h5" --device $d --batch 5 \
        --out "$tmp/pred_$d.h5" >"$tmp/infer_$d" 2>&1 || { cat "$tmp/infer_$d"; fail "infer --device $d"; }
done
grep -q "device cuda:0" "$tmp/infer_cuda" || { cat "$tmp/infer_cuda"; fail "infer --device cuda ran elsewhere"; }
"$PIPENET" inspect "$tmp/pred_cuda.h5" --compare "$tmp/pred_cpu.h5" --tolerance 1e-4 ||
    fail "infer on cuda and on cpu differ"
echo "ok: infer --device cuda gives the cpu's predictions"

# generate NAME DEVICE ARGS...: the bytes in $tmp/gen_NAME
generate() {
    out=$1 dev=$2; shift 2
    "$PIPENET" generate "$tmp/gpt.h5" --prompt "3 times 4" --tokens 24 --device "$dev" "$@" \
        >"$tmp/gen_$out" 2>"$tmp/gen_$out.err" || { cat "$tmp/gen_$out.err"; fail "generate $out"; }
    [ -s "$tmp/gen_$out" ] || fail "generate $out wrote nothing"
}
for how in "greedy --temperature 0" "sampled --seed 9" "beam --beam 4"; do
    # shellcheck disable=SC2086
    set -- $how
    name=$1; shift
    generate "${name}_cpu" cpu "$@"
    generate "${name}_cuda" cuda "$@"
    cmp -s "$tmp/gen_${name}_cpu" "$tmp/gen_${name}_cuda" ||
        fail "generate ($name): cuda wrote '$(cat "$tmp/gen_${name}_cuda")', cpu '$(cat "$tmp/gen_${name}_cpu")'"
    echo "ok: generate ($name) on cuda: '$(cat "$tmp/gen_${name}_cuda")'"
done
generate nocache_cuda cuda --temperature 0 --no-cache
cmp -s "$tmp/gen_nocache_cuda" "$tmp/gen_greedy_cuda" ||
    fail "generate on cuda without the cache differs from the cached run"
echo "PASS: infer and generate on cuda give the cpu's outputs"

#!/bin/sh
# The click-through model (ctr_fixture.sh: embedding, fm, flatten, cross,
# inner_product, concat, fc, add, sigmoid_xent) on a GPU against the CPU: 16 steps
# with one seed on --device cuda and --device cpu give step losses within
# gpu_fixture.sh's loss_rtol, and the evaluations' AUC and log-loss agree; infer of
# one trained model on either device writes the same logits, scores and
# predictions. Skips (77) without CUDA in the build or a GPU.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/script_fixture.sh"
. "$here/gpu_fixture.sh"
. "$here/ctr_fixture.sh"
need_gpu

ctr_set train 256 0
ctr_set eval 96 1000
ctr_model "$tmp/ctr.json" 16
same_binary_training "$tmp/ctr.json" "$tmp/train.h5" "$tmp/eval.h5"

# one model, inferred on both devices: the same outputs (to rounding) and predictions
model=$tmp/snap_cpu/snapshot-0000000016.h5
same_binary_inference "$model" "$tmp/eval.h5" "$H5"
echo "PASS: the click-through model trains and infers on cuda as on cpu (infer AUC $auc_cpu)"

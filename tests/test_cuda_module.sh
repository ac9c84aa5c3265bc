#!/bin/sh
# The CUDA module (pipenet-cuda.so, src/math/cuda_module.h): pipenet links no CUDA
# library and opens the module only when a GPU is asked for. Without a GPU (every
# GPU hidden: CUDA_VISIBLE_DEVICES=), in a build that made the module:
#  1. it exports its descriptor alone and holds none of pipenet's own code (one error
#     state, one buffer pool): every pn_ function it calls is undefined in it;
#  2. it loads into pipenet (dlopen RTLD_NOW: a pn_ symbol that pipenet does not
#     export or link fails here, the dynamic loader's message shown): --device cuda
#     says no GPU is visible, not that the module cannot load;
#  3. --device cuda without the module file, with a file that is no shared object,
#     with one that is no module, or with another pipenet's module, is an error that
#     names the path and the reason, before the data is read; auto then trains on
#     the cpu;
#  4. --version, --device cpu, and auto where no module exists open nothing.
# A build without CUDA has no module: --device cuda says so, and nothing is opened.
set -u
. "$(dirname "$0")/script_fixture.sh"
here=$(cd "$(dirname "$0")/.." && pwd)
model=$here/models/fashion_mlp.json
fake=${TESTS_BUILDDIR:-$(dirname "$PIPENET")/tests}/fake_cuda_module.so
CUDA_VISIBLE_DEVICES=
export CUDA_VISIBLE_DEVICES

ldd "$PIPENET" | grep -Ei 'libcud|libcublas|libnccl' && fail "pipenet links a CUDA library"

# opened LOG: the shared objects a run opened after its start (LD_DEBUG=files)
opened() { grep -E 'file=.*(pipenet-cuda|libcudart|libcublas|libnccl)' "$1"; }
LD_DEBUG=files "$PIPENET" --version >/dev/null 2>"$tmp/version.log" || fail "--version"
opened "$tmp/version.log" && fail "--version opened the CUDA module"
LD_DEBUG=files "$PIPENET" train "$model" --data "$tmp/none.h5" --device cpu >/dev/null \
    2>"$tmp/cpu.log"
opened "$tmp/cpu.log" && fail "--device cpu opened the CUDA module"
grep -q "none.h5" "$tmp/cpu.log" || { cat "$tmp/cpu.log"; fail "--device cpu did not reach the data"; }

# where the module is: PIPENET_CUDA_MODULE (make check sets it), else beside pipenet
module=${PIPENET_CUDA_MODULE:-$(dirname "$PIPENET")/pipenet-cuda.so}
if [ ! -f "$module" ]; then
    expect 1 "device cuda: this pipenet was built without CUDA" \
        "$PIPENET" train "$model" --data "$tmp/none.h5" --device cuda
    LD_DEBUG=files "$PIPENET" train "$model" --data "$tmp/none.h5" --device auto >/dev/null \
        2>"$tmp/auto.log"
    opened "$tmp/auto.log" && fail "--device auto opened a module in a build without CUDA"
    echo "PASS: no module in a build without CUDA: --device cuda says so, nothing is opened"
    exit 0
fi

# 1. one exported symbol; every pn_ symbol it uses is pipenet's
[ "$(nm -D --defined-only "$module" | awk '{print $3}')" = pn_cuda_module_entry ] ||
    { nm -D --defined-only "$module"; fail "the module exports more than its descriptor"; }
nm -D --defined-only "$PIPENET" | awk '$3 ~ /^pn_/ {print $3}' | sort >"$tmp/exported"
nm --defined-only "$module" | awk '{print $3}' | sort >"$tmp/defined"
comm -12 "$tmp/exported" "$tmp/defined" >"$tmp/twice"
[ -s "$tmp/twice" ] && { cat "$tmp/twice"; fail "the module has its own copy of pipenet's code"; }
nm -D --undefined-only "$module" | awk '$2 ~ /^pn_/ {print $2}' | sort >"$tmp/called"
[ -s "$tmp/called" ] || fail "the module calls no pn_ function: it must call pipenet's"
comm -23 "$tmp/called" "$tmp/exported" >"$tmp/missing"
[ -s "$tmp/missing" ] && { cat "$tmp/missing"; fail "pipenet does not export what the module calls"; }
echo "ok: the module exports its descriptor alone and calls $(wc -l <"$tmp/called") of pipenet's functions"

# 2. it loads into pipenet, which finds no GPU (the data is never read)
export PIPENET_CUDA_MODULE="$module"
expect 1 "device cuda: no CUDA device is visible to this process (CUDA_VISIBLE_DEVICES=)" \
    "$PIPENET" train "$model" --data "$tmp/none.h5" --device cuda
grep -q "none.h5" "$tmp/out" && fail "the data was read before the device was placed"
LD_DEBUG=files "$PIPENET" train "$model" --data "$tmp/none.h5" --device cuda >/dev/null \
    2>"$tmp/cuda.log"
opened "$tmp/cuda.log" | grep -q "pipenet-cuda.so" || fail "--device cuda did not open the module"
expect 1 "device cuda: no CUDA device is visible" mpirun --oversubscribe -np 2 "$PIPENET" train \
    "$model" --stages 2 --data "$tmp/none.h5" --device cuda
echo "ok: the module loads into pipenet (one process and 2 ranks); no GPU is visible"

# 3. a module that cannot be had: the path and the reason, every time before the data
expect 1 "device cuda: cannot read the CUDA module $tmp/none.so (PIPENET_CUDA_MODULE): No such file" \
    env PIPENET_CUDA_MODULE="$tmp/none.so" "$PIPENET" train "$model" --data "$tmp/none.h5" \
    --device cuda
echo "not a shared object" >"$tmp/text.so"
expect 1 "device cuda: cannot load the CUDA module $tmp/text.so: $tmp/text.so: " \
    env PIPENET_CUDA_MODULE="$tmp/text.so" "$PIPENET" train "$model" --data "$tmp/none.h5" \
    --device cuda
libm=$(ldd "$PIPENET" | awk '$1 ~ /^libm\.so/ {print $3}')
expect 1 "device cuda: $libm is not a pipenet CUDA module: .*undefined symbol: pn_cuda_module_entry" \
    env PIPENET_CUDA_MODULE="$libm" "$PIPENET" train "$model" --data "$tmp/none.h5" --device cuda
expect 1 "device cuda: the CUDA module $fake was built for another pipenet (0.0.0-another" \
    env PIPENET_CUDA_MODULE="$fake" "$PIPENET" train "$model" --data "$tmp/none.h5" --device cuda
expect 1 "device cuda: cannot load the CUDA module $tmp/text.so" \
    env PIPENET_CUDA_MODULE="$tmp/text.so" "$PIPENET" infer "$tmp/none.h5" --data "$tmp/none.h5" \
    --device cuda
grep -q "none.h5" "$tmp/out" && fail "infer read a file before the device was placed"
# auto takes the cpu instead, saying why once
expect 1 "cannot open '$tmp/none.h5'" env PIPENET_CUDA_MODULE="$tmp/text.so" "$PIPENET" train \
    "$model" --data "$tmp/none.h5" --device auto
grep -q "device auto: on the cpu: cannot load the CUDA module $tmp/text.so" "$tmp/out" ||
    { cat "$tmp/out"; fail "auto did not say why it took the cpu"; }
# pipenet without PIPENET_CUDA_MODULE, alone in a folder: beside it, then $(pkglibdir)
unset PIPENET_CUDA_MODULE
mkdir "$tmp/bin" && cp "$PIPENET" "$tmp/bin/pipenet"
"$tmp/bin/pipenet" train "$model" --data "$tmp/none.h5" --device cuda >"$tmp/out" 2>&1
if grep -q "the CUDA module is missing" "$tmp/out"; then
    grep -q "device cuda: the CUDA module is missing: no $tmp/bin/pipenet-cuda.so nor /.*/pipenet-cuda.so" \
        "$tmp/out" || { cat "$tmp/out"; fail "the missing module's message names no path"; }
    LD_DEBUG=files "$tmp/bin/pipenet" train "$model" --data "$tmp/none.h5" --device auto \
        >/dev/null 2>"$tmp/auto.log"
    opened "$tmp/auto.log" && fail "--device auto opened something where no module exists"
    grep -q "none.h5" "$tmp/auto.log" || { cat "$tmp/auto.log"; fail "auto without a module"; }
else # a module is installed on this machine: the copy found it
    grep -q "no CUDA device is visible" "$tmp/out" || { cat "$tmp/out"; fail "pipenet alone"; }
    echo "note: an installed module was found; the search without one is not checked"
fi
cp "$module" "$tmp/bin/pipenet-cuda.so"
expect 1 "device cuda: no CUDA device is visible" "$tmp/bin/pipenet" train "$model" \
    --data "$tmp/none.h5" --device cuda
echo "ok: a missing, broken, foreign or other pipenet's module is refused, naming it; auto takes the cpu"
echo "PASS: the CUDA module"

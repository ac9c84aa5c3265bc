#!/bin/sh
# What the real CUDA compiler can check and a CPU stand-in of the toolkit cannot:
# every kernel of src/math/cuda declares the largest block it is launched with
# (__launch_bounds__, read back as .maxntid from its PTX), and, as ptxas builds it for
# each architecture of the build, fits in a block of that size:
#  - registers are allocated per warp in units of 256: a warp takes
#    ceil(regs x 32 / 256) x 256 of them, and a block's warps at most 65536 (the
#    register file one block may use on sm_80 and sm_90), else its launch fails at
#    run time ("too many resources requested for launch");
#  - static shared memory at most 48 KiB (more needs an opt-in the code never asks).
# One line per kernel and architecture: the kernel (demangled), arch, registers,
# static shared bytes, max threads, verdict; fails naming every kernel that breaks
# a rule, has no bound, or that ptxas did not report (its output changed).
#
# NVCC, NVCCFLAGS, CUDA_ARCH_FLAGS and CUDA_CPPFLAGS come from make check (configure's
# values); the kernels compile with the build's flags. Skips (77) without nvcc, or
# where nvcc is not NVIDIA's: a stand-in's `nvcc --version` lacks "NVIDIA" or "Cuda
# compilation tools".
# Usage: tests/test_cuda_resources.sh [FILE.cu...]   (default: src/math/cuda/*.cu)
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/script_fixture.sh"

NVCC=${NVCC:-}
[ -n "$NVCC" ] || { echo "SKIP: no nvcc in this build (configure found no CUDA)"; exit 77; }
version=$("$NVCC" --version 2>&1) || { echo "SKIP: $NVCC --version failed"; exit 77; }
case $version in
*NVIDIA*"Cuda compilation tools"*) ;;
*) echo "SKIP: $NVCC is not NVIDIA's nvcc (a stand-in): $version" | head -n 2; exit 77 ;;
esac
NVCCFLAGS=${NVCCFLAGS:--O2}
default_archs="-gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90"
CUDA_ARCH_FLAGS=${CUDA_ARCH_FLAGS:-$default_archs}
# the PTX of the first virtual architecture names each kernel's bound (the bounds are
# the source's, the same for every architecture)
ptx_arch=$(echo "$CUDA_ARCH_FLAGS" | grep -o 'arch=compute_[0-9a-z]*' | head -n 1 | cut -d= -f2)
archs=$(echo "$CUDA_ARCH_FLAGS" | grep -o 'code=sm_[0-9a-z]*' | cut -d= -f2 | sort -u)
[ -n "$ptx_arch" ] && [ -n "$archs" ] ||
    fail "no architecture in CUDA_ARCH_FLAGS='$CUDA_ARCH_FLAGS'"
top=$(cd "$here/.." && pwd)
build=$(cd "${TESTS_BUILDDIR:-$here}/.." && pwd)
includes="-I$top/src -I$build -DHAVE_CONFIG_H ${CUDA_CPPFLAGS:-}"
demangle() { if command -v c++filt >/dev/null; then c++filt; else cat; fi; }

[ $# -gt 0 ] || set -- "$top"/src/math/cuda/*.cu
failed=0 kernels=0
for cu in "$@"; do
    name=$(basename "$cu" .cu)
    # ptxas's report per kernel and architecture; nvcc -fatbin: device code only
    # shellcheck disable=SC2086
    if ! $NVCC $NVCCFLAGS $CUDA_ARCH_FLAGS --fmad=false $includes --resource-usage -fatbin \
        -o "$tmp/$name.fatbin" "$cu" >"$tmp/$name.ptxas" 2>&1; then
        echo "FAIL: $cu does not compile:"; cat "$tmp/$name.ptxas"; failed=1
    fi
    # shellcheck disable=SC2086
    $NVCC $NVCCFLAGS -arch="$ptx_arch" --fmad=false $includes -ptx -o "$tmp/$name.ptx" "$cu" \
        >"$tmp/$name.ptx.log" 2>&1 || { cat "$tmp/$name.ptx.log"; fail "$cu: no PTX"; }
    # "kernel maxntid" for every entry of the PTX (0: no .maxntid before its body)
    awk '/\.entry / { if (k != "") print k, 0; k = $0; sub(/.*\.entry[ \t]+/, "", k);
                      sub(/\(.*/, "", k); next }
         k != "" && /\.maxntid/ { sub(/.*\.maxntid[ \t]+/, ""); gsub(/[ \t]/, "");
                      n = split($0, d, ","); t = 1; for (i = 1; i <= n; i++) t *= d[i];
                      print k, t; k = ""; next }
         k != "" && /^[ \t]*\{/ { print k, 0; k = "" }
         END { if (k != "") print k, 0 }' "$tmp/$name.ptx" >"$tmp/$name.bounds"
    # "kernel arch registers shared" for every entry ptxas compiled
    awk -v q="'" '/Compiling entry function/ { split($0, f, q); k = f[2]; a = f[4]; next }
         /Compiling/ { k = "" }
         k != "" && /Used [0-9]+ registers/ { r = $0; sub(/.*Used /, "", r); sub(/ .*/, "", r);
                      s = 0; if (match($0, /[0-9]+ bytes smem/)) s = substr($0, RSTART) + 0;
                      print k, a, r, s; k = "" }' "$tmp/$name.ptxas" >"$tmp/$name.usage"
    while read -r kernel bound; do
        for arch in $archs; do
            kernels=$((kernels + 1))
            shown=$(echo "$kernel" | demangle)
            usage=$(awk -v k="$kernel" -v a="$arch" '$1 == k && $2 == a {print $3, $4; exit}' \
                "$tmp/$name.usage")
            if [ -z "$usage" ]; then
                echo "$shown  $arch: FAIL (no ptxas report for it)"; failed=1
                continue
            fi
            regs=${usage% *} shared=${usage#* }
            # the limits: 65536 registers a block, 48 KiB of static shared memory
            verdict=$(awk -v r="$regs" -v s="$shared" -v t="$bound" 'BEGIN {
                threads = t > 0 ? t : 1024; warps = int((threads + 31) / 32)
                per_warp = int((r * 32 + 255) / 256) * 256; why = ""
                if (t == 0) why = why "; no __launch_bounds__"
                if (per_warp * warps > 65536)
                    why = why sprintf("; %d registers x %d warps = %d > 65536", per_warp, warps,
                                      per_warp * warps)
                if (s > 49152) why = why sprintf("; %d bytes of shared memory > 49152", s)
                print why == "" ? "PASS" : "FAIL" why }')
            threads="$bound threads"
            [ "$bound" -gt 0 ] || threads="1024 threads (CUDA's most: no bound)"
            printf '%s  %s: %s registers, %s bytes shared, at most %s: %s\n' "$shown" "$arch" \
                "$regs" "$shared" "$threads" "$verdict"
            case $verdict in FAIL*) failed=1 ;; esac
        done
    done <"$tmp/$name.bounds"
done
[ "$kernels" -gt 0 ] || fail "no kernel found (did the PTX format change?)"
[ "$failed" -eq 0 ] || fail "a kernel does not fit the block it declares (above)"
echo "PASS: $kernels kernel builds within their blocks' registers and shared memory"

#!/bin/sh
# The installed embedding API as a program built elsewhere uses it (docs/inference.md,
# "The C API"): `make install` into a prefix of its own, examples/predict.c compiled
# and linked with mpicc and `pkg-config --cflags --libs pipenet` only, then run on a
# model trained and exported here. A CPU-only program gets no CUDA or NCCL library,
# neither from pipenet.pc's Libs nor among what the linked program needs (the CUDA
# module brings its own, src/math/cuda_module.h), and prints what the in-tree
# examples/predict prints. Skips (77) without pkg-config or mpicc.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/script_fixture.sh"
. "$here/tiny_fixture.sh"
build=${TESTS_BUILDDIR:-$here}/..
command -v pkg-config >/dev/null || { echo "SKIP: no pkg-config"; exit 77; }
command -v mpicc >/dev/null || { echo "SKIP: no mpicc"; exit 77; }

# install into $tmp/inst; the make that runs this test passes its jobserver in MAKEFLAGS
prefix=$tmp/inst
env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -C "$build" install prefix="$prefix" \
    >"$tmp/install.out" 2>&1 || { tail -20 "$tmp/install.out"; fail "make install prefix=$prefix"; }
[ -f "$prefix/lib/pkgconfig/pipenet.pc" ] || fail "make install wrote no lib/pkgconfig/pipenet.pc"
pc() { PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config --define-variable=prefix="$prefix" "$@" pipenet; }
flags=$(pc --cflags --libs) || fail "pkg-config --cflags --libs pipenet: $flags"

# nothing of CUDA's in the flags: no -lcudart/-lcublas/-lnccl, no CUDA directory
for word in $flags; do
    case $word in
    -lcu* | -lnccl* | *cuda/lib* | *libcu*.so* | *libnccl*) fail "pipenet.pc gives a CPU-only program $word: $flags" ;;
    esac
done

# the program, linked from the install only
# shellcheck disable=SC2086 # flags are words
mpicc -std=c11 "$here/../examples/predict.c" $flags -o "$tmp/predict" >"$tmp/cc.out" 2>&1 ||
    { cat "$tmp/cc.out"; fail "mpicc predict.c \$(pkg-config --cflags --libs pipenet)"; }
needed=$(readelf -d "$tmp/predict" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
[ -n "$needed" ] || fail "readelf found no NEEDED entry in the program"
case " $needed" in
*" libcu"* | *" libnccl"*) fail "the CPU-only program needs CUDA's libraries: $needed" ;;
esac

# it runs: a small classifier trained, exported with the installed pipenet, predicted
# by the installed-API program and by the in-tree one alike
"$fix" dataset "$tmp/data.h5" 40 || fail "h5_fixture dataset"
tiny_model "$tmp/m.json"
"$prefix/bin/pipenet" train "$tmp/m.json" --data "$tmp/data.h5" --eval= --steps 4 --threads 1 \
    --snapshot-dir "$tmp/snaps" >"$tmp/train.out" 2>&1 || { cat "$tmp/train.out"; fail "train"; }
"$prefix/bin/pipenet" export "$tmp/snaps" --out "$tmp/model.h5" >"$tmp/export.out" 2>&1 ||
    { cat "$tmp/export.out"; fail "export"; }
"$tmp/predict" "$tmp/model.h5" "$tmp/data.h5" 8 >"$tmp/installed.out" 2>&1 ||
    { cat "$tmp/installed.out"; fail "the installed-API program exited non-zero"; }
"$build/examples/predict" "$tmp/model.h5" "$tmp/data.h5" 8 >"$tmp/tree.out" 2>&1 ||
    { cat "$tmp/tree.out"; fail "examples/predict exited non-zero"; }
grep -q "accuracy" "$tmp/installed.out" || fail "no accuracy line: $(cat "$tmp/installed.out")"
cmp -s "$tmp/installed.out" "$tmp/tree.out" ||
    fail "the installed-API program and examples/predict differ: $(diff "$tmp/installed.out" "$tmp/tree.out")"
echo "ok: installed pipenet.pc links a CPU-only program with $needed; it runs as examples/predict does"

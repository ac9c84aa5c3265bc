#!/bin/sh
# Packs programs built here, with the CUDA module (pipenet-cuda.so: the CUDA backend
# and the NCCL transport, which the programs open when a GPU is asked for) and the
# shared libraries they load, for a GPU machine that has the NVIDIA driver and CUDA
# 13 but none of Debian's packages (Open MPI, HDF5, OpenBLAS, jansson, Check...): the
# device machines of this workplace. Taken: every library ldd lists for the programs
# and the module, except the C library's own (libc, libm, libdl, libpthread, librt,
# ld-linux: the GPU machine has them), the CUDA driver (libcuda) and the CUDA
# toolkit's (libcudart, libcublas, libcublasLt, libnccl: 600 MB, and there already).
# Also Open MPI's plugins and their libraries, which MPI_Init loads at run time
# (pipenet train; the test programs do not start MPI), and Open MPI's mpirun with
# its help texts, as gpu/mpirun: several ranks on the GPU machine's one node.
#
# Usage: scripts/gpu_bundle.sh OUT.tar.xz PROGRAM... [MODULE]
# The module: MODULE when one of the arguments is a pipenet-cuda.so, else the one
# beside a PROGRAM or in the folder above it (tests/test_cuda: the build tree's top).
# There: tar xf OUT.tar.xz && gpu/run PROGRAM ARGS... (gpu/run sets the library path:
# the bundle, then CUDA's lib64 and the CUDA wheels' lib folder, whichever exist,
# then the first folder that holds libnccl: PyTorch's NCCL wheel (nvidia/nccl/lib)
# or the system's; and PIPENET_CUDA_MODULE to the bundle's module), or gpu/PROGRAM
# ARGS..., a wrapper doing the same, which the test scripts take as
# PIPENET=gpu/pipenet. scripts/gpu_checks.sh runs the checks from such a bundle.
set -eu
[ $# -ge 2 ] || { echo "usage: $0 OUT.tar.xz PROGRAM... [MODULE]" >&2; exit 2; }
out=$1; shift
module=
for p in "$@"; do
    [ "$(basename "$p")" = pipenet-cuda.so ] && module=$p
done
for p in "$@"; do
    for m in "$(dirname "$p")/pipenet-cuda.so" "$(dirname "$p")/../pipenet-cuda.so"; do
        [ -n "$module" ] || [ ! -f "$m" ] || module=$m
    done
done
[ -n "$module" ] || { echo "$0: no pipenet-cuda.so beside the programs: build with CUDA" \
    "(./configure found none?), or name the module" >&2; exit 2; }
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/gpu/bin" "$stage/gpu/lib"

skip='^(libc|libm|libdl|libpthread|librt|ld-linux-x86-64|libcuda|libcudart|libcublas|libcublasLt|libnccl)\.so'
take_libs() { # copies the libraries of each file given (not already taken)
    for f in "$@"; do
        ldd "$f" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | while read -r lib; do
            name=$(basename "$lib")
            echo "$name" | grep -Eq "$skip" && continue
            [ -e "$stage/gpu/lib/$name" ] || cp -L "$lib" "$stage/gpu/lib/$name"
        done
    done
}

for p in "$@"; do
    [ "$(basename "$p")" = pipenet-cuda.so ] && continue
    cp "$p" "$stage/gpu/bin/"
    take_libs "$p"
done
# GNU time, for the tests that measure peak RSS (the GPU machine may have none)
[ -x /usr/bin/time ] && cp /usr/bin/time "$stage/gpu/bin/time"
cp "$module" "$stage/gpu/lib/pipenet-cuda.so"
take_libs "$module"
# Open MPI's run-time plugins (Debian's layout), found from the libmpi taken above
mpi_lib=
for p in "$@"; do
    [ -n "$mpi_lib" ] || mpi_lib=$(ldd "$p" | awk '$1 ~ /^libmpi\.so/ {print $3}')
done
if [ -n "$mpi_lib" ]; then
    plugins=
    for d in "$(dirname "$(readlink -f "$mpi_lib")")/openmpi3" \
             "$(dirname "$(readlink -f "$mpi_lib")")/openmpi/lib/openmpi3"; do
        [ -d "$d" ] && plugins=$d && break
    done
    if [ -n "$plugins" ]; then
        cp -r "$plugins" "$stage/gpu/lib/openmpi3"
        take_libs "$stage"/gpu/lib/openmpi3/*.so
    fi
    # mpirun (Open MPI's orterun), so that several ranks can start on the GPU machine
    # (one node: mpirun forks them, no orted), with Open MPI's help texts (messages)
    orterun=$(command -v orterun || true)
    if [ -n "$orterun" ]; then
        cp "$(readlink -f "$orterun")" "$stage/gpu/bin/mpirun"
        take_libs "$stage/gpu/bin/mpirun"
        [ -d /usr/share/openmpi ] && mkdir -p "$stage/gpu/share" && cp -r /usr/share/openmpi "$stage/gpu/share/"
    fi
fi

cat >"$stage/gpu/run" <<'RUN'
#!/bin/sh
# Runs a program of this bundle with its libraries (see scripts/gpu_bundle.sh).
here=$(cd "$(dirname "$0")" && pwd)
p=$1; shift
path=$here/lib
for d in /usr/local/cuda/lib64 /opt/torch/.venv/lib/python3*/site-packages/nvidia/cu13/lib; do
    [ -d "$d" ] && path=$path:$d
done
# NCCL (the CUDA module links libnccl where the build has it; the CUDA folders may hold
# it): the first of PyTorch's NCCL wheel and the system's folders that holds it
for d in /opt/torch/.venv/lib/python3*/site-packages/nvidia/nccl/lib \
         /usr/local/lib/python3*/dist-packages/nvidia/nccl/lib \
         /usr/lib/python3/dist-packages/nvidia/nccl/lib /usr/lib/x86_64-linux-gnu; do
    ls "$d"/libnccl.so* >/dev/null 2>&1 && path=$path:$d && break
done
export LD_LIBRARY_PATH=$path${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# the CUDA backend and the NCCL transport, opened when a GPU is asked for
export PIPENET_CUDA_MODULE=$here/lib/pipenet-cuda.so
# Open MPI: its plugins from the bundle, and a singleton MPI_Init that starts no
# orted daemon (which the bundle lacks); pipenet train runs as one process there
export OMPI_MCA_mca_component_path=$here/lib/openmpi3
export OMPI_MCA_ess_singleton_isolated=1
exec "$here/bin/$(basename "$p")" "$@"
RUN
chmod +x "$stage/gpu/run"
if [ -x "$stage/gpu/bin/mpirun" ]; then
    cat >"$stage/gpu/mpirun" <<'MPIRUN'
#!/bin/sh
# mpirun from this bundle (see scripts/gpu_bundle.sh): its libraries, Open MPI's
# plugins and help texts from here; the transports of Debian's
# openmpi-mca-params.conf (shared memory and TCP, no UCX or OFI), which the GPU
# machine lacks. PMIx (linked into the bundle's libpmix) takes its plugins from the
# folder it was built for only, which on the GPU machine may hold another PMIx's:
# its one Debian plugin, zlib compression, is left out (every rank printed that it
# could not load the machine's), and the warning that no compression is left with
# it. Start the bundle's programs with it: gpu/mpirun -np 2 gpu/pipenet ...
here=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH=$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export OPAL_PKGDATADIR=$here/share/openmpi
export OMPI_MCA_mca_component_path=$here/lib/openmpi3
export PMIX_MCA_pcompress=^zlib PMIX_MCA_pcompress_base_silence_warning=1
export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader,tcp OMPI_MCA_mtl=^ofi OMPI_MCA_osc=^ucx,pt2pt
export OMPI_MCA_btl_base_warn_component_unused=0
exec "$here/bin/mpirun" "$@"
MPIRUN
    chmod +x "$stage/gpu/mpirun"
fi
for p in "$@"; do # gpu/NAME: one command, for scripts that take a program's path
    name=$(basename "$p")
    [ "$name" = pipenet-cuda.so ] && continue
    printf '#!/bin/sh\nexec "$(dirname "$0")/run" %s "$@"\n' "$name" >"$stage/gpu/$name"
    chmod +x "$stage/gpu/$name"
done
tar -C "$stage" -cJf "$out" gpu
echo "$out: $(du -h "$out" | cut -f1), $(ls "$stage/gpu/lib" | wc -l) libraries (the CUDA module" \
    "$module among them) for $*"

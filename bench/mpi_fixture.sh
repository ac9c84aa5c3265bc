# Sourced by the benches that launch pipenet under mpirun, after their options are
# read (PIPENET, OUT): bench_mpi NAME [peak-rss] skips (77) without mpirun (or, with
# peak-rss, without GNU time for the ranks' peak resident size), lets Open MPI run as
# root with one BLAS thread a rank, and sets MPIRUN, an absolute PIPENET and $out,
# the results folder (OUT, else a new one named after NAME).
bench_mpi() {
    command -v "${MPIRUN:-mpirun}" >/dev/null 2>&1 || { echo "SKIP: no mpirun"; exit 77; }
    if [ "${2:-}" = peak-rss ]; then
        [ -x /usr/bin/time ] || { echo "SKIP: no /usr/bin/time (GNU time, for the peak RSS)"; exit 77; }
    fi
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
    MPIRUN=${MPIRUN:-mpirun}
    PIPENET=$(cd "$(dirname "$PIPENET")" && pwd)/$(basename "$PIPENET")
    out=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/pn_$1.XXXXXX")}
    mkdir -p "$out" || exit 1
    out=$(cd "$out" && pwd)
}

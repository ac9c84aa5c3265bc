#!/bin/sh
# Runs `pipenet train` on this machine under Open MPI's mpirun.
#
#   jobs/mpirun.sh [-n RANKS] [-p STAGES] MODEL.json [pipenet train options...]
#
#   -n RANKS   MPI ranks, D x P (default 2)
#   -p STAGES  pipeline stages P, passed as --stages; RANKS must be a multiple of it
#              (default: not passed, so the model's "stage" attributes decide, else 1)
#
# Each rank gets OPENBLAS_NUM_THREADS = cores / RANKS (at least 1) unless the variable
# is already set. --oversubscribe is added when RANKS exceeds the cores, and
# --allow-run-as-root when run as root. Ranks are not bound to cores (--bind-to none):
# each runs its own BLAS threads.
#
# Environment:
#   PIPENET      the pipenet program (default: ./pipenet next to jobs/, else on PATH)
#   MPIRUN       the mpirun command (default: mpirun; MPIRUN="echo mpirun" prints only)
#   MPIRUN_ARGS  more mpirun options, split on spaces (e.g. "--report-bindings")
#
# Example: jobs/mpirun.sh -n 4 -p 2 models/fashion_mlp.json --steps 200
# Exit status: pipenet's (or mpirun's); 2 for a wrong command line.
set -u

prog=jobs/mpirun.sh
usage() {
    echo "usage: $prog [-n RANKS] [-p STAGES] MODEL.json [pipenet train options...]"
}
die_usage() {
    echo "$prog: $*" >&2
    usage >&2
    exit 2
}
is_count() { # a positive integer without sign or leading zero
    case $1 in '' | 0* | *[!0-9]*) return 1 ;; esac
    [ ${#1} -le 6 ]
}

ranks=2
stages=
while getopts ":n:p:h" opt; do
    case $opt in
    n) is_count "$OPTARG" || die_usage "-n: expected a positive number of ranks, got '$OPTARG'"
       ranks=$OPTARG ;;
    p) is_count "$OPTARG" || die_usage "-p: expected a positive number of stages, got '$OPTARG'"
       stages=$OPTARG ;;
    h) sed -n '2,21s/^# \{0,1\}//p' "$0"; exit 0 ;;
    :) die_usage "-$OPTARG needs a value" ;;
    *) [ "$OPTARG" != - ] || die_usage "pipenet train options (--...) go after MODEL.json"
       die_usage "unknown option -$OPTARG" ;;
    esac
done
shift $((OPTIND - 1))

[ $# -ge 1 ] || die_usage "missing MODEL.json"
model=$1
shift
case $model in -*) die_usage "expected MODEL.json before the train options, got '$model'" ;; esac
[ -f "$model" ] || die_usage "$model: no such model file"
if [ -n "$stages" ]; then
    [ $((ranks % stages)) -eq 0 ] ||
        die_usage "$ranks ranks cannot hold replicas of a $stages-stage pipeline: -n must be a multiple of -p"
    for a in "$@"; do
        case $a in --stages | --stages=*) die_usage "give the stages once: -p $stages and $a" ;; esac
    done
fi

# The program: $PIPENET, else the repository's build next to jobs/, else PATH.
here=$(cd "$(dirname "$0")" && pwd)
if [ -n "${PIPENET:-}" ]; then
    pipenet=$PIPENET
elif [ -x "$here/../pipenet" ]; then
    pipenet=$(cd "$here/.." && pwd)/pipenet
elif command -v pipenet >/dev/null 2>&1; then
    pipenet=$(command -v pipenet)
else
    echo "$prog: cannot find pipenet: build it (make) or set PIPENET=/path/to/pipenet" >&2
    exit 1
fi
command -v "$pipenet" >/dev/null 2>&1 || {
    echo "$prog: PIPENET=$pipenet: not an executable program" >&2
    exit 1
}
mpirun=${MPIRUN:-mpirun}

# Cores this process may use (nproc honours the affinity mask), then threads per rank.
cores=$(nproc 2>/dev/null || getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)
is_count "$cores" || cores=1
if [ -z "${OPENBLAS_NUM_THREADS:-}" ]; then
    threads=$((cores / ranks))
    [ "$threads" -ge 1 ] || threads=1
    OPENBLAS_NUM_THREADS=$threads
fi
export OPENBLAS_NUM_THREADS

# Open MPI counts physical cores as slots: with SMT, nproc counts hardware threads.
per_core=$(LC_ALL=C lscpu 2>/dev/null | sed -n 's/^Thread(s) per core: *\([0-9][0-9]*\).*/\1/p')
is_count "${per_core:-}" || per_core=1
slots=$((cores / per_core))
[ "$slots" -ge 1 ] || slots=1

# Build the command line back to front in "$@" (the train options are already there).
if [ -n "$stages" ]; then set -- "$@" --stages "$stages"; fi
set -- "$pipenet" train "$model" "$@"
# shellcheck disable=SC2086 # MPIRUN_ARGS is a list of options
set -- ${MPIRUN_ARGS:-} "$@"
set -- -np "$ranks" --bind-to none -x OPENBLAS_NUM_THREADS "$@"
if [ "$ranks" -gt "$slots" ]; then set -- --oversubscribe "$@"; fi
if [ "$(id -u)" -eq 0 ]; then set -- --allow-run-as-root "$@"; fi

# Print the command, quoting what needs it, then run it.
quote() {
    case $1 in
    '' | *[!A-Za-z0-9_./:=,+@%-]*) printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")" ;;
    *) printf '%s' "$1" ;;
    esac
}
{
    printf '+ OPENBLAS_NUM_THREADS=%s %s' "$OPENBLAS_NUM_THREADS" "$mpirun"
    for a in "$@"; do printf ' '; quote "$a"; done
    printf '\n'
} >&2
# shellcheck disable=SC2086 # MPIRUN may carry words (a path and options, or "echo mpirun")
exec $mpirun "$@"

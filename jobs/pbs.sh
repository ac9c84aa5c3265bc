#!/bin/bash
# pipenet training as a PBS Pro / OpenPBS (or Torque) job: one MPI rank per mpiproc,
# D x P = all of them (the lines of $PBS_NODEFILE). It resubmits itself until the
# training is finished (see "Wall time" and "Resubmission" below).
#
#   qsub jobs/pbs.sh
#   qsub -v STAGES=4,MODEL=models/my.json jobs/pbs.sh
#   qsub -l select=4:ncpus=32:mpiprocs=8:ompthreads=4 -v "TRAIN_ARGS=--steps 1000" jobs/pbs.sh
#
# Environment (set with qsub -v NAME=VALUE,...):
#   MODEL       model file, relative to the submit directory [models/fashion_mlp.json]
#   STAGES      pipeline stages P; the rank count must be a multiple of it [2]
#   TRAIN_ARGS  more `pipenet train` options, split on spaces (e.g. "--steps 1000")
#   PIPENET     the program [./pipenet in the submit directory, else pipenet on PATH]
#   MPIRUN      the launcher [mpirun]; MPIRUN="echo mpirun" prints only
#   SNAPSHOT_DIR  snapshots, resumed from when present [snapshots/<job name>]. A
#               --snapshot-dir DIR in TRAIN_ARGS or the arguments sets it as well; given
#               both ways, the two must name the same directory, else the job stops (2)
#   STOP_BEFORE seconds before the wall time to stop with a snapshot [300]
#   GRACE       seconds mpirun gives the ranks between SIGTERM and SIGKILL, so that a
#               snapshot in progress completes [15]
#   RESUBMIT    resubmissions left [20]; 0: none
#   QSUB_ARGS   more qsub options for every resubmission (e.g. "-q long"), split on
#               spaces; a resource or option they give replaces the one carried over
# STAGES, STOP_BEFORE, GRACE and RESUBMIT are decimal numbers (08 is 8, not octal);
# anything else stops the job (2) before it starts anything. Arguments after the
# script go to `pipenet train` (PBS Pro: qsub [options] -- /path/to/jobs/pbs.sh ARGS;
# Torque: qsub -F "ARGS" jobs/pbs.sh).
# Torque has no select: there, use "#PBS -l nodes=1:ppn=8" and set OMP_NUM_THREADS.
#
# Wall time: PBS sends no signal ahead of it, so a timer sends SIGUSR1 to mpirun (which
# forwards it to every rank) STOP_BEFORE seconds before the limit, read from
# `qstat -f` (PBS Pro, OpenPBS) or $PBS_WALLTIME (Torque). pipenet finishes its step,
# writes a snapshot and exits 3; the script then submits itself again, and the new
# job resumes with --resume auto. Instead of resubmitting (RESUBMIT=0) a chain can be
# queued at once: `qsub -W depend=afterany:<previous job id> jobs/pbs.sh`.
#
# Resubmission: every job of the chain runs as the first one did. The next job asks
# for this one's request as `qstat -f` shows it (-l select, place and walltime, or
# Torque's nodes; -N the job name; -A the account), whether it came from the first
# qsub's command line or the #PBS lines below, less what QSUB_ARGS gives, then
# QSUB_ARGS. It gets every setting above, SNAPSHOT_DIR as used and the arguments
# through -v, percent-encoded where qsub -v would cut or strip them (% , ' " \ and
# white space), with PIPENET_CHAIN=N (the job's place in the chain) and PIPENET_ARGV
# (the arguments). Not carried: the queue and other -v variables (put them in
# QSUB_ARGS, or in this script).
# Exit statuses: 0 finished, 3 stopped (and resubmitted, unless SIGTERM stopped it:
# qdel), 4 stopped with nothing saved (not resubmitted; pipenet's own, for a run
# without a snapshot directory, which this script always gives), 1 an error, 2 a
# wrong setting.
#
#PBS -N pipenet
#PBS -l select=1:ncpus=8:mpiprocs=2:ompthreads=4
#PBS -l walltime=01:00:00
#PBS -j oe
set -u

# module load openmpi openblas hdf5   # as your site needs

# pct VALUE: VALUE with what qsub -v cuts at or strips (, ' ") and what a list of
# words splits at percent-encoded; unpct VAR: VAR decoded again
pct() {
    local s=$1
    s=${s//"%"/%25}; s=${s//","/%2C}; s=${s//"'"/%27}; s=${s//'"'/%22}; s=${s//"\\"/%5C}
    s=${s//" "/%20}; s=${s//$'\t'/%09}; s=${s//$'\n'/%0A}
    printf '%s' "$s"
}
unpct() {
    local s=${!1}
    s=${s//"%0A"/$'\n'}; s=${s//"%09"/$'\t'}; s=${s//"%20"/ }; s=${s//"%5C"/\\}
    s=${s//"%22"/\"}; s=${s//"%27"/\'}; s=${s//"%2C"/,}; s=${s//"%25"/%}
    printf -v "$1" '%s' "$s"
}
# A job that an earlier one submitted: its settings and arguments as that one had them
if [ -n "${PIPENET_CHAIN:-}" ]; then
    for v in MODEL SNAPSHOT_DIR TRAIN_ARGS PIPENET MPIRUN QSUB_ARGS; do
        [ -z "${!v+set}" ] || unpct "$v"
    done
    read -r -a words <<<"${PIPENET_ARGV:-}"
    set --
    for a in ${words[@]+"${words[@]}"}; do
        unpct a
        set -- "$@" "$a"
    done
fi

cd "${PBS_O_WORKDIR:-.}" || exit 1
nodefile=${PBS_NODEFILE:?not inside a PBS job: submit with qsub}
model=${MODEL:-models/fashion_mlp.json}
ranks=$(wc -l <"$nodefile")

# number NAME VALUE WHAT: VALUE's digits as a decimal number (bash's arithmetic takes
# a leading 0 for octal: 08 an error, 0300 192), else a message and status 2
number() {
    local digits=${2#"${2%%[!0]*}"} # without leading zeros
    case $2 in
    '' | *[!0-9]*) echo "pbs.sh: $1: expected $3 (decimal digits), got '$2'" >&2; return 2 ;;
    esac
    [ ${#digits} -le 9 ] || { echo "pbs.sh: $1: '$2' is too large" >&2; return 2; }
    echo $((10#${digits:-0}))
}
stages=$(number STAGES "${STAGES:-2}" "a number of stages") || exit 2
stop_before=$(number STOP_BEFORE "${STOP_BEFORE:-300}" "a number of seconds") || exit 2
grace=$(number GRACE "${GRACE:-15}" "a number of seconds") || exit 2
resubmit=$(number RESUBMIT "${RESUBMIT:-20}" "a number of resubmissions") || exit 2
if [ "$stages" -eq 0 ]; then
    echo "pbs.sh: STAGES: expected a positive number, got '$STAGES'" >&2
    exit 2
fi
if [ "$ranks" -lt 1 ] || [ $((ranks % stages)) -ne 0 ]; then
    echo "pbs.sh: $ranks ranks cannot hold replicas of a $stages-stage pipeline:" \
         "the mpiprocs in all must be a multiple of STAGES" >&2
    exit 2
fi
[ -f "$model" ] || { echo "pbs.sh: $model: no such model file" >&2; exit 2; }

# The snapshot directory is the one pipenet writes to: the last --snapshot-dir among
# its options (getopt_long also takes it shortened to --snapshot-d), else SNAPSHOT_DIR.
# same_dir A B: A and B are written the same, but for trailing slashes
same_dir() { [ "${1%"${1##*[!/]}"}" = "${2%"${2##*[!/]}"}" ]; }
# shellcheck disable=SC2206 # TRAIN_ARGS is a list of words
train_args=(${TRAIN_ARGS:-})
snapdir_opt="" next=""
for a in ${train_args[@]+"${train_args[@]}"} "$@"; do
    if [ -n "$next" ]; then snapdir_opt=$a next=""; continue; fi
    case $a in
    --) break ;;
    --snapshot-d | --snapshot-di | --snapshot-dir) next=yes ;;
    --snapshot-d=* | --snapshot-di=* | --snapshot-dir=*) snapdir_opt=${a#*=} ;;
    esac
done
if [ -z "$snapdir_opt" ]; then
    snapdir=${SNAPSHOT_DIR:-snapshots/${PBS_JOBNAME:-pipenet}}
elif [ -z "${SNAPSHOT_DIR:-}" ] || same_dir "$SNAPSHOT_DIR" "$snapdir_opt"; then
    snapdir=$snapdir_opt
else
    echo "pbs.sh: SNAPSHOT_DIR=$SNAPSHOT_DIR and --snapshot-dir $snapdir_opt (in the" \
         "training options) are two snapshot directories: give one (resuming needs the one" \
         "pipenet writes)" >&2
    exit 2
fi

# BLAS threads per rank: PBS sets OMP_NUM_THREADS from ompthreads; else ncpus divided
# by the ranks on this node (a node's name appears once per mpiproc in the node file).
if [ -n "${OMP_NUM_THREADS:-}" ]; then
    threads=$OMP_NUM_THREADS
else
    here=$(head -n 1 "$nodefile")
    per_node=$(grep -c -x -F "$here" "$nodefile")
    threads=$(( ${NCPUS:-$per_node} / per_node ))
    [ "$threads" -ge 1 ] || threads=1
fi
export OPENBLAS_NUM_THREADS=$threads

# This job's attributes (qstat -f, PBS Pro, OpenPBS and Torque; a long value goes on in
# lines that start with a tab): its wall time, and its request for the next job.
qstat_f=""
if command -v qstat >/dev/null 2>&1; then
    qstat_f=$(qstat -f "${PBS_JOBID:-none}" 2>/dev/null |
        awk '/^\t/ { line = line substr($0, 2); next } { if (n++) print line; line = $0 }
             END { if (n) print line }')
fi
attr() { printf '%s\n' "$qstat_f" | sed -n "s/^[[:space:]]*${1//./\\.} = //p" | head -n 1; }

# The wall time in seconds: qstat, else Torque's $PBS_WALLTIME.
walltime=""
hms=$(attr Resource_List.walltime)
[ -n "$hms" ] && walltime=$(echo "$hms" | awk -F: '{ print $1 * 3600 + $2 * 60 + $3 }')
[ -n "$walltime" ] || walltime=${PBS_WALLTIME:-}
if [ -z "$walltime" ]; then
    echo "pbs.sh: warning: no wall time known (no qstat answer, no PBS_WALLTIME): no stop" \
         "signal will be sent before it; the run keeps its periodic snapshots only" >&2
elif [ "$walltime" -le "$stop_before" ]; then
    echo "pbs.sh: a wall time of $walltime s leaves no time to train before the stop" \
         "signal STOP_BEFORE=$stop_before s ahead of it: ask for more time or lower STOP_BEFORE" >&2
    exit 2
fi

if [ -n "${PIPENET:-}" ]; then
    pipenet=$PIPENET
elif [ -x ./pipenet ]; then
    pipenet=$PWD/pipenet
else
    pipenet=pipenet
fi
mpirun=${MPIRUN:-mpirun}
mkdir -p "$snapdir" || { echo "pbs.sh: cannot create $snapdir" >&2; exit 1; }
opts=()
[ -n "$snapdir_opt" ] || opts=(--snapshot-dir "$snapdir") # else among the options
ls "$snapdir"/snapshot-*.h5 >/dev/null 2>&1 && opts+=(--resume auto)
args=("$@") # for the next job
# shellcheck disable=SC2086 # MPIRUN is a list of words
# The keepalive finds a node cut off (a link down, a frozen node) within 6-11 s while
# nothing is pending to it, and mpirun then ends the job; Open MPI's default (300 s,
# then 9 probes 20 s apart) would leave it hanging 8 minutes (docs/running.md, "What
# happens when a node is lost").
set -- $mpirun -np "$ranks" --hostfile "$nodefile" --bind-to none -x OPENBLAS_NUM_THREADS \
    --mca odls_base_sigkill_timeout "$grace" --mca oob_tcp_keepalive_time 5 \
    --mca oob_tcp_keepalive_intvl 2 --mca oob_tcp_keepalive_probes 3 "$pipenet" train "$model" --stages "$stages" \
    ${opts[@]+"${opts[@]}"} ${train_args[@]+"${train_args[@]}"} "$@"

echo "pipenet: job ${PBS_JOBID:-?}${PIPENET_CHAIN:+ (job $PIPENET_CHAIN of a chain)}: $ranks" \
     "ranks = $((ranks / stages)) replica(s) x $stages stage(s), $threads BLAS thread(s)" \
     "per rank, wall time ${walltime:-unknown} s"
echo "+ $*"
# qdel's TERM reaches every process of the job from PBS: this shell stays to report
# (passing it on would be mpirun's second TERM, which kills at once)
cancelled="" traps=0 launcher=""
trap 'cancelled=yes traps=$((traps + 1))' TERM
"$@" &
launcher=$!
timer=""
if [ -n "$walltime" ]; then
    (sleep $((walltime - stop_before)) && kill -USR1 "$launcher") 2>/dev/null &
    timer=$!
fi
# The launcher's status. A trapped signal ends `wait` early (128 + its number): wait
# again, also when the launcher has ended since (bash keeps its status for that wait;
# in POSIX mode only until one wait has reported it: 127 then means the last one did).
status=""
while :; do
    seen=$traps
    wait "$launcher"
    rc=$?
    if [ "$rc" -eq 127 ] && [ -n "$status" ]; then break; fi
    status=$rc
    if [ "$traps" -eq "$seen" ] || [ "$rc" -le 128 ]; then break; fi
done
# a run that ends first leaves no timer behind: its sleep, then the timer itself
[ -n "$timer" ] && { pkill -P "$timer" 2>/dev/null; kill "$timer" 2>/dev/null; }

case $status in
0) echo "pipenet: finished" ;;
3)
    if [ -n "$cancelled" ]; then
        echo "pipenet: stopped (SIGTERM: qdel, or the wall time itself) with a snapshot in" \
             "$snapdir: not resubmitted; submit again to resume"
    elif [ "$resubmit" -gt 0 ]; then
        # what this job was given (see "Resubmission"), less what QSUB_ARGS gives
        request=()
        for r in select place walltime nodes; do
            v=$(attr "Resource_List.$r")
            [ -n "$v" ] || continue
            # PBS Pro turns an old-style nodes request into a select: one of them
            [ "$r" = nodes ] && [ -n "$(attr Resource_List.select)" ] && continue
            case " ${QSUB_ARGS:-}" in *"$r="*) continue ;; esac
            request+=(-l "$r=$v")
        done
        acct=$(attr Account_Name)
        case " ${QSUB_ARGS:-}" in
        *" -N"*) ;;
        *) [ -z "${PBS_JOBNAME:-}" ] || request+=(-N "$PBS_JOBNAME") ;;
        esac
        case " ${QSUB_ARGS:-}" in *" -A"*) ;; *) [ -z "$acct" ] || request+=(-A "$acct") ;; esac
        vars="PIPENET_CHAIN=$((${PIPENET_CHAIN:-1} + 1)),STAGES=$stages"
        vars+=",STOP_BEFORE=$stop_before,GRACE=$grace,RESUBMIT=$((resubmit - 1))"
        for v in MODEL:"$model" SNAPSHOT_DIR:"$snapdir" TRAIN_ARGS:"${TRAIN_ARGS:-}" \
            PIPENET:"${PIPENET:-}" MPIRUN:"${MPIRUN:-}" QSUB_ARGS:"${QSUB_ARGS:-}"; do
            vars+=",${v%%:*}=$(pct "${v#*:}")"
        done
        argv="" # the arguments, encoded, between spaces (an empty one, which pipenet
        for a in ${args[@]+"${args[@]}"}; do # refuses, is not carried)
            argv+="${argv:+ }$(pct "$a")"
        done
        vars+=",PIPENET_ARGV=$argv"
        # shellcheck disable=SC2086 # QSUB_ARGS is a list of options
        next=$(qsub ${request[@]+"${request[@]}"} ${QSUB_ARGS:-} -v "$vars" \
               "${PBS_O_WORKDIR:-.}/jobs/pbs.sh") &&
            echo "pipenet: stopped with a snapshot before the wall time: resubmitted as $next" ||
            echo "pbs.sh: qsub failed: submit again to resume" >&2
    else
        echo "pipenet: stopped with a snapshot in $snapdir: submit again to resume"
    fi ;;
4) # pipenet was stopped with nothing saved: nothing to resume from, so no new job
    echo "pipenet: stopped by a signal with nothing saved (exit 4): not resubmitted" >&2 ;;
*)
    if [ -n "$cancelled" ]; then # mpirun reports its own SIGTERM as a failure
        echo "pipenet: cancelled (SIGTERM), exit status $status; snapshots in $snapdir"
    else
        echo "pipenet: failed with exit status $status" >&2
    fi ;;
esac
exit "$status"

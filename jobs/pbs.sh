#!/bin/bash
# pipenet training as a PBS Pro / OpenPBS job: one MPI rank per mpiproc,
# D x P = all of them (the lines of $PBS_NODEFILE).
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
#   SNAPSHOT_DIR  snapshots, resumed from when present [snapshots/<job name>]
#   STOP_BEFORE seconds before the wall time to stop with a snapshot [300]
# Torque has no select: there, use "#PBS -l nodes=1:ppn=8" and set OMP_NUM_THREADS.
#
#PBS -N pipenet
#PBS -l select=1:ncpus=8:mpiprocs=2:ompthreads=4
#PBS -l walltime=01:00:00
#PBS -j oe
set -eu

# module load openmpi openblas hdf5   # as your site needs

cd "${PBS_O_WORKDIR:-.}"
nodefile=${PBS_NODEFILE:?not inside a PBS job: submit with qsub}
model=${MODEL:-models/fashion_mlp.json}
stages=${STAGES:-2}
ranks=$(wc -l <"$nodefile")

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

case $stages in '' | 0* | *[!0-9]*)
    echo "pbs.sh: STAGES: expected a positive number, got '$stages'" >&2; exit 2 ;;
esac
if [ "$ranks" -lt 1 ] || [ $((ranks % stages)) -ne 0 ]; then
    echo "pbs.sh: $ranks ranks cannot hold replicas of a $stages-stage pipeline:" \
         "the mpiprocs in all must be a multiple of STAGES" >&2
    exit 2
fi
[ -f "$model" ] || { echo "pbs.sh: $model: no such model file" >&2; exit 2; }

if [ -n "${PIPENET:-}" ]; then
    pipenet=$PIPENET
elif [ -x ./pipenet ]; then
    pipenet=$PWD/pipenet
else
    pipenet=pipenet
fi
mpirun=${MPIRUN:-mpirun}

echo "pipenet: job ${PBS_JOBID:-?}: $ranks ranks = $((ranks / stages)) replica(s) x" \
     "$stages stage(s), $threads BLAS thread(s) per rank"
echo "+ $mpirun -np $ranks --hostfile $nodefile --bind-to none -x OPENBLAS_NUM_THREADS" \
     "$pipenet train $model --stages $stages ${TRAIN_ARGS:-} $*"
# Snapshots, resumed from when present; PBS has no signal ahead of the wall time, so
# a timer sends SIGUSR1 to mpirun (which forwards it to every rank) STOP_BEFORE
# seconds before the limit: pipenet finishes the step, writes a snapshot, exits 0.
snapdir=${SNAPSHOT_DIR:-snapshots/${PBS_JOBNAME:-pipenet}}
resume=""
ls "$snapdir"/snapshot-*.h5 >/dev/null 2>&1 && resume="--resume auto"
# shellcheck disable=SC2086 # MPIRUN, resume and TRAIN_ARGS are lists of words
$mpirun -np "$ranks" --hostfile "$nodefile" --bind-to none -x OPENBLAS_NUM_THREADS \
    "$pipenet" train "$model" --stages "$stages" --snapshot-dir "$snapdir" $resume \
    ${TRAIN_ARGS:-} "$@" &
job=$!
walltime=$(qstat -f "${PBS_JOBID:-none}" 2>/dev/null | sed -n 's/.*Resource_List.walltime = //p')
if [ -n "$walltime" ]; then
    limit=$(echo "$walltime" | awk -F: '{ print $1 * 3600 + $2 * 60 + $3 }')
    (sleep $((limit - ${STOP_BEFORE:-300})) && kill -USR1 "$job") 2>/dev/null &
fi
wait "$job"

#!/bin/sh
# The cluster scripts under a faked scheduler environment (skips, 77, without the
# Debian Fashion-MNIST package), with mpirun as the launcher:
#  - jobs/slurm.sbatch: SIGUSR1 to the batch shell (what --signal=B:USR1@LEAD sends)
#    reaches pipenet, which stops with a snapshot (exit 3); the script requeues the job
#    (a fake scontrol records it); the requeued start resumes and finishes (exit 0);
#  - jobs/pbs.sh: the wall-time timer from $PBS_WALLTIME (no qstat) stops the run
#    with a snapshot; the script resubmits itself (a fake qsub records it); a run that
#    ends first leaves no timer behind; a wall time within STOP_BEFORE is refused.
set -u
PIPENET=${PIPENET:-./pipenet}
SRC=/usr/share/datasets/fashion-mnist
[ -d "$SRC" ] || { echo "SKIP: $SRC not installed (dataset-fashion-mnist)"; exit 77; }
here=$(cd "$(dirname "$0")/.." && pwd)
PIPENET=$(cd "$(dirname "$PIPENET")" && pwd)/$(basename "$PIPENET")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
"$PIPENET" import fashion-mnist --src "$SRC" --out "$tmp/fm" >/dev/null || fail "import"

# fake scheduler commands that record their arguments
mkdir "$tmp/bin"
for cmd in scontrol qsub; do
    printf '#!/bin/sh\necho "$@" >>"%s/%s.calls"\necho 1234.fake\n' "$tmp" "$cmd" >"$tmp/bin/$cmd"
    chmod +x "$tmp/bin/$cmd"
done
export PATH="$tmp/bin:$PATH" MODEL="$here/models/fashion_mlp.json" PIPENET GRACE=1 # mpirun waits 2 GRACE after a non-zero exit
train_args="--data $tmp/fm/train.h5 --eval $tmp/fm/test.h5 --batch 64 --threads 1 --log-every 1000"
cd "$tmp" || fail "cd $tmp"

# wait_for FILE PATTERN PID: until FILE has a line matching PATTERN (at most 120 s,
# and while PID runs)
wait_for() {
    for _ in $(seq 1 2400); do
        grep -q "$2" "$1" 2>/dev/null && return 0
        kill -0 "$3" 2>/dev/null || break
        sleep 0.05
    done
    cat "$1"
    fail "no '$2' in $1"
}

# --- Slurm ---------------------------------------------------------------------------
slurm() { # slurm NAME RESTARTS [train options]: becomes the batch script (call it in a
    name=$1 restarts=$2; shift 2 # subshell or in the background: the pid is bash's)
    exec env SLURM_NTASKS=2 SLURM_CPUS_PER_TASK=1 SLURM_JOB_ID=77 SLURM_JOB_NAME=pipenet \
        SLURM_SUBMIT_DIR=$tmp SLURM_RESTART_COUNT=$restarts SRUN="mpirun --oversubscribe" \
        bash "$here/jobs/slurm.sbatch" $train_args "$@" >"$tmp/$name.out" 2>&1
}
slurm slurm1 0 --steps 100000 &
pid=$!
wait_for "$tmp/slurm1.out" "^layout:" $pid
sleep 1
kill -USR1 $pid
wait $pid
rc=$?
[ $rc -eq 3 ] || { cat "$tmp/slurm1.out"; fail "slurm: exit $rc after SIGUSR1, expected 3"; }
grep -q "^+ mpirun --oversubscribe -np 2 .* --snapshot-dir snapshots/pipenet" "$tmp/slurm1.out" ||
    { cat "$tmp/slurm1.out"; fail "slurm: the printed command lacks the real options"; }
[ "$(cat "$tmp/scontrol.calls" 2>/dev/null)" = "requeue 77" ] || fail "slurm: no requeue"
stopped=$(grep -o 'stopping at step [0-9]*' "$tmp/slurm1.out" | cut -d' ' -f4)
[ -n "$stopped" ] || { cat "$tmp/slurm1.out"; fail "slurm: no stop message"; }
(slurm slurm2 1 --steps $((stopped + 2)))
rc=$?
[ $rc -eq 0 ] || { cat "$tmp/slurm2.out"; fail "slurm: the requeued start exited $rc"; }
grep -q -- "--resume auto" "$tmp/slurm2.out" && grep -q "resuming from .*snapshot-.*: step $stopped" \
    "$tmp/slurm2.out" || { cat "$tmp/slurm2.out"; fail "slurm: the requeued start did not resume"; }
echo "ok: slurm.sbatch: SIGUSR1 to the batch shell -> snapshot at step $stopped, exit 3, requeue; the requeued job resumed and finished"

# --- PBS -----------------------------------------------------------------------------
printf 'localhost\nlocalhost\n' >"$tmp/nodes"
pbs() { # pbs NAME WALLTIME [train options]
    name=$1 walltime=$2; shift 2
    PBS_NODEFILE=$tmp/nodes PBS_JOBID=9.fake PBS_JOBNAME=pbsrun PBS_O_WORKDIR=$tmp \
        PBS_WALLTIME=$walltime STOP_BEFORE=6 MPIRUN="mpirun --oversubscribe" \
        OMP_NUM_THREADS=1 bash "$here/jobs/pbs.sh" $train_args "$@" >"$tmp/$name.out" 2>&1
}
mkdir -p "$tmp/jobs" && cp "$here/jobs/pbs.sh" "$tmp/jobs/" # what the resubmission names
pbs pbs1 12 --steps 100000
rc=$?
[ $rc -eq 3 ] || { cat "$tmp/pbs1.out"; fail "pbs: exit $rc at the wall-time timer, expected 3"; }
grep -q "stopping .*on SIGUSR1" "$tmp/pbs1.out" || { cat "$tmp/pbs1.out"; fail "pbs: no stop"; }
grep -q "RESUBMIT=19" "$tmp/qsub.calls" 2>/dev/null || fail "pbs: not resubmitted"
pbs pbs2 400 --steps 2
rc=$?
[ $rc -eq 0 ] || { cat "$tmp/pbs2.out"; fail "pbs: a short run exited $rc"; }
sleep 0.5
pgrep -f "sleep 394" >/dev/null && fail "pbs: the timer outlived the run"
pbs pbs3 5 --steps 2
rc=$?
[ $rc -eq 2 ] && grep -q "leaves no time to train" "$tmp/pbs3.out" ||
    { cat "$tmp/pbs3.out"; fail "pbs: a wall time within STOP_BEFORE was not refused"; }
echo "ok: pbs.sh: timer from PBS_WALLTIME -> snapshot, exit 3, resubmitted; no timer left behind; a too short wall time refused"
echo "PASS: jobs"

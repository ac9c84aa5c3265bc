#!/bin/bash
# jobs/slurm.sbatch under a real one-node Slurm (munged, slurmctld and slurmd from
# Debian's munge and slurm-wlm, started here on private ports with a private config),
# with mpirun as the launcher and a one-minute time limit:
#  - Slurm's --signal=B:USR1@LEAD reaches pipenet through the batch shell and mpirun;
#    pipenet stops with a snapshot and exit 3, and the script requeues the job;
#  - the requeued job resumes with --resume auto from the --snapshot-dir given among
#    the script's arguments (not the script's default directory) and finishes
#    (COMPLETED, exit 0);
#  - its parameter hash equals that of an uninterrupted run of as many steps.
# Skips (77) unless root with the packages installed and the daemons able to start.
# Every daemon, and every process of the jobs, is stopped at the end, whatever happens.
set -u
. "$(dirname "$0")/script_fixture.sh"
SRC=/usr/share/datasets/fashion-mnist
# Slurm sends the signal at its first check (every 30 s) within LEAD + 30 s of the
# end: 10-40 s into a one-minute job
LEAD=20
AFTER=20 # steps that a resumed start trains (see pipenet-steps below)
export PATH="$PATH:/usr/sbin:/sbin"
skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" -eq 0 ] || skip "needs root (slurmd runs the jobs as their users)"
for cmd in munged mungekey slurmctld slurmd sbatch scontrol squeue sinfo scancel mpirun; do
    command -v $cmd >/dev/null || skip "no $cmd (Debian packages slurm-wlm and munge)"
done
[ -d "$SRC" ] || skip "$SRC not installed (dataset-fashion-mnist)"
here=$(cd "$(dirname "$0")/.." && pwd)
PIPENET=$(cd "$(dirname "$PIPENET")" && pwd)/$(basename "$PIPENET")
# an enclosing Slurm job's variables would steer sbatch and the script
unset $(env | sed -n 's/^\(SLURM_[A-Za-z0-9_]*\)=.*/\1/p')
chmod 755 "$tmp" # munged wants every directory above its socket searchable by all

# --- the cluster -------------------------------------------------------------------
# Daemons and jobs carry PIPENET_SLURM_TEST=$tmp in their environment (this shell
# does not), so that the clean-up finds whatever of them survives.
pids=""
cleanup() {
    if [ -n "$pids" ]; then
        scancel --user=root 2>/dev/null
        for _ in $(seq 1 60); do # KillWait is 5 s
            [ -z "$(squeue -h 2>/dev/null)" ] && break
            sleep 0.5
        done
        kill $pids 2>/dev/null
        for p in $pids; do
            for _ in $(seq 1 80); do kill -0 $p 2>/dev/null || break; sleep 0.25; done
        done
    fi
    for p in /proc/[0-9]*; do
        { tr '\0' '\n' <"$p/environ"; } 2>/dev/null | grep -qxF "PIPENET_SLURM_TEST=$tmp" &&
            kill -9 "${p#/proc/}" 2>/dev/null
    done
    [ -n "${KEEP_TMP:-}" ] || rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

free_port() { # two free TCP ports, N and N+1, on localhost
    for _ in $(seq 1 50); do
        p=$((20000 + RANDOM % 40000))
        (: <>/dev/tcp/127.0.0.1/$p) 2>/dev/null || (: <>/dev/tcp/127.0.0.1/$((p + 1))) 2>/dev/null ||
            { echo $p; return; }
    done
    echo 0
}
port=$(free_port)
[ "$port" -ne 0 ] || skip "no free port for slurmctld"
node=$(uname -n)
node=${node%%.*}
cpus=$(nproc)
[ "$cpus" -ge 2 ] || cpus=2 # two ranks; config_overrides lets slurmd accept it
mkdir -p "$tmp/state" "$tmp/spool" "$tmp/job"
cat >"$tmp/slurm.conf" <<EOF
ClusterName=pipenet-test
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
AuthType=auth/munge
CredType=cred/munge
# a requeued job waits cred_expire + 1 s (default 120) before it may start again
AuthInfo=socket=$tmp/munge.socket,cred_expire=5
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd.pid
SlurmctldLogFile=$tmp/slurmctld.log
SlurmdLogFile=$tmp/slurmd.log
SlurmdParameters=config_overrides
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/builtin
SchedulerParameters=sched_interval=2
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
KillWait=5
# the kill at the time limit comes a minute late: time for the stop, however loaded
OverTimeLimit=1
MinJobAge=600
NodeName=$node NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF=$tmp/slurm.conf
mungekey --create --keyfile="$tmp/munge.key" >/dev/null 2>&1 || skip "mungekey failed"
daemon() { # daemon NAME COMMAND...: in the background, its pid kept for the clean-up
    name=$1; shift
    PIPENET_SLURM_TEST=$tmp "$@" >"$tmp/$name.out" 2>&1 &
    pids="$pids $!"
    disown $! # no "Killed" notices from this shell
}
# wait_up TEST: until TEST succeeds, at most 60 s, while every daemon runs
wait_up() {
    until_s=$((SECONDS + 60))
    while [ $SECONDS -lt $until_s ]; do
        eval "$1" && return 0
        for p in $pids; do kill -0 $p 2>/dev/null || break 2; done
        sleep 0.5
    done
    tail -n 5 "$tmp"/*.out
    skip "the one-node Slurm did not come up ($1)"
}
daemon munged munged --foreground --socket="$tmp/munge.socket" --key-file="$tmp/munge.key" \
    --pid-file="$tmp/munged.pid" --log-file="$tmp/munged.log" --seed-file="$tmp/munged.seed"
wait_up '[ -S "$tmp/munge.socket" ]'
daemon slurmctld slurmctld -D -i
daemon slurmd slurmd -D -N "$node"
wait_up '[ "$(sinfo -h -o %T 2>/dev/null)" = idle ]'

# --- the job -----------------------------------------------------------------------
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
"$PIPENET" import fashion-mnist --src "$SRC" --out "$tmp/fm" >/dev/null || fail "import"
# a constant learning rate: a schedule would depend on --steps, which changes below
model=$tmp/mlp.json
cat >"$model" <<EOF
{
  "name": "mlp",
  "inputs": {"x": {"dataset": "features", "size": 784}, "y": {"dataset": "labels", "ids": true}},
  "layers": [
    {"name": "fc1", "type": "fc", "input": "x", "size": 256, "act": "relu"},
    {"name": "fc2", "type": "fc", "input": "fc1", "size": 256, "act": "relu"},
    {"name": "out", "type": "fc", "input": "fc2", "size": 10},
    {"name": "loss", "type": "softmax_xent", "input": ["out", "y"]}
  ],
  "train": {"batch": 128, "seed": 1, "optimizer": {"type": "adam", "lr": 0.001}}
}
EOF
train_args="--data $tmp/fm/train.h5 --eval $tmp/fm/test.h5 --threads 1 --log-every 5"
# The first start trains "for ever", so that only the signal ends it however fast the
# machine; a start that resumes trains AFTER steps past its snapshot and finishes.
snapdir=$tmp/job/ckpt # --snapshot-dir ckpt, an argument of the script
cat >"$tmp/pipenet-steps" <<EOF
#!/bin/sh
last=\$(ls "$snapdir" 2>/dev/null | sed -n 's/^snapshot-0*\([0-9][0-9]*\)\.h5$/\1/p' | sort -n | tail -n 1)
if [ -n "\$last" ]; then steps=\$((last + $AFTER)); else steps=1000000000; fi
exec "$PIPENET" "\$@" --steps \$steps
EOF
chmod +x "$tmp/pipenet-steps"
start=$SECONDS
cd "$tmp/job" || fail "cd $tmp/job"
job=$(PIPENET_SLURM_TEST=$tmp MODEL=$model PIPENET=$tmp/pipenet-steps \
    SRUN="mpirun --bind-to none" GRACE=1 TRAIN_ARGS="$train_args" \
    sbatch --parsable --ntasks-per-node=2 --cpus-per-task=1 --time=1 \
    --signal=B:USR1@$LEAD "$here/jobs/slurm.sbatch" --snapshot-dir ckpt) || fail "sbatch failed"
log=$tmp/job/pipenet-$job.out
state="" until_s=$((SECONDS + 600))
while [ $SECONDS -lt $until_s ]; do
    state=$(scontrol show job "$job" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
    # wait for an end: passing states (SIGNALING while the time-limit signal is delivered,
    # REQUEUED, COMPLETING, ...) are many and differ between Slurm versions
    case $state in
    COMPLETED | FAILED | TIMEOUT | CANCELLED | NODE_FAIL | OUT_OF_MEMORY | BOOT_FAIL | \
        DEADLINE | PREEMPTED) break ;;
    esac
    sleep 0.5
done
info=$(scontrol show job "$job")
[ "$state" = COMPLETED ] || { cat "$log"; echo "$info"; fail "job $state, expected COMPLETED"; }
echo "$info" | grep -q "ExitCode=0:0" || { cat "$log"; echo "$info"; fail "job exit code not 0"; }
restarts=$(echo "$info" | sed -n 's/.*Restarts=\([0-9]*\).*/\1/p')
[ "${restarts:-0}" -ge 1 ] || { cat "$log"; fail "the job was never requeued"; }

stopped=$(sed -n 's/^stopping at step \([0-9]*\) on SIGUSR1 after writing a snapshot$/\1/p' "$log" |
    tail -n 1)
[ -n "$stopped" ] || { cat "$log"; fail "no stop on SIGUSR1 with a snapshot"; }
grep -q "^pipenet: stopped with a snapshot before the time limit: requeueing job $job" "$log" ||
    { cat "$log"; fail "the script did not requeue after the stop (exit 3)"; }
grep -q "^+ mpirun .* --resume auto" "$log" &&
    grep -q "^resuming from ckpt/snapshot-0*$stopped.h5: step $stopped," "$log" ||
    { cat "$log"; fail "the requeued job did not resume from step $stopped in ckpt"; }
[ ! -e "$tmp/job/snapshots" ] ||
    { cat "$log"; fail "the script made its default snapshot directory beside --snapshot-dir ckpt"; }
[ "$(tail -n 1 "$log")" = "pipenet: finished" ] || { cat "$log"; fail "the last start did not finish"; }
final=$(sed -n 's/^parameter hash after \([0-9]* steps: [0-9a-f]*\)$/\1/p' "$log" | tail -n 1)
steps=${final%% *}
[ "$steps" = $((stopped + AFTER)) ] || { cat "$log"; fail "finished at '$final', expected step $((stopped + AFTER))"; }
slurm_s=$((SECONDS - start))

# the same steps without a stop: the same layout (2 ranks, 1 thread), the same bits
# (tagged like the jobs, so the clean-up finds its ranks if the test is stopped)
ref=$(PIPENET_SLURM_TEST=$tmp timeout 600 mpirun --oversubscribe -np 2 "$PIPENET" train "$model" \
    --stages 2 $train_args --steps "$steps" 2>&1) || { echo "$ref"; fail "the uninterrupted run failed"; }
expect=$(echo "$ref" | sed -n 's/^parameter hash after \([0-9]* steps: [0-9a-f]*\)$/\1/p')
[ "$final" = "$expect" ] ||
    fail "requeued job: parameter hash after $final; uninterrupted: $expect"
echo "ok: slurm.sbatch: B:USR1@$LEAD -> snapshot at step $stopped, exit 3, requeued" \
     "($restarts restart(s)); resumed and finished in ${slurm_s} s; hash after $final" \
     "as uninterrupted ($SECONDS s in all)"
echo "PASS: slurm"

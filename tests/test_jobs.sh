#!/bin/sh
# The cluster scripts under a faked scheduler. First with a stand-in launcher (no
# dataset needed): small shell scripts in place of qsub, qstat, scontrol and
# mpirun/srun record their arguments, and pbs_job below runs PBS jobs the way PBS
# would (a fresh environment, the -v variables, the ranks of the select):
#  - jobs/pbs.sh: every resubmission carries the user's QSUB_ARGS, settings and
#    arguments (commas, quotes, spaces and all), and the first job's request (select,
#    wall time, name, account) when it was given to the first qsub directly;
#  - both scripts: their numbers are decimal, a leading zero included (pbs.sh's
#    timer sleeps 4321 - 8 s for STOP_BEFORE=08); anything else is refused before
#    anything starts;
#  - both scripts: a --snapshot-dir among the training arguments is the directory
#    resumed from; one that contradicts SNAPSHOT_DIR is refused;
#  - both scripts: the launcher's exit status survives a launcher that ends between a
#    signal and the script's next look at it (a BASH_ENV shim widens that window);
#    pbs.sh does not resubmit a job that qdel's SIGTERM stopped.
# Then with pipenet and mpirun (skips, 77, without the Debian Fashion-MNIST package):
#  - jobs/slurm.sbatch: SIGUSR1 to the batch shell (what --signal=B:USR1@LEAD sends)
#    reaches pipenet, which stops with a snapshot (exit 3); the script requeues the job
#    (a fake scontrol records it); the requeued start resumes and finishes (exit 0);
#  - jobs/pbs.sh: the wall-time timer from $PBS_WALLTIME (no qstat) stops the run
#    with a snapshot; the script resubmits itself (a fake qsub records it); a run that
#    ends first leaves no timer behind; a wall time within STOP_BEFORE is refused.
set -u
. "$(dirname "$0")/script_fixture.sh"
SRC=/usr/share/datasets/fashion-mnist
here=$(cd "$(dirname "$0")/.." && pwd)
PIPENET=$(cd "$(dirname "$PIPENET")" && pwd)/$(basename "$PIPENET")
real_sleep=$(command -v sleep)

# --- stand-in scheduler commands ---------------------------------------------------
mkdir "$tmp/bin"
cat >"$tmp/bin/scontrol" <<EOF
#!/bin/sh
echo "\$@" >>"$tmp/scontrol.calls"
EOF
# qsub keeps each call's arguments, one a line, in qsub.N in its directory (a job's
# PBS_O_WORKDIR), and a line per call in qsub.calls; it answers N.fake
cat >"$tmp/bin/qsub" <<'EOF'
#!/bin/sh
n=$(($(cat qsub.count 2>/dev/null || echo 0) + 1))
echo $n >qsub.count
printf '%s\n' "$@" >"qsub.$n"
echo "$@" >>qsub.calls
echo "$n.fake"
EOF
# qstat -f JOBID: what pbs_job wrote for the job, long lines folded at 60 columns
# with a tab as PBS's qstat folds them
cat >"$tmp/bin/qstat" <<'EOF'
#!/bin/sh
[ "$1" = -f ] && [ -f "qstat.$2" ] || exit 1
awk '{ while (length($0) > 60) { print substr($0, 1, 60); $0 = "\t" substr($0, 61) } print }' "qstat.$2"
EOF
# The launcher (mpirun or srun), steered by files in the job's directory: it keeps
# its arguments, one a line, in launch.N (N counts the launches), its parent's pid
# (the script's) in script.pid and its own in launcher.pid, then
#   stops holds K > 0: "stops with a snapshot": writes DIR/snapshot-N.h5 for the last
#                      --snapshot-dir DIR, exits 3, K - 1 left;
#   wait-signal:       exits 3 on SIGUSR1 or SIGTERM (1 after 120 s without);
#   wait-timer:        exits 0 once the file sleeps (the timer's sleep) exists (20 s);
#   status holds S:    exits S (pipenet's exit 4: stopped with nothing saved);
#   else:              exits 0.
cat >"$tmp/bin/fake-launch" <<EOF
#!/bin/sh
n=\$((\$(cat launches 2>/dev/null || echo 0) + 1))
echo \$n >launches
printf '%s\n' "\$@" >launch.\$n
echo \$PPID >script.pid
if [ -f wait-signal ]; then
    trap 'kill \$s 2>/dev/null; exit 3' USR1 TERM
    $real_sleep 120 &
    s=\$!
    echo \$\$ >launcher.pid
    wait \$s
    exit 1
fi
echo \$\$ >launcher.pid
[ ! -f status ] || exit "\$(cat status)"
if [ -f wait-timer ]; then
    for _ in \$(seq 1 400); do [ -s sleeps ] && exit 0; $real_sleep 0.05; done
    exit 0
fi
left=\$(cat stops 2>/dev/null || echo 0)
[ "\$left" -gt 0 ] || exit 0
echo \$((left - 1)) >stops
dir="" prev=""
for a; do
    case \$prev in --snapshot-dir) dir=\$a ;; esac
    case \$a in --snapshot-dir=*) dir=\${a#*=} ;; esac
    prev=\$a
done
[ -z "\$dir" ] || { mkdir -p "\$dir" && : >"\$dir/snapshot-\$(printf %010d \$n).h5"; }
exit 3
EOF
# pbs.sh's timer sleeps through PATH: this one notes for how long (in sleeps)
mkdir "$tmp/timerbin"
printf '#!/bin/sh\necho "$@" >>sleeps\nexec %s "$@"\n' "$real_sleep" >"$tmp/timerbin/sleep"
# BASH_ENV for the scripts: the launcher ends within the pause after each signal sent
# and before each liveness check, the race every wait for the launcher must survive
cat >"$tmp/late.bash" <<EOF
kill() {
    case \$1 in -0) $real_sleep 2 ;; esac
    builtin kill "\$@"
    set -- \$? "\$1"
    case \$2 in -USR1 | -TERM) $real_sleep 2 ;; esac
    return \$1
}
EOF
chmod +x "$tmp/bin/"* "$tmp/timerbin/sleep"
export PATH="$tmp/bin:$PATH"
model=$here/models/fashion_mlp.json

# newdir NAME: an empty job directory holding jobs/pbs.sh (what a resubmission names)
newdir() {
    d=$tmp/$1
    mkdir -p "$d/jobs" && cp "$here/jobs/pbs.sh" "$d/jobs/" || fail "mkdir $d"
}

# pbs_job DIR N [NAME=VALUE]... [-- ARG...]: runs, as PBS would, job N: the one that
# qsub call N in DIR asked for (DIR/qsub.N, one argument a line; qsub.1 is the test's):
# a fresh environment with the -v variables (then the NAME=VALUEs), a node file with
# the ranks of the select (else of the script's #PBS lines), qstat -f telling the
# job's request, the ARGs as the script's arguments. Output in DIR/job.N.out; the
# script's exit status is returned.
pbs_job() {
    dir=$1 n=$2
    shift 2
    script="" select="" walltime="" name="" account="" vars=""
    while IFS= read -r a; do
        case $a in
        -l) IFS= read -r v
            case $v in select=*) select=${v#*=} ;; walltime=*) walltime=${v#*=} ;; esac ;;
        -N) IFS= read -r name ;;
        -A) IFS= read -r account ;;
        -v) IFS= read -r vars ;;
        -?) IFS= read -r _ ;;
        *) script=$a ;;
        esac
    done <"$dir/qsub.$n"
    [ -n "$select" ] || select=$(sed -n 's/^#PBS -l select=//p' "$script")
    [ -n "$walltime" ] || walltime=$(sed -n 's/^#PBS -l walltime=//p' "$script")
    [ -n "$name" ] || name=$(sed -n 's/^#PBS -N //p' "$script")
    chunks=${select%%:*}
    procs=$(echo "$select" | sed -n 's/.*:mpiprocs=\([0-9]*\).*/\1/p')
    threads=$(echo "$select" | sed -n 's/.*:ompthreads=\([0-9]*\).*/\1/p')
    for _ in $(seq 1 $((chunks * ${procs:-1}))); do echo localhost; done >"$dir/nodes"
    {
        echo "Job Id: $n.fake"
        echo "    Job_Name = $name"
        [ -z "$account" ] || echo "    Account_Name = $account"
        echo "    queue = workq"
        echo "    Resource_List.ncpus = $((chunks * ${procs:-1}))"
        echo "    Resource_List.nodect = $chunks"
        echo "    Resource_List.place = pack"
        echo "    Resource_List.select = $select"
        echo "    Resource_List.walltime = $walltime"
    } >"$dir/qstat.$n.fake"
    # the command: env's variables (the -v list split at its commas, then the test's),
    # bash, the script and the ARGs after --
    set -f
    old_ifs=$IFS
    IFS=,
    # shellcheck disable=SC2086 # split the -v list
    set -- $vars "$@"
    IFS=$old_ifs
    set +f
    args=no
    for a; do
        shift
        if [ $args = no ] && [ "$a" = -- ]; then
            set -- "$@" bash "$script"
            args=yes
        elif [ $args = yes ] || [ "${a#*=}" != "$a" ]; then # a -v word without = names
            set -- "$@" "$a"                                  # a variable of qsub's own
        fi
    done
    [ $args = yes ] || set -- "$@" bash "$script"
    (cd "$dir" && exec env -i PATH="$PATH" HOME="${HOME:-/}" PBS_NODEFILE="$dir/nodes" \
        PBS_JOBID=$n.fake PBS_JOBNAME="$name" PBS_O_WORKDIR="$dir" \
        OMP_NUM_THREADS="${threads:-1}" "$@") >"$dir/job.$n.out" 2>&1
}
# pbs_chain DIR [NAME=VALUE]... [-- ARG...]: the first job (DIR/qsub.1, with those
# variables and arguments), then every job that one resubmits, 10 at most
pbs_chain() {
    dir=$1
    shift
    pbs_job "$dir" 1 "$@"
    n=2
    while [ -f "$dir/qsub.$n" ]; do
        [ $n -le 10 ] || fail "pbs: a chain of more than 10 jobs in $dir"
        pbs_job "$dir" $n
        n=$((n + 1))
    done
}
# show DIR: the jobs' output and the calls, for a failure
show() {
    for f in "$1"/job.*.out "$1"/qsub.[0-9]*; do [ -f "$f" ] && { echo "== $f"; cat "$f"; }; done
}
# has FILE WORD...: FILE (one argument a line) holds the WORDs, one after the other
# (compared as strings: 02 is not 2)
has() {
    f=$1
    shift
    printf '%s\n' "$@" >"$tmp/words"
    awk -v n=$# 'NR == FNR { w[FNR] = $0; next } { line[FNR] = $0 }
        END { for (i = 1; i + n - 1 <= FNR; i++) { ok = 1
                  for (j = 1; j <= n; j++) if (line[i + j - 1] "" != w[j] "") { ok = 0; break }
                  if (ok) exit 0 }
              exit 1 }' "$tmp/words" "$f"
}

# slurm_job DIR [NAME=VALUE]... -- [ARG...]: jobs/slurm.sbatch in DIR as a job of 2
# tasks (SLURM_RESTART_COUNT=1: requeued once) with the stand-in launcher; output in
# DIR/out
slurm_job() {
    dir=$1
    shift
    mkdir -p "$dir"
    vars=""
    while [ $# -gt 0 ] && [ "$1" != -- ]; do
        vars="$vars$1
"
        shift
    done
    [ $# -eq 0 ] || shift
    (cd "$dir" && IFS='
' && exec env SLURM_NTASKS=2 SLURM_CPUS_PER_TASK=1 SLURM_JOB_ID=77 SLURM_JOB_NAME=pipenet \
        SLURM_SUBMIT_DIR="$dir" SLURM_RESTART_COUNT=1 SRUN=fake-launch MODEL="$model" \
        $vars bash "$here/jobs/slurm.sbatch" "$@") >"$dir/out" 2>&1
}

# --- PBS: resubmissions carry the user's arguments --------------------------------
# QSUB_ARGS with the whole request (`qsub $QSUB_ARGS -v QSUB_ARGS=... jobs/pbs.sh`) for
# 4 ranks, STAGES=4: a job with the script's 2 would be refused
newdir chain1
d=$tmp/chain1
qsub_args="-l select=2:ncpus=2:mpiprocs=2:ompthreads=1 -l walltime=00:20:00 -A proj42"
printf '%s\n' $qsub_args "$d/jobs/pbs.sh" >"$d/qsub.1" && echo 1 >"$d/qsub.count"
echo 3 >"$d/stops"
pbs_chain "$d" QSUB_ARGS="$qsub_args" STAGES=4 STOP_BEFORE=60 RESUBMIT=5 MODEL="$model" \
    MPIRUN=fake-launch TRAIN_ARGS="--lr 0.001" -- --seed 7
[ -f "$d/launch.4" ] && [ ! -f "$d/launch.5" ] && grep -q "^pipenet: finished" "$d/job.4.out" ||
    { show "$d"; fail "pbs: the chain of 4 jobs (3 stops) did not run to its end"; }
for i in 1 2 3 4; do
    has "$d/launch.$i" -np 4 ||
        { show "$d"; fail "pbs: job $i was not given the 4 ranks of QSUB_ARGS"; }
done
for i in 2 3 4; do
    has "$d/qsub.$i" $qsub_args && grep -q "RESUBMIT=$((6 - i))\(,\|\$\)" "$d/qsub.$i" ||
        { show "$d"; fail "pbs: the qsub for job $i lacks QSUB_ARGS or RESUBMIT=$((6 - i))"; }
done
has "$d/launch.1" "$model" --stages 4 && has "$d/launch.1" --lr 0.001 --seed 7 ||
    { show "$d"; fail "pbs: the first job's command is not the one asked for"; }
for i in 2 3 4; do
    # the same command, resuming
    sed '/^--resume$/{N;/\nauto$/d;}' "$d/launch.$i" | cmp -s - "$d/launch.1" &&
        has "$d/launch.$i" --resume auto ||
        { show "$d"; fail "pbs: job $i's command differs from the first one's (beyond --resume auto)"; }
done
echo "ok: pbs.sh: a chain of 4 jobs, each with QSUB_ARGS's 4 ranks and the first job's command"

# settings and arguments with what qsub -v cannot carry as they are: commas, quotes,
# spaces, a percent sign, a backslash
newdir chain3
d=$tmp/chain3
cp "$model" "$d/my,model.json"
printf '%s\n' "$d/jobs/pbs.sh" >"$d/qsub.1" && echo 1 >"$d/qsub.count"
echo 1 >"$d/stops"
pbs_chain "$d" MODEL="my,model.json" MPIRUN=fake-launch PIPENET="/opt/pipe net/pipenet" \
    TRAIN_ARGS="--metrics m,1.jsonl" -- --trace "t 'a',\"b\" 50%2C x\\y.json" --seed 7
[ -f "$d/launch.2" ] && [ ! -f "$d/launch.3" ] && grep -q "^pipenet: finished" "$d/job.2.out" ||
    { show "$d"; fail "pbs: the chain of 2 jobs (1 stop) did not run to its end"; }
has "$d/launch.1" "/opt/pipe net/pipenet" train "my,model.json" --stages 2 &&
    has "$d/launch.1" --metrics m,1.jsonl --trace "t 'a',\"b\" 50%2C x\\y.json" --seed 7 ||
    { show "$d"; fail "pbs: the first job's command is not the one asked for"; }
sed '/^--resume$/{N;/\nauto$/d;}' "$d/launch.2" | cmp -s - "$d/launch.1" ||
    { show "$d"; fail "pbs: the resubmitted job's command differs from the first one's"; }
echo "ok: pbs.sh: settings and arguments with commas, quotes, spaces, % and \\ carried as they are"

# the request given to the first qsub directly, no QSUB_ARGS: carried from qstat -f;
# the directory from --snapshot-dir in TRAIN_ARGS, resumed from
newdir chain2
d=$tmp/chain2
printf '%s\n' -l select=2:ncpus=2:mpiprocs=2:ompthreads=1 -l walltime=00:20:00 -N mine \
    -A proj42 "$d/jobs/pbs.sh" >"$d/qsub.1" && echo 1 >"$d/qsub.count"
echo 3 >"$d/stops"
pbs_chain "$d" STAGES=4 STOP_BEFORE=60 MODEL="$model" MPIRUN=fake-launch \
    TRAIN_ARGS="--snapshot-dir=ckpt --steps 100"
[ -f "$d/launch.4" ] && [ ! -f "$d/launch.5" ] && grep -q "^pipenet: finished" "$d/job.4.out" ||
    { show "$d"; fail "pbs: the chain of 4 jobs (request from the first qsub) did not run to its end"; }
for i in 1 2 3 4; do
    has "$d/launch.$i" -np 4 ||
        { show "$d"; fail "pbs: job $i was not given the 4 ranks of the first job's select"; }
done
for i in 2 3 4; do
    has "$d/qsub.$i" -l select=2:ncpus=2:mpiprocs=2:ompthreads=1 &&
        has "$d/qsub.$i" -l walltime=00:20:00 && has "$d/qsub.$i" -N mine &&
        has "$d/qsub.$i" -A proj42 && ! grep -q "ncpus=4" "$d/qsub.$i" ||
        { show "$d"; fail "pbs: the qsub for job $i does not ask for the first job's request (only)"; }
done
has "$d/launch.4" --resume auto && [ -f "$d/ckpt/snapshot-0000000003.h5" ] &&
    [ ! -e "$d/snapshots" ] ||
    { show "$d"; fail "pbs: the jobs did not resume from TRAIN_ARGS's --snapshot-dir ckpt"; }
echo "ok: pbs.sh: a request given to the first qsub (select, wall time, name, account) carried to every job; --snapshot-dir in TRAIN_ARGS resumed from"

# --- numbers are decimal ---------------------------------------------------------
# walltime 01:12:01 = 4321 s: the timer sleeps 4321 - STOP_BEFORE
for sb in 08:4313 0300:4021 0:4321; do
    newdir "timer${sb%%:*}"
    d=$tmp/timer${sb%%:*}
    printf '%s\n' -l walltime=01:12:01 "$d/jobs/pbs.sh" >"$d/qsub.1" && echo 1 >"$d/qsub.count"
    touch "$d/wait-timer"
    pbs_job "$d" 1 PATH="$tmp/timerbin:$PATH" STOP_BEFORE="${sb%%:*}" MODEL="$model" \
        MPIRUN=fake-launch
    rc=$?
    [ $rc -eq 0 ] && [ "$(cat "$d/sleeps" 2>/dev/null)" = "${sb#*:}" ] ||
        { show "$d"; fail "pbs: STOP_BEFORE=${sb%%:*}: exit $rc, timer sleeps '$(cat "$d/sleeps" 2>/dev/null)', expected ${sb#*:} s"; }
done
newdir numbers
d=$tmp/numbers
printf '%s\n' -l select=1:ncpus=4:mpiprocs=4 -l walltime=01:00:00 "$d/jobs/pbs.sh" >"$d/qsub.1" && echo 1 >"$d/qsub.count"
echo 1 >"$d/stops"
pbs_job "$d" 1 STAGES=02 GRACE=09 RESUBMIT=010 MODEL="$model" MPIRUN=fake-launch
rc=$?
[ $rc -eq 3 ] && has "$d/launch.1" -np 4 && has "$d/launch.1" --stages 2 &&
    has "$d/launch.1" odls_base_sigkill_timeout 9 && grep -q "RESUBMIT=9\(,\|\$\)" "$d/qsub.2" ||
    { show "$d"; fail "pbs: STAGES=02 GRACE=09 RESUBMIT=010 not read as 2, 9 and 10"; }
for bad in STOP_BEFORE=8s STOP_BEFORE=-8 STOP_BEFORE=1e3 STOP_BEFORE=" 8" STOP_BEFORE=0x10 \
    STOP_BEFORE=99999999999 GRACE=1.5 RESUBMIT=-1 STAGES=2x; do
    newdir bad
    d=$tmp/bad
    printf '%s\n' "$d/jobs/pbs.sh" >"$d/qsub.1" && echo 1 >"$d/qsub.count"
    pbs_job "$d" 1 "$bad" MODEL="$model" MPIRUN=fake-launch
    rc=$?
    [ $rc -eq 2 ] && grep -q "^pbs.sh: ${bad%%=*}: .*'${bad#*=}'" "$d/job.1.out" &&
        [ ! -f "$d/launch.1" ] && [ ! -e "$d/snapshots" ] ||
        { show "$d"; fail "pbs: $bad: exit $rc, expected 2 and a message naming it, before anything starts"; }
    rm -rf "$d"
done
d=$tmp/snumbers
slurm_job "$d" STAGES=02 GRACE=09 MAX_REQUEUES=08 --
rc=$?
[ $rc -eq 0 ] && has "$d/launch.1" --stages 2 && has "$d/launch.1" odls_base_sigkill_timeout 9 ||
    { cat "$d/out"; fail "slurm: STAGES=02 GRACE=09 MAX_REQUEUES=08: exit $rc, not read as 2, 9 and 8"; }
for bad in STAGES=2x GRACE=-1 MAX_REQUEUES=1e3; do
    rm -rf "$d"
    slurm_job "$d" "$bad" --
    rc=$?
    [ $rc -eq 2 ] && grep -q "^slurm.sbatch: ${bad%%=*}: .*'${bad#*=}'" "$d/out" &&
        [ ! -f "$d/launch.1" ] && [ ! -e "$d/snapshots" ] ||
        { cat "$d/out"; fail "slurm: $bad: exit $rc, expected 2 and a message naming it, before anything starts"; }
done
echo "ok: pbs.sh: STOP_BEFORE=08, 0300 and 0 mean 8, 300 and 0 s; numbers decimal in both scripts; 8s, -8, 1e3, 0x10, ... refused up front"

# --- the snapshot directory: one source ---------------------------------------------
for form in "--snapshot-dir:mine" "--snapshot-dir=:mine" "--snapshot-d:mine"; do
    d=$tmp/sdir
    rm -rf "$d"
    mkdir -p "$d/mine" && : >"$d/mine/snapshot-0000000007.h5"
    opt=${form%%:*}
    case $opt in *=) set -- "$opt${form#*:}" ;; *) set -- "$opt" "${form#*:}" ;; esac
    slurm_job "$d" -- --steps 9 "$@"
    rc=$?
    [ $rc -eq 0 ] && has "$d/launch.1" --resume auto && [ ! -e "$d/snapshots" ] ||
        { cat "$d/out"; fail "slurm: $*: exit $rc; not resumed from that directory"; }
    # TRAIN_ARGS too, and pbs.sh
    rm -rf "$d" && mkdir -p "$d/mine" && : >"$d/mine/snapshot-0000000007.h5"
    slurm_job "$d" TRAIN_ARGS="$*" --
    has "$d/launch.1" --resume auto && [ ! -e "$d/snapshots" ] ||
        { cat "$d/out"; fail "slurm: TRAIN_ARGS=$*: not resumed from that directory"; }
    newdir pdir
    d=$tmp/pdir
    mkdir -p "$d/mine" && : >"$d/mine/snapshot-0000000007.h5"
    printf '%s\n' "$d/jobs/pbs.sh" >"$d/qsub.1" && echo 1 >"$d/qsub.count"
    pbs_job "$d" 1 MODEL="$model" MPIRUN=fake-launch TRAIN_ARGS="$*"
    has "$d/launch.1" --resume auto && [ ! -e "$d/snapshots" ] ||
        { show "$d"; fail "pbs: TRAIN_ARGS=$*: not resumed from that directory"; }
    rm -rf "$d"
done
# the same directory twice is one; two are refused before anything starts
d=$tmp/sdir
rm -rf "$d" && mkdir -p "$d/mine" && : >"$d/mine/snapshot-0000000007.h5"
slurm_job "$d" SNAPSHOT_DIR=mine/ -- --snapshot-dir mine
rc=$?
[ $rc -eq 0 ] && has "$d/launch.1" --resume auto ||
    { cat "$d/out"; fail "slurm: SNAPSHOT_DIR=mine/ and --snapshot-dir mine: exit $rc, not resumed"; }
rm -rf "$d"
slurm_job "$d" SNAPSHOT_DIR=theirs -- --snapshot-dir mine
rc=$?
[ $rc -eq 2 ] && grep -q "SNAPSHOT_DIR=theirs.*--snapshot-dir mine" "$d/out" &&
    [ ! -f "$d/launch.1" ] && [ ! -e "$d/theirs" ] ||
    { cat "$d/out"; fail "slurm: SNAPSHOT_DIR=theirs and --snapshot-dir mine: exit $rc, not refused up front"; }
newdir pdir
d=$tmp/pdir
printf '%s\n' "$d/jobs/pbs.sh" >"$d/qsub.1" && echo 1 >"$d/qsub.count"
pbs_job "$d" 1 MODEL="$model" MPIRUN=fake-launch SNAPSHOT_DIR=theirs TRAIN_ARGS="--snapshot-dir mine"
rc=$?
[ $rc -eq 2 ] && grep -q "SNAPSHOT_DIR=theirs.*--snapshot-dir mine" "$d/job.1.out" &&
    [ ! -f "$d/launch.1" ] && [ ! -e "$d/theirs" ] ||
    { show "$d"; fail "pbs: SNAPSHOT_DIR=theirs and --snapshot-dir mine: exit $rc, not refused up front"; }
echo "ok: slurm.sbatch, pbs.sh: --snapshot-dir DIR, =DIR, abbreviated, in the arguments or TRAIN_ARGS: resumed from DIR; a contradicting SNAPSHOT_DIR refused"

# --- exit 4: stopped with nothing saved: neither requeued nor resubmitted -------------
newdir s4
d=$tmp/s4
echo 4 >"$d/status"
rm -f "$tmp/scontrol.calls"
slurm_job "$d" MODEL="$model"
rc=$?
[ $rc -eq 4 ] && grep -q "stopped by a signal with nothing saved (exit 4): not resubmitted" "$d/out" &&
    [ ! -f "$tmp/scontrol.calls" ] || { cat "$d/out"; fail "slurm: a run's exit 4: exit $rc, requeued or not said"; }
newdir p4
d=$tmp/p4
echo 4 >"$d/status"
printf '%s\n' "$d/jobs/pbs.sh" >"$d/qsub.1" && echo 1 >"$d/qsub.count"
pbs_job "$d" 1 MODEL="$model" MPIRUN=fake-launch
rc=$?
[ $rc -eq 4 ] && grep -q "nothing saved (exit 4): not resubmitted" "$d/job.1.out" &&
    [ ! -f "$d/qsub.2" ] || { show "$d"; fail "pbs: a run's exit 4: exit $rc, resubmitted or not said"; }
echo "ok: slurm.sbatch, pbs.sh: pipenet's exit 4 (stopped, nothing saved) is passed on, not requeued or resubmitted"

# --- the launcher's status survives a late look --------------------------------------
# wait_launcher DIR: until the stand-in launcher in DIR is ready for signals (60 s)
wait_launcher() {
    for _ in $(seq 1 600); do [ -s "$1/launcher.pid" ] && return 0; $real_sleep 0.1; done
    fail "no launcher started in $1"
}
# Slurm: USR1 to the batch shell, passed on; the launcher stops (exit 3) before the
# script looks again: the status is 3 and the job requeues
d=$tmp/race
mkdir -p "$d" && touch "$d/wait-signal"
rm -f "$tmp/scontrol.calls"
slurm_job "$d" BASH_ENV="$tmp/late.bash" -- --steps 9 &
pid=$!
wait_launcher "$d"
kill -USR1 "$(cat "$d/script.pid")"
wait $pid
rc=$?
[ $rc -eq 3 ] && grep -q "requeueing job 77" "$d/out" && [ "$(cat "$tmp/scontrol.calls")" = "requeue 77" ] ||
    { cat "$d/out"; fail "slurm: exit $rc after SIGUSR1 and a stop (3), expected 3 and a requeue"; }
# PBS: qdel's TERM to the script, then to the launcher, which stops (exit 3)
newdir prace
d=$tmp/prace
touch "$d/wait-signal"
printf '%s\n' "$d/jobs/pbs.sh" >"$d/qsub.1" && echo 1 >"$d/qsub.count"
pbs_job "$d" 1 MODEL="$model" MPIRUN=fake-launch BASH_ENV="$tmp/late.bash" &
pid=$!
wait_launcher "$d"
kill -TERM "$(cat "$d/script.pid")"
$real_sleep 0.2
kill -TERM "$(cat "$d/launcher.pid")"
wait $pid
rc=$?
[ $rc -eq 3 ] && grep -q "not resubmitted" "$d/job.1.out" && [ ! -f "$d/qsub.2" ] ||
    { show "$d"; fail "pbs: exit $rc after SIGTERM and a stop (3), expected 3 and no resubmission"; }
echo "ok: slurm.sbatch, pbs.sh: a launcher that stops just after a signal keeps its status 3 (pbs.sh: qdel'ed, not resubmitted)"

# --- with pipenet --------------------------------------------------------------------
[ -d "$SRC" ] || { echo "SKIP: $SRC not installed (dataset-fashion-mnist)"; exit 77; }
"$PIPENET" import fashion-mnist --src "$SRC" --out "$tmp/fm" >/dev/null || fail "import"
rm -f "$tmp/scontrol.calls" "$tmp/qsub.calls"
export MODEL="$model" PIPENET GRACE=1 # mpirun waits 2 GRACE after a non-zero exit
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

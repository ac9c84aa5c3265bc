#!/bin/sh
# Slurm across hosts, on the test bed of tests/hosts_fixture.sh: one slurmd in each
# host's namespaces (pn-host0, pn-host1, 2 CPUs each), slurmctld on pn-host0, munged
# here (its socket is a file: the hosts share the filesystem), a private config with
# what two slurmds sharing one filesystem must not share given per node (%n: spool,
# pid and log files, and TmpFS, where the PMIx plugin makes its per-step directory);
# ports are the hosts' own (a network namespace each), so fixed ones do.
#  - srun -N 2 -n 4 --mpi=pmix puts ranks 0, 1 on pn-host0 and 2, 3 on pn-host1;
#  - 2 replicas x 2 stages train to the --deterministic hash of 1 process;
#  - host 1's link cut mid-run (--stall-timeout 5): pipenet's one error line names
#    ranks 2 and 3 on pn-host1, every rank on both hosts ends within 5 + 25 s of the
#    cut (measured 14.3 s; the margin is for a loaded machine; those cut off from srun through pn_job_abort's alarm: PMIx's abort waits on
#    srun for good), and srun ends (Slurm's KillWait, 5 s here, after the abort).
# Skips (77) unless root with ip, unshare, nsenter, munge and Slurm's daemons.
set -u
. "$(dirname "$0")/script_fixture.sh"
. "$(dirname "$0")/lm_fixture.sh"
. "$(dirname "$0")/hosts_fixture.sh"
export PATH="$PATH:/usr/sbin:/sbin"
for cmd in munged mungekey slurmctld slurmd srun sinfo; do
    command -v $cmd >/dev/null || { echo "SKIP: no $cmd (Debian packages slurm-wlm and munge)"; exit 77; }
done
# an enclosing Slurm job's variables would steer srun
unset $(env | sed -n 's/^\(SLURM_[A-Za-z0-9_]*\)=.*/\1/p')
PIPENET=$(cd "$(dirname "$PIPENET")" && pwd)/$(basename "$PIPENET")
hosts_up 2 2
chmod 755 "$tmp" # munged wants every directory above its socket searchable by all
mkdir -p "$tmp/state" || fail "mkdir"
for h in pn-host0 pn-host1; do mkdir -p "$tmp/spool/$h" "$tmp/tmpfs/$h" || fail "mkdir"; done
cat >"$tmp/slurm.conf" <<EOC
ClusterName=pn-hosts
SlurmctldHost=pn-host0($hosts_net.1)
SlurmctldPort=16817
SlurmdPort=16818
SlurmUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$tmp/munge.socket,cred_expire=5
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool/%n
TmpFS=$tmp/tmpfs/%n
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd.%n.pid
SlurmctldLogFile=$tmp/slurmctld.log
SlurmdLogFile=$tmp/slurmd.%n.log
SlurmdParameters=config_overrides
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
KillWait=5
NodeName=pn-host0 NodeAddr=$hosts_net.1 CPUs=2 State=UNKNOWN
NodeName=pn-host1 NodeAddr=$hosts_net.2 CPUs=2 State=UNKNOWN
PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOC
export SLURM_CONF=$tmp/slurm.conf
mungekey --create --keyfile="$tmp/munge.key" >/dev/null 2>&1 || { echo "SKIP: mungekey failed"; exit 77; }
# munged runs here, not on a host: hosts_down would not end it
munged --foreground --socket="$tmp/munge.socket" --key-file="$tmp/munge.key" \
    --pid-file="$tmp/munged.pid" --log-file="$tmp/munged.log" --seed-file="$tmp/munged.seed" \
    >"$tmp/munged.out" 2>&1 &
munged=$!
trap 'kill $munged 2>/dev/null; hosts_down; rm -rf "$tmp"' EXIT
for _ in $(seq 1 100); do [ -S "$tmp/munge.socket" ] && break; sleep 0.1; done
hosts_in 0 slurmctld -D -i >"$tmp/slurmctld.out" 2>&1 &
hosts_in 0 slurmd -D -N pn-host0 >"$tmp/slurmd0.out" 2>&1 &
hosts_in 1 slurmd -D -N pn-host1 >"$tmp/slurmd1.out" 2>&1 &
for _ in $(seq 1 60); do
    up=$(hosts_in 0 sinfo -h -o '%n %T' 2>/dev/null | sort | tr '\n' ' ')
    [ "$up" = "pn-host0 idle pn-host1 idle " ] && break
    sleep 1
done
[ "$up" = "pn-host0 idle pn-host1 idle " ] ||
    { tail -n 5 "$tmp"/*.out "$tmp"/*.log; echo "SKIP: the 2-host Slurm did not come up: $up"; exit 77; }
# srun passes this environment on: Open MPI's TCP on the bed's subnet
export OMPI_MCA_btl_tcp_if_include=$hosts_net.0/24
on_slurm() { hosts_in 0 timeout 120 srun -N 2 -n 4 --mpi=pmix "$@"; }

on_slurm sh -c 'echo "$SLURM_PROCID $(hostname)"' 2>&1 | sort >"$tmp/where"
[ "$(cat "$tmp/where" | tr '\n' ' ')" = "0 pn-host0 1 pn-host0 2 pn-host1 3 pn-host1 " ] ||
    { cat "$tmp/where"; fail "tasks not 2 on each host"; }

import_times_table 600
tiny_gpt 256 '{"batch": 16, "steps": 30, "seed": 3, "optimizer": {"type": "adam", "lr": 0.01}}' \
    >"$tmp/gpt.json"
hash_of() { grep -o 'parameter hash after [0-9]* steps: [0-9a-f]*' "$tmp/$1.out" | cut -d' ' -f6; }
train() { "$PIPENET" train "$tmp/gpt.json" --data "$tmp/lm/train.h5" --threads 1 --log-every 1000 \
              --deterministic "$@"; }
train --micro-batches 4 >"$tmp/one.out" 2>&1 || { cat "$tmp/one.out"; fail "1 process"; }
ref=$(hash_of one)
on_slurm "$PIPENET" train "$tmp/gpt.json" --data "$tmp/lm/train.h5" --threads 1 --log-every 1000 \
    --deterministic --stages 2 --micro-batches 2 >"$tmp/x2.out" 2>&1 || { cat "$tmp/x2.out"; fail "2 x 2 under srun"; }
[ -n "$ref" ] && [ "$(hash_of x2)" = "$ref" ] || { cat "$tmp/x2.out"; fail "2 x 2 under srun: hash '$(hash_of x2)', 1 process '$ref'"; }
echo "ok: srun -N 2 -n 4 over 2 slurmds: ranks 0, 1 on pn-host0, 2, 3 on pn-host1; 2 x 2 to $ref as 1 process"

now() { date +%s.%N; }
since() { echo "$(now) $1" | awk '{ printf "%.1f", $1 - $2 }'; }
ranks_left() { for p in $(hosts_procs 0; hosts_procs 1); do ps -o comm= -p "$p"; done | grep -c pipenet; }
(on_slurm "$PIPENET" train "$tmp/gpt.json" --data "$tmp/lm/train.h5" --threads 1 --log-every 1000 \
     --deterministic --stages 2 --micro-batches 2 --steps 100000 --stall-timeout 5 \
     --snapshot-dir "$tmp/snaps" --snapshot-every 10 >"$tmp/cut.out" 2>&1
 echo $? >"$tmp/cut.rc"; now >"$tmp/cut.end") &
run=$!
for _ in $(seq 1 600); do [ -f "$tmp/snaps/snapshot-0000000010.h5" ] || [ -f "$tmp/cut.end" ] && break; sleep 0.1; done
[ -f "$tmp/snaps/snapshot-0000000010.h5" ] || { cat "$tmp/cut.out"; fail "cut: no snapshot of step 10"; }
t=$(now)
hosts_link_down 1
while [ "$(ranks_left)" -gt 0 ]; do
    [ "$(since "$t" | cut -d. -f1)" -lt 30 ] || { cat "$tmp/cut.out"; fail "cut: ranks still run $(since "$t") s after the cut"; }
    sleep 0.2
done
ranks_s=$(since "$t")
wait $run
took=$(awk -v t="$t" '{ printf "%.1f", $1 - t }' "$tmp/cut.end")
[ "$(cat "$tmp/cut.rc")" -ne 0 ] || { cat "$tmp/cut.out"; fail "cut: srun exit 0"; }
[ "$(grep -c 'pipenet: error' "$tmp/cut.out")" -eq 1 ] &&
    grep -q "^pipenet: error: rank [01] .*no answer within 2 s (stopped, or busy outside MPI) from rank 2 (stage 0, replica 1) on host pn-host1, rank 3 (stage 1, replica 1) on host pn-host1$" "$tmp/cut.out" ||
    { cat "$tmp/cut.out"; fail "cut: not one error line naming ranks 2 and 3 on pn-host1"; }
echo "ok: host 1's link cut under srun: every rank ended $ranks_s s after the cut, srun $took s after (exit $(cat "$tmp/cut.rc")): $(grep 'pipenet: error' "$tmp/cut.out")"
echo "    srun said: $(grep '^srun: ' "$tmp/cut.out" | tr '\n' ' ')"
echo "PASS: hosts slurm"

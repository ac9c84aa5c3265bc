#!/bin/sh
# `pipenet train --trace FILE` on 2 stages x 2 replicas (4 ranks, oversubscribed):
# the file is Chrome trace-event JSON with one named process per rank, a forward
# and a backward of every micro-batch of every step on every rank, sends on stage 0
# and receives on stage 1, no negative duration, every layer's event inside its
# micro-batch's; a stop by SIGUSR1 (exit 4: nothing saved) still leaves a whole
# file; a rank's error mid-run leaves that rank's own track; a bad path fails before
# training; the event cap drops events and says so. Skips (77) without the Debian
# Fashion-MNIST package.
set -u
. "$(dirname "$0")/script_fixture.sh"
need_fashion_mnist
command -v python3 >/dev/null || { echo "SKIP: no python3"; exit 77; }
here=$(cd "$(dirname "$0")/.." && pwd)
import_fashion_mnist
# the example model without its evaluation set (a whole pass over it per run)
python3 -c "
import json, sys
m = json.load(open(sys.argv[1]))
del m['train']['eval']
json.dump(m, open(sys.argv[2], 'w'))
" "$here/models/fashion_mlp.json" "$tmp/model.json" || fail "model"
model=$tmp/model.json

# train NAME STEPS [options]: 2 replicas x 2 stages, batch 32 in 4 micro-batches
train() {
    name=$1 steps=$2; shift 2
    timeout 300 mpirun --oversubscribe -np 4 "$PIPENET" train "$model" \
        --data "$tmp/fm/train.h5" --stages 2 --micro-batches 4 --steps "$steps" --batch 32 \
        --threads 1 --log-every 1000 "$@" >"$tmp/$name.out" 2>&1
    rc=$?
}

# check FILE STEPS: the promises above, for steps 0 .. STEPS-1, nothing dropped
check() {
    python3 - "$@" <<'PY' || fail "$1: $(cat "$tmp/check.err" 2>/dev/null)"
import json, sys
path, steps = sys.argv[1], int(sys.argv[2])
def bad(why):
    sys.exit("%s: %s" % (path, why))
with open(path) as f:
    doc = json.load(f)
ev = doc["traceEvents"]
names = {e["pid"]: e["args"]["name"] for e in ev
         if e["ph"] == "M" and e["name"] == "process_name"}
if sorted(names) != [0, 1, 2, 3]:
    bad("processes named: %s" % sorted(names))
for pid, name in names.items():
    want = "rank %d: stage %d, replica %d" % (pid, pid % 2, pid // 2)
    if name != want:
        bad("pid %d is named %r, expected %r" % (pid, name, want))
if {e["pid"] for e in ev} != {0, 1, 2, 3}:
    bad("events of other pids")
xs = [e for e in ev if e["ph"] == "X"]
for e in xs:
    if e["dur"] < 0 or e["ts"] < 0:
        bad("negative time: %r" % e)
micro = {}
for e in xs:
    if e["cat"] == "micro-batch":
        key = (e["pid"], e["name"], e["args"]["step"], e["args"]["micro"])
        if key in micro:
            bad("twice: %r" % (key,))
        micro[key] = e
for pid in range(4):
    for step in range(steps):
        for m in range(4):
            for p in ("forward", "backward"):
                if (pid, p, step, m) not in micro:
                    bad("rank %d has no %s of step %d, micro-batch %d" % (pid, p, step, m))
for pid in range(4):
    kinds = {e["name"] for e in xs if e["pid"] == pid and e["cat"] == "comm"}
    need = {"send value", "recv grad"} if pid % 2 == 0 else {"recv value", "send grad"}
    if not need <= kinds:
        bad("rank %d's transfers: %s" % (pid, sorted(kinds)))
    for cat in ("step", "data", "optimizer", "allreduce", "wait"):
        if not any(e["pid"] == pid and e["cat"] == cat for e in xs):
            bad("rank %d has no %s event" % (pid, cat))
layers = [e for e in xs if e["cat"] in ("forward", "backward")]
if len(layers) < 4 * steps * 4 * 2:
    bad("only %d layer events" % len(layers))
for e in layers:
    outer = micro.get((e["pid"], e["cat"], e["args"]["step"], e["args"]["micro"]))
    if outer is None:
        bad("layer event outside any micro-batch: %r" % e)
    if e["ts"] < outer["ts"] - 0.001 or e["ts"] + e["dur"] > outer["ts"] + outer["dur"] + 0.001:
        bad("layer event %r not inside %r" % (e, outer))
# the clocks line up: a value's receive on stage 1 ends after its send on stage 0
# started (within 2 ms, the comparison's error on a loaded machine)
sends = {(e["pid"], e["args"]["step"], e["args"]["micro"]): e for e in xs
         if e["name"] == "send value" and "step" in e["args"]}
for (pid, step, m), s in sends.items():
    r = [e for e in xs if e["pid"] == pid + 1 and e["name"] == "recv value"
         and e["args"].get("step") == step and e["args"].get("micro") == m]
    if len(r) != 1:
        bad("rank %d: %d receives of step %d, micro-batch %d" % (pid + 1, len(r), step, m))
    if r[0]["ts"] + r[0]["dur"] < s["ts"] - 2000:
        bad("received before it was sent: %r, %r" % (s, r[0]))
dropped = doc["otherData"]["dropped_events"]
if dropped:
    bad("%d events dropped" % dropped)
PY
}

train ok 3 --trace "$tmp/ok.json"
[ "$rc" -eq 0 ] || { cat "$tmp/ok.out"; fail "train with --trace: exit $rc"; }
[ -f "$tmp/ok.json" ] || fail "no trace file"
check "$tmp/ok.json" 3 2>"$tmp/check.err"
ls "$tmp" | grep -q 'tmp-' && fail "a temporary file is left: $(ls "$tmp")"

# a stop by signal: the trace of the steps done, whole (exit 4: this run has no
# snapshot directory, so the stop saved nothing)
PIPENET_FAULT=1:1:usr1 train stopped 50 --trace "$tmp/stopped.json"
[ "$rc" -eq 4 ] || { cat "$tmp/stopped.out"; fail "stopped run: exit $rc, expected 4"; }
check "$tmp/stopped.json" 1 2>"$tmp/check.err"

# an error on one rank during a step: the job ends (exit 1) and that rank writes
# its own track beside the file, whole; the file itself is not written
PIPENET_FAULT=1:1 train failed 50 --trace "$tmp/failed.json"
[ "$rc" -eq 1 ] || { cat "$tmp/failed.out"; fail "failed run: exit $rc, expected 1"; }
[ -f "$tmp/failed.json" ] && fail "failed run: a gathered trace was written"
python3 -c "
import json, sys
d = json.load(open('$tmp/failed.json.rank1'))
pids = {e['pid'] for e in d['traceEvents']}
steps = {e['args'].get('step') for e in d['traceEvents'] if e.get('cat') == 'micro-batch'}
sys.exit(not (pids == {1} and 0 in steps))
" || fail "failed run: rank 1's own trace is missing or wrong"

# a path that cannot be written fails before the first step, naming it
train badpath 3 --trace "$tmp/no/such/dir/t.json"
[ "$rc" -eq 1 ] || { cat "$tmp/badpath.out"; fail "bad trace path: exit $rc, expected 1"; }
grep -q "pipenet: error: .*--trace $tmp/no/such/dir/t.json: cannot create a file there" \
    "$tmp/badpath.out" || { cat "$tmp/badpath.out"; fail "bad trace path: message"; }
grep -q "^step " "$tmp/badpath.out" && fail "bad trace path: trained anyway"

# the cap: PIPENET_TRACE_EVENTS=20 keeps 20 events per rank and notes the rest
PIPENET_TRACE_EVENTS=20 train capped 1 --trace "$tmp/capped.json"
[ "$rc" -eq 0 ] || { cat "$tmp/capped.out"; fail "capped trace: exit $rc"; }
python3 -c "
import json, sys
d = json.load(open('$tmp/capped.json'))
n = [e for e in d['traceEvents'] if e['name'] == 'trace events dropped']
x = [e for e in d['traceEvents'] if e['ph'] == 'X']
sys.exit(not (d['otherData']['dropped_events'] > 0 and len(n) == 4 and len(x) == 80))
" || fail "capped trace: no drop note, or not 20 events per rank"
echo "PASS: trace"

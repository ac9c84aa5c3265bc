#!/bin/sh
# The pulls of sharded tables move ahead of their forwards (pipeline/stage_ahead.c):
# on 2 replicas of one stage, 1f1b, 4 micro-batches, a traced run shows, on both
# ranks and at every step, the rows of micro-batch m + 1 posted by their owners
# ("pull ahead: answer") before micro-batch m's backward starts, every forward taking
# the rows of its two tables ("pull ahead: take", inside the forward) and no forward
# waiting for counts or ids (what a pull made in the forward would). Pulled ahead or
# not, the results stay those of one process: --deterministic hashes after 30 steps
# of 1f1b, gpipe (whose forwards run back to back, so several pull ahead at once)
# and 2 stages x 2 replicas with --recompute (forwards run again in backwards,
# pulling as they run) equal the unsharded 1-process run's.
set -u
. "$(dirname "$0")/script_fixture.sh"
command -v mpirun >/dev/null || { echo "SKIP: no mpirun"; exit 77; }
command -v python3 >/dev/null || { echo "SKIP: no python3"; exit 77; }
. "$(dirname "$0")/shard_fixture.sh" # in $tmp from here on

steps=4
timeout 300 mpirun --oversubscribe -np 2 "$PIPENET" train shard1.json --data ctr/train.h5 \
    --eval= --steps $steps --micro-batches 4 --threads 1 --snapshot-dir "" \
    --trace ahead.json >ahead.out 2>&1 || { rc=$?; cat ahead.out; fail "traced run: exit $rc"; }
python3 - ahead.json $steps <<'PY' || fail "the trace shows no pull ahead"
import json, sys
steps = int(sys.argv[2])
xs = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e["ph"] == "X"]
def at(name, pid, step, micro):
    return [e for e in xs if e["name"] == name and e["pid"] == pid and
            e["args"].get("step") == step and e["args"].get("micro") == micro]
def one(name, pid, step, micro):
    found = [e for e in at(name, pid, step, micro) if e["cat"] == "micro-batch"]
    if len(found) != 1:
        sys.exit("rank %d step %d: %d %ss of micro-batch %d" % (pid, step, len(found), name, micro))
    return found[0]
end = lambda e: e["ts"] + e["dur"]
for pid in (0, 1):
    waits = [e for e in xs if e["pid"] == pid and
             e["name"] in ("owner exchange: counts", "owner exchange: ids")]
    for step in range(steps):
        for m in range(4):
            fwd = one("forward", pid, step, m)
            takes = at("pull ahead: take", pid, step, m)
            if len(takes) != 2 or any(t["ts"] < fwd["ts"] or end(t) > end(fwd) for t in takes):
                sys.exit("rank %d step %d micro-batch %d: takes %r in its forward %r"
                         % (pid, step, m, takes, fwd))
            for w in waits:
                if fwd["ts"] < end(w) <= end(fwd):
                    sys.exit("rank %d step %d: the forward of micro-batch %d waits for %r"
                             % (pid, step, m, w))
            if m == 3:
                continue
            back = one("backward", pid, step, m)
            answers = at("pull ahead: answer", pid, step, m + 1)
            if len(answers) != 2 or any(end(a) > back["ts"] for a in answers):
                sys.exit("rank %d step %d: micro-batch %d's rows posted at %r, its backward "
                         "starting at %.0f" % (pid, step, m + 1, answers, back["ts"]))
print("ok: micro-batch m + 1's rows posted before m's backward, on both ranks, %d steps"
      % steps)
PY

# det NAME MODEL MICRO [mpirun N] options...: 30 --deterministic steps, 8-sample
# micro-batches of a batch of 64; NAME.hash
det() {
    name=$1 model=$2 micro=$3
    shift 3
    launch=
    if [ "${1:-}" = mpirun ]; then launch="mpirun --oversubscribe -np $2"; shift 2; fi
    timeout 300 $launch "$PIPENET" train "$model" --data ctr/train.h5 --eval ctr/test.h5 \
        --steps 30 --micro-batches "$micro" --threads 1 --log-every 1000 --deterministic \
        --snapshot-dir "" "$@" >"$name.out" 2>&1 ||
        { rc=$?; cat "$name.out"; fail "$name: exit $rc"; }
    grep -o 'parameter hash after 30 steps: [0-9a-f]*' "$name.out" >"$name.hash" ||
        { cat "$name.out"; fail "$name: no hash"; }
}
det whole whole1.json 8
det ahead shard1.json 4 mpirun 2
det gpipe shard1.json 4 mpirun 2 --schedule gpipe
det grid shard.json 4 mpirun 4 --recompute
for n in ahead gpipe grid; do
    [ "$(cat $n.hash)" = "$(cat whole.hash)" ] ||
        { cat $n.out; fail "$n: $(cat $n.hash), not $(cat whole.hash)"; }
done
echo "ok: 1f1b, gpipe and 2 x 2 --recompute pulling ahead: $(cat whole.hash)"

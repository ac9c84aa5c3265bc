#!/bin/sh
# `pipenet plan`: the per-stage table for Fashion-MNIST's MLP on 2 stages (two stage
# rows, a totals line, the (P-1)/(M+P-1) bubble), the expanded repeat blocks of
# models/char_gpt.json on 4 stages, and clean errors for more stages than layers, an
# unknown schedule and a batch that does not split into micro-batches; --measure
# (a row per stage, the step's prediction), --json (python3 parses it; in bf16 its
# bytes are bf16's, as the text's), the layer
# times file read back (it moves the cut), one of all-zero times (M + P - 1 slots,
# no rate made up) and the inputs refused.
set -u
. "$(dirname "$0")/script_fixture.sh"
here=$(cd "$(dirname "$0")/.." && pwd)
model=$here/models/fashion_mlp.json

"$PIPENET" plan "$model" --stages 2 --micro-batches 4 >"$tmp/p2" 2>&1 ||
    { cat "$tmp/p2"; fail "plan --stages 2 exited non-zero"; }
cat "$tmp/p2"
head -1 "$tmp/p2" | grep -q "^fashion_mlp: P=2 stages x D=1 replica" || fail "header: $(head -1 "$tmp/p2")"
head -1 "$tmp/p2" | grep -q "M=4 micro-batches of 32 " || fail "micro-batch of 128 / 4 = 32 not in the header"
head -1 "$tmp/p2" | grep -q "schedule 1f1b, predicted bubble 20.0%" || fail "bubble (P-1)/(M+P-1) = 20.0% not in the header"
[ "$(grep -c '^[0-9] ' "$tmp/p2")" -eq 2 ] || fail "expected 2 stage rows"
grep -q '^0 .*fc1' "$tmp/p2" && grep -q '^1 .*loss' "$tmp/p2" || fail "fc1 on stage 0 and loss on stage 1"
# every layer once; parameters add up to fashion_mlp's 1,863,690
for layer in fc1 fc2 out loss; do
    [ "$(grep '^[0-9] ' "$tmp/p2" | grep -cw "$layer")" -eq 1 ] || fail "layer $layer not on exactly one stage"
done
grep '^total ' "$tmp/p2" | grep -q '4 layers  *1863690 ' || fail "totals line: $(grep '^total' "$tmp/p2")"
awk '/^[0-9] / { p += $(NF - 6) } END { exit p != 1863690 }' "$tmp/p2" || fail "stage parameters do not add up"
# recompute: one micro-batch of activations instead of one per micro-batch in flight
# (1f1b stage 0 holds 2 of 4): its column is below the plain one there
awk '/^0 / { exit !($(NF - 3) < $(NF - 4)) }' "$tmp/p2" || fail "recomp MiB not below act MiB on stage 0"

"$PIPENET" plan "$model" --stages 4 --micro-batches 8 --schedule 1f1b >"$tmp/p4" 2>&1 ||
    { cat "$tmp/p4"; fail "plan --stages 4 1f1b exited non-zero"; }
grep -q "schedule 1f1b, predicted bubble 27.3%" "$tmp/p4" || fail "1f1b P=4 M=8 bubble 3/11: $(head -1 "$tmp/p4")"
[ "$(grep -c '^[0-9] ' "$tmp/p4")" -eq 4 ] || fail "expected 4 stage rows"
"$PIPENET" plan --help | grep -q "usage: pipenet plan" || fail "--help"
"$PIPENET" --help | grep -q "^  plan " || fail "plan is not listed in pipenet --help"

# errors: 1 with a message naming the culprit, 2 for misuse
"$PIPENET" plan "$model" --stages 9 >"$tmp/e1" 2>&1; [ $? -eq 1 ] || fail "--stages 9 accepted"
grep -q "pipenet: error: .*fashion_mlp.json: 4 layers cannot fill 9 stages" "$tmp/e1" || fail "--stages 9 message: $(cat "$tmp/e1")"
"$PIPENET" plan "$model" --stages 2 --schedule zigzag >"$tmp/e2" 2>&1; [ $? -eq 2 ] || fail "bad --schedule accepted"
# (that it lists every schedule is test_choices', which enumerates the table)
grep -q "pipenet: error: --schedule: expected .*, got 'zigzag'" "$tmp/e2" || fail "--schedule message: $(cat "$tmp/e2")"
"$PIPENET" plan "$model" --stages 2 --micro-batches 3 >"$tmp/e3" 2>&1; [ $? -eq 1 ] || fail "128 / 3 accepted"
grep -q "pipenet: error: the batch 128 (train.batch in .*fashion_mlp.json) does not split into 1 replica x 3 micro-batches" "$tmp/e3" || fail "micro-batch message: $(cat "$tmp/e3")"
"$PIPENET" plan "$model" --stages 2 --batch 100 --replicas 2 --micro-batches 4 >"$tmp/e4" 2>&1; [ $? -eq 1 ] || fail "100 / 8 accepted"
grep -q "pipenet: error: the batch 100 (--batch)" "$tmp/e4" || fail "--batch message: $(cat "$tmp/e4")"
printf '{"inputs": {"x": {"dataset": "f", "size": 784, "seq": 1073741824}},\n "layers": [{"name": "a", "type": "fc", "input": "x", "size": 3}]}\n' >"$tmp/seq.json"
"$PIPENET" plan "$tmp/seq.json" >"$tmp/e5" 2>&1; [ $? -eq 1 ] || fail "a sample of 2^30 rows of 784 accepted"
grep -q "pipenet: error: .*seq.json: inputs.x: expected at most 2147483647 values per sample, found 1073741824 rows of 784" "$tmp/e5" ||
    fail "sample size message: $(cat "$tmp/e5")"
sed 's/"size": [0-9]*/"size": 1/g' "$tmp/seq.json" >"$tmp/rows.json"
"$PIPENET" plan "$tmp/rows.json" --batch 4 >"$tmp/e6" 2>&1; [ $? -eq 1 ] || fail "4 x 2^30 rows accepted"
grep -q "pipenet: error: .*rows.json: inputs.x: 4 samples of 1073741824 rows make 4294967296 rows, more than a matrix holds" "$tmp/e6" ||
    fail "rows message: $(cat "$tmp/e6")"
# models/char_gpt.json's 4 repeated blocks: their 28 copies are placed like any layer
"$PIPENET" plan "$here/models/char_gpt.json" --stages 4 >"$tmp/gpt" 2>&1 ||
    { cat "$tmp/gpt"; fail "plan char_gpt --stages 4 exited non-zero"; }
grep '^total ' "$tmp/gpt" | grep -q ' 32 layers  *867328 ' ||
    fail "char_gpt totals (32 layers, 867328 parameters): $(grep '^total' "$tmp/gpt")"
[ "$(grep -c '^[0-9] ' "$tmp/gpt")" -eq 4 ] || fail "char_gpt: expected 4 stage rows"
grep -q '^0  *embed\.\.' "$tmp/gpt" && grep -q '^3 .*\.\.loss ' "$tmp/gpt" ||
    fail "char_gpt: embed first, loss last: $(cat "$tmp/gpt")"

# --measure: every stage timed and predicted, the step line, --json parses, the
# times file round-trips into plan and train's placement; bad inputs refused
"$PIPENET" plan "$model" --stages 2 --micro-batches 4 --measure --repeat 3 --save-times "$tmp/t.json" >"$tmp/m2" 2>&1 ||
    { cat "$tmp/m2"; fail "plan --measure exited non-zero"; }
cat "$tmp/m2"
awk '/^measured:/ { on = 1; next } on && /^[0-9] / { n++ } END { exit n != 2 }' "$tmp/m2" ||
    fail "--measure: expected 2 measured stage rows"
grep -q '^predicted step: .* ms = pipeline with updates .* ms; bubble .*%; .* samples/s$' "$tmp/m2" ||
    fail "--measure: no step prediction: $(cat "$tmp/m2")"
grep -q "^  the schedule's lists run .* (M + P - 1 = 5 slots of the slowest, stage [01]'s .* ms, would take .* ms)$" "$tmp/m2" ||
    fail "--measure: no line on the simulated schedule: $(cat "$tmp/m2")"
grep -q '^link: not measured' "$tmp/m2" || fail "--measure on one rank should say the link was not measured"
# under mpirun: the link between ranks 0 and 1 is measured, and rank 0 alone prints
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 # CI runs as root
# and how the 2 ranks share the machine (a step alone and both at once)
timeout 300 mpirun --oversubscribe -np 2 "$PIPENET" plan "$model" --stages 2 --micro-batches 4 --measure --repeat 3 \
    --save-times "$tmp/t2.json" >"$tmp/mpi2" 2>&1 ||
    { cat "$tmp/mpi2"; fail "mpirun -np 2 plan --measure exited non-zero"; }
grep -q '^link (ranks 0-1): .* us + .* GB/s$' "$tmp/mpi2" || fail "no link line: $(cat "$tmp/mpi2")"
grep -q '^sharing: 2 ranks training at once each took .*x their time alone$' "$tmp/mpi2" ||
    fail "no sharing line: $(cat "$tmp/mpi2")"
[ "$(grep -c '^predicted step' "$tmp/mpi2")" -eq 1 ] || fail "expected one report, from rank 0: $(cat "$tmp/mpi2")"
"$PIPENET" plan "$model" --stages 2 --micro-batches 4 --layer-times "$tmp/t.json" --json >"$tmp/j2" 2>&1 ||
    { cat "$tmp/j2"; fail "plan --layer-times --json exited non-zero"; }
python3 - "$tmp/j2" "$tmp/t.json" <<'PY' || fail "--json: $(cat "$tmp/j2")"
import json, sys
p = json.load(open(sys.argv[1])); t = json.load(open(sys.argv[2]))
assert p["model"] == "fashion_mlp" and p["stages"] == 2 and p["measured"], p
assert [s["stage"] for s in p["stage"]] == [0, 1]
assert sum(len(s["layers"]) for s in p["stage"]) == 4
assert sum(s["params"] for s in p["stage"]) == 1863690
for s in p["stage"]:
    for k in ("forward_s", "backward_s", "link_s", "optimizer_s", "param_bytes", "slot_bytes", "activation_bytes"):
        assert s[k] >= 0, (k, s)
pr = p["prediction"]
slot = max(s["forward_s"] + s["backward_s"] for s in p["stage"])
# the lists' run: at least the slowest stage's M passes, at most the textbook
# (M + P - 1) slots of it plus the slowest update
assert abs(pr["formula_s"] - 5 * slot) <= 1e-9 + 1e-6 * slot, pr
update = max(s["optimizer_s"] for s in p["stage"])
assert 4 * slot <= pr["pipeline_s"] <= pr["formula_s"] + update + 1e-9, pr
assert pr["step_s"] >= pr["pipeline_s"] and 0 <= pr["bubble"] < 1, pr
assert not pr["sharing_measured"] and not pr["oversubscribed"], pr
assert t["format"] == "pipenet layer times" and set(t["layers"]) == {"fc1", "fc2", "out", "loss"}
PY
"$PIPENET" plan "$model" --stages 2 --json | python3 -c 'import json, sys; p = json.load(sys.stdin); assert not p["measured"] and "prediction" not in p' ||
    fail "--json without --measure"
# --json in bf16 says the bytes the text does: the links' and the planner's slots
# halved (bf16), the work area beside them, and the precision by name
for pr in fp32 bf16; do
    "$PIPENET" plan "$model" --stages 2 --micro-batches 4 --precision $pr --json >"$tmp/p_$pr" ||
        fail "plan --precision $pr --json exited non-zero"
done
python3 - "$tmp/p_fp32" "$tmp/p_bf16" <<'PY' || fail "--json --precision bf16: $(cat "$tmp/p_bf16")"
import json, sys
f, b = (json.load(open(a)) for a in sys.argv[1:3])
assert f["precision"] == "fp32" and b["precision"] == "bf16", (f["precision"], b["precision"])
for x, y in zip(f["stage"], b["stage"]):
    assert y["send_bytes"] * 2 == x["send_bytes"] and y["recv_bytes"] * 2 == x["recv_bytes"], (x, y)
    assert y["arg_bytes_own"] == x["arg_bytes_own"], (x, y)  # own blocks stay fp32
    assert y["arg_bytes_shared"] <= x["arg_bytes_shared"], (x, y)
    assert x["arg_bytes_work"] == 0 and y["arg_bytes_work"] >= 0, (x, y)
# stage 0 (fc1 alone, its output sent) plans nothing; stage 1 (fc2, out, loss) does
x, y = f["stage"][1], b["stage"][1]
assert y["arg_bytes_shared"] < x["arg_bytes_shared"] and y["arg_bytes_work"] > 0, (x, y)
PY
# the sharing measured with 2 ranks is kept in the file and used for 2-rank layouts
# only; 4 ranks on this machine's cores without it take turns by their count alone
for stages in 2 4; do
    "$PIPENET" plan "$model" --stages $stages --micro-batches 4 --layer-times "$tmp/t2.json" --json >"$tmp/j$stages" 2>&1 ||
        { cat "$tmp/j$stages"; fail "plan --stages $stages --layer-times t2.json exited non-zero"; }
done
python3 - "$tmp/t2.json" "$tmp/j2" "$tmp/j4" "$(nproc)" <<'PY' || fail "sharing: $(cat "$tmp/t2.json")"
import json, sys
t = json.load(open(sys.argv[1])); two = json.load(open(sys.argv[2]))["prediction"]
four = json.load(open(sys.argv[3]))["prediction"]; cores = int(sys.argv[4])
sh = t["sharing"]
assert sh["ranks"] == 2 and sh["alone_step_s"] > 0 and sh["shared_step_s"] > 0, sh
assert two["sharing_measured"] and abs(two["sharing_slowdown"] - max(1, sh["shared_step_s"] / sh["alone_step_s"])) < 1e-6, two
assert not four["sharing_measured"] and four["oversubscribed"] == (4 > cores), four
assert abs(four["sharing_slowdown"] - max(1, 4 / cores)) < 1e-9, four
PY
# times that make fc1 and out heavy and fc2 light move the cut to fc2 | out (the FLOP
# estimate cuts fc1 | fc2)
python3 - "$tmp/t.json" "$tmp/heavy.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
for name, (f, b) in {"fc1": (1.0, 1.0), "fc2": (0.001, 0.001), "out": (1.0, 1.0), "loss": (0.001, 0.001)}.items():
    t["layers"][name] = {"forward_s": f, "backward_s": b}
json.dump(t, open(sys.argv[2], "w"))
PY
"$PIPENET" plan "$model" --stages 2 --layer-times "$tmp/heavy.json" >"$tmp/h2" 2>&1 || { cat "$tmp/h2"; fail "plan --layer-times heavy"; }
grep -q '^0  *fc1, fc2 ' "$tmp/h2" || fail "measured times did not move the cut to fc2|out: $(cat "$tmp/h2")"
# times that are all zero (a file written by hand): the slots of the textbook figure
# are still M + P - 1, and no rate is made up
cat >"$tmp/zero.json" <<'EOF'
{"format": "pipenet layer times", "version": 1, "model": "fashion_mlp", "micro_batch": 32,
 "layers": {"fc1": {"forward_s": 0, "backward_s": 0}, "fc2": {"forward_s": 0, "backward_s": 0},
            "out": {"forward_s": 0, "backward_s": 0}, "loss": {"forward_s": 0, "backward_s": 0}}}
EOF
"$PIPENET" plan "$model" --stages 2 --micro-batches 4 --layer-times "$tmp/zero.json" >"$tmp/z2" 2>&1 ||
    { cat "$tmp/z2"; fail "plan with all-zero layer times exited non-zero"; }
grep -q "(M + P - 1 = 5 slots of the slowest, stage 0's 0.000 ms, would take 0.000 ms)$" "$tmp/z2" ||
    fail "zero times: not 5 slots: $(cat "$tmp/z2")"
grep -q "^predicted step: 0.000 ms .*every time measured is 0: no bubble or samples/s to predict$" "$tmp/z2" ||
    fail "zero times: a rate or bubble made up: $(cat "$tmp/z2")"
grep -q "^fashion_mlp: BLAS threads not recorded, steps not recorded;" "$tmp/z2" ||
    fail "zero times: the file's missing threads and repetitions shown as 0: $(cat "$tmp/z2")"
# refusals
"$PIPENET" plan "$model" --measure --layer-times "$tmp/t.json" >"$tmp/e7" 2>&1; [ $? -eq 2 ] || fail "--measure with --layer-times accepted"
grep -q "pipenet: error: --measure and --layer-times: give one" "$tmp/e7" || fail "message: $(cat "$tmp/e7")"
"$PIPENET" plan "$model" --save-times "$tmp/x.json" >"$tmp/e8" 2>&1; [ $? -eq 2 ] || fail "--save-times without --measure accepted"
grep -q "pipenet: error: --save-times, --threads and --repeat need --measure" "$tmp/e8" || fail "message: $(cat "$tmp/e8")"
"$PIPENET" plan "$model" --measure --repeat 0 >"$tmp/e9" 2>&1; [ $? -eq 2 ] || fail "--repeat 0 accepted"
"$PIPENET" plan "$model" --layer-times "$tmp/missing.json" >"$tmp/e10" 2>&1; [ $? -eq 1 ] || fail "a missing times file accepted"
grep -q "pipenet: error: .*missing.json: cannot read layer times" "$tmp/e10" || fail "message: $(cat "$tmp/e10")"
"$PIPENET" plan "$here/models/char_gpt.json" --stages 2 --layer-times "$tmp/t.json" >"$tmp/e11" 2>&1; [ $? -eq 1 ] ||
    fail "fashion_mlp's times accepted for char_gpt"
grep -q "pipenet: error: .*t.json: layers: expected only layers of char_gpt" "$tmp/e11" || fail "message: $(cat "$tmp/e11")"
python3 -c 'import json, sys; t = json.load(open(sys.argv[1])); del t["layers"]["fc2"]; json.dump(t, open(sys.argv[2], "w"))' "$tmp/t.json" "$tmp/short.json"
"$PIPENET" plan "$model" --stages 2 --layer-times "$tmp/short.json" >"$tmp/e12" 2>&1; [ $? -eq 1 ] || fail "a file without fc2 accepted"
grep -q "pipenet: error: .*short.json: layers.fc2: expected a time for every layer" "$tmp/e12" || fail "message: $(cat "$tmp/e12")"
"$PIPENET" train --help | grep -q -- "--layer-times FILE" || fail "train --help lacks --layer-times"
"$PIPENET" plan --help | grep -q -- "--measure" || fail "plan --help lacks --measure"

"$PIPENET" plan >/dev/null 2>&1; [ $? -eq 2 ] || fail "no model accepted"
"$PIPENET" plan "$model" --stages 0 >/dev/null 2>&1; [ $? -eq 2 ] || fail "--stages 0 accepted"
echo "PASS: plan"

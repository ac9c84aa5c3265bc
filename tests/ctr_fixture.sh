# Sourced by the click-through tests (test_ctr.sh, test_cuda_ctr.sh) after
# script_fixture.sh: $H5 (the h5_fixture program), a planted dataset and the model.
need_h5_fixture

# ctr_set NAME ROWS FIRST: $tmp/NAME.h5 (fields int32 [ROWS, 3], clicks int32
# [ROWS]) and $tmp/NAME.txt ("f0 f1 f2 click" a line) of rows FIRST.. of the planted
# data: 3 fields of 4 values (ids 4f + v), a click where the first field's value is
# 2 or 3 or the last two agree, every 13th label flipped.
ctr_set() {
    awk -v n="$2" -v first="$3" 'BEGIN { for (i = first; i < first + n; i++) {
        a = (i * 7 + 3) % 4; b = (i * 5 + 1) % 4; c = int(i / 3) % 4
        y = (a >= 2 || b == c) ? 1 : 0
        if (i % 13 == 0) y = 1 - y
        printf "%d %d %d %d\n", a, 4 + b, 8 + c, y } }' >"$tmp/$1.txt"
    # shellcheck disable=SC2046
    "$H5" typed "$tmp/$1.h5" fields int32 "${2}x3" $(awk '{ print $1, $2, $3 }' "$tmp/$1.txt") &&
        "$H5" typed "$tmp/$1.h5" clicks int32 "$2" $(awk '{ print $4 }' "$tmp/$1.txt") ||
        fail "write $1.h5"
}

# ctr_model FILE STEPS: an embedding of the 3 ids; fm over them, added to a deep part
# (flatten, two stacked cross layers, inner_product beside them, an fc to one logit);
# sigmoid_xent against the clicks; batch 32, adam
ctr_model() {
    cat >"$1" <<EOF
{"name": "ctr",
 "inputs": {"f": {"dataset": "fields", "ids": true, "seq": 3},
            "y": {"dataset": "clicks", "ids": true}},
 "layers": [
   {"name": "emb", "type": "embedding", "input": "f", "vocab": 12, "size": 4},
   {"name": "fm", "type": "fm", "input": "emb"},
   {"name": "flat", "type": "flatten", "input": "emb"},
   {"name": "x1", "type": "cross", "input": "flat"},
   {"name": "x2", "type": "cross", "input": ["flat", "x1"]},
   {"name": "pairs", "type": "inner_product", "input": "emb"},
   {"name": "both", "type": "concat", "input": ["x2", "pairs"]},
   {"name": "deep", "type": "fc", "input": "both", "size": 1},
   {"name": "logit", "type": "add", "input": ["fm", "deep"]},
   {"name": "loss", "type": "sigmoid_xent", "input": ["logit", "y"]}],
 "train": {"batch": 32, "steps": $2, "seed": 7, "optimizer": {"type": "adam", "lr": 0.05}}}
EOF
}

# pair_auc Z Y: the AUC of the scores in file Z (one a line) against the 0/1 labels in
# file Y, counted pair by pair (ties half), to 4 decimals
pair_auc() {
    paste "$1" "$2" | awk '{ z[NR] = $1; y[NR] = $2 } END {
        for (i = 1; i <= NR; i++) for (j = 1; j <= NR; j++) if (y[i] == 1 && y[j] == 0) {
            n++; if (z[i] > z[j]) r++; else if (z[i] == z[j]) r += 0.5 }
        printf "%.4f", r / n }'
}

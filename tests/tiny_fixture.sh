# Sourced by the shell tests that train a tiny model on tests/h5_fixture's files,
# after script_fixture.sh and in the directory the runs write to: $fix (the
# h5_fixture program), tiny_model, and train / hash_of / trained / refused over runs
# of 4 steps whose output is NAME.out.
fix=${TESTS_BUILDDIR:-$(cd "$(dirname "$0")" && pwd)}/h5_fixture
[ -x "$fix" ] || fail "no $fix (make check builds it)"

# tiny_model FILE: a softmax classifier of `h5_fixture dataset`'s files (features
# [N, 4], labels i % 3)
tiny_model() {
    cat >"$1" <<EOF
{"name": "tiny", "inputs": {"x": {"dataset": "features", "size": 4},
                            "y": {"dataset": "labels", "ids": true}},
 "layers": [{"name": "out", "type": "fc", "input": "x", "size": 3},
            {"name": "loss", "type": "softmax_xent", "input": ["out", "y"]}],
 "train": {"batch": 8, "seed": 1, "optimizer": {"type": "sgd", "lr": 0.1}}}
EOF
}
# train NAME MODEL FILE [options]: 4 steps of MODEL on FILE, output in NAME.out,
# status in rc
train() {
    name=$1 m=$2 data=$3; shift 3
    "$PIPENET" train "$m" --data "$data" --eval= --steps 4 --threads 1 --log-every 1000 "$@" \
        >"$name.out" 2>&1
    rc=$?
}
hash_of() { grep -o 'parameter hash after 4 steps: [0-9a-f]*' "$1.out"; }
# trained NAME [HASH]: the run trained (to HASH when given)
trained() {
    [ "$rc" -eq 0 ] || { cat "$1.out"; fail "$1: exit $rc"; }
    [ $# -eq 1 ] || [ "$(hash_of "$1")" = "$2" ] || { cat "$1.out"; fail "$1: not $2"; }
}
# refused NAME TEXT...: the run exited 1 before training, saying each TEXT
refused() {
    name=$1; shift
    [ "$rc" -eq 1 ] || { cat "$name.out"; fail "$name: exit $rc, expected 1 (refused)"; }
    ! grep -q "parameter hash" "$name.out" || { cat "$name.out"; fail "$name: it trained"; }
    for want in "$@"; do
        grep -qF -- "$want" "$name.out" || { cat "$name.out"; fail "$name: no '$want'"; }
    done
}

#!/bin/sh
# A CSR group as scipy.sparse and AnnData write it (float64 'data' in place of
# 'values', int32 indices and indptr, shape as an int64 attribute, AnnData's
# encoding attributes; int64 labels) reads as tests/h5_fixture's own file of the
# same matrix: a model without fields trains to the same --deterministic hash on
# both. Skips (77) without a python3 that has scipy, h5py and numpy.
set -u
. "$(dirname "$0")/script_fixture.sh"
PIPENET=$(cd "$(dirname "$PIPENET")" && pwd)/$(basename "$PIPENET")
. "$(dirname "$0")/tiny_fixture.sh"
PY=
for p in python3 /usr/bin/python3; do
    if "$p" -c 'import scipy.sparse, h5py, numpy' 2>/dev/null; then PY=$p; break; fi
done
[ -n "$PY" ] || { echo "SKIP: no python3 with scipy, h5py and numpy"; exit 77; }
cd "$tmp" || exit 1

"$fix" csr fixture.h5 features 300 500 0 || fail "h5_fixture csr"
"$PY" - <<'PY' || fail "scipy could not write its file"
import h5py, numpy as np, scipy.sparse as sp
with h5py.File("fixture.h5", "r") as f:
    g = f["features"]
    m = sp.csr_matrix((g["values"][:].astype(np.float64), g["indices"][:], g["indptr"][:]),
                      shape=tuple(g.attrs["shape"]))
    labels = f["labels"][:].astype(np.int64)
with h5py.File("scipy.h5", "w") as f:
    g = f.create_group("features")
    g.attrs["encoding-type"] = "csr_matrix"
    g.attrs["encoding-version"] = "0.1.0"
    g.attrs["shape"] = np.array(m.shape, dtype=np.int64)
    g["data"] = m.data
    g["indices"] = m.indices.astype(np.int32)
    g["indptr"] = m.indptr.astype(np.int32)
    f["labels"] = labels
PY
cat >m.json <<'JSON'
{"name": "bag", "inputs": {"x": {"dataset": "features", "sparse": true, "columns": 500},
                           "y": {"dataset": "labels", "ids": true}},
 "layers": [{"name": "emb", "type": "embedding_bag", "input": "x", "rows": 500, "size": 4},
            {"name": "out", "type": "fc", "input": "emb", "size": 2},
            {"name": "loss", "type": "softmax_xent", "input": ["out", "y"]}],
 "train": {"batch": 10, "seed": 3, "optimizer": {"type": "sgd", "lr": 0.5}}}
JSON
train fixture m.json fixture.h5 --deterministic --data-cache 0
trained fixture
train scipy m.json scipy.h5 --deterministic --data-cache 0
trained scipy "$(hash_of fixture)"
exit 0

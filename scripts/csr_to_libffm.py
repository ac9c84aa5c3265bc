#!/usr/bin/env python3
"""Write the first N samples of a pipenet CSR dataset file (train.h5 of `pipenet
import synthetic-ctr` or `import libsvm`) as libffm text, one sample a line:
`label field:index:value ...` (fields and indices from 0), the form `pipenet import
libsvm` reads back (docs/sparse.md, "From a libsvm file to a trained, exported
model"). Needs h5py and numpy.

usage: csr_to_libffm.py FILE.h5 N OUT.ffm"""
import sys

import h5py
import numpy as np


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    path, n, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    with h5py.File(path, "r") as f:
        g = f["features"]
        n = min(n, int(g.attrs["shape"][0]))
        indptr = g["indptr"][: n + 1]
        nnz = int(indptr[-1])
        indices = g["indices"][:nnz]
        fields = g["fields"][:nnz] if "fields" in g else np.zeros(nnz, dtype=np.int32)
        values = g["values"][:nnz] if "values" in g else None
        labels = f["labels"][:n]
    with open(out, "w") as w:
        for i in range(n):
            lo, hi = indptr[i], indptr[i + 1]
            if values is None:
                feats = ["%d:%d:1" % (fi, ix) for fi, ix in zip(fields[lo:hi], indices[lo:hi])]
            else:
                feats = ["%d:%d:%.9g" % t for t in zip(fields[lo:hi], indices[lo:hi], values[lo:hi])]
            w.write("%d %s\n" % (labels[i], " ".join(feats)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

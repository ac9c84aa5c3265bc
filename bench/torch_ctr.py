#!/usr/bin/env python3
"""DeepFM in PyTorch on a pipenet CSR dataset file, for bench/bench_ctr.sh: the model
of models/deepfm.json layer for layer (one shared table of field embeddings summed
per sample and field, nn.EmbeddingBag(mode='sum', sparse=True); the FM term; a wide
part, a one-column EmbeddingBag plus a bias; a DNN over the flattened embeddings,
dropout after each hidden layer; binary cross-entropy on the summed logit), SparseAdam for the two tables and Adam
for the rest. Batches are cut from the file's rows in order and prepared before the
clock starts (the bags' offsets and weights), so the time is the step alone.

Prints one line of key=value: samples_per_s (over the median step), step_ms, the
threads, params and the last loss."""
import argparse
import os
import statistics
import sys
import time


def threads_arg():
    """--threads, read before torch loads: Debian's torch does its GEMMs in the system
    BLAS (OpenBLAS, pthreads), which torch.set_num_threads does not reach; without
    OPENBLAS_NUM_THREADS it takes every core whatever --threads says (and 2 OpenMP
    threads each calling a 2-thread OpenBLAS ran 10x slower on 2 cores)."""
    for i, a in enumerate(sys.argv):
        if a == "--threads" and i + 1 < len(sys.argv):
            return sys.argv[i + 1]
        if a.startswith("--threads="):
            return a.split("=", 1)[1]
    return "1"


os.environ["OPENBLAS_NUM_THREADS"] = os.environ["OMP_NUM_THREADS"] = threads_arg()
# libgomp's threads spin while they wait; on cores shared with other work a 2-thread
# step took 100-666 ms instead of 45 (measured, 2 cores, load about 3): passive
# waiting unless the caller says otherwise
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import h5py  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402


def load(path, rows_wanted):
    with h5py.File(path, "r") as f:
        g = f["features"]
        indptr = g["indptr"][: rows_wanted + 1].astype(np.int64)
        nnz = int(indptr[-1])
        indices = g["indices"][:nnz].astype(np.int64)
        values = (g["values"][:nnz] if "values" in g else np.ones(nnz)).astype(np.float32)
        fields = g["fields"][:nnz].astype(np.int64)
        columns = int(g.attrs["shape"][1])
        num_fields = int(g.attrs["num_fields"])
        labels = f["labels"][: rows_wanted].astype(np.float32)
    return indptr, indices, values, fields, labels, columns, num_fields


def batches(data, batch, rows):
    """Each batch as the tensors the model takes: a bag per (sample, field) for the
    embeddings, a bag per sample for the wide part."""
    indptr, indices, values, fields, labels, columns, num_fields = data
    out = []
    for b0 in range(0, len(labels) - batch + 1, batch):
        lo, hi = indptr[b0], indptr[b0 + batch]
        sample = np.repeat(np.arange(batch), np.diff(indptr[b0:b0 + batch + 1]))
        bag = sample * num_fields + fields[lo:hi]
        order = np.argsort(bag, kind="stable")
        ids = indices[lo:hi][order] % rows
        counts = np.bincount(bag, minlength=batch * num_fields)
        offsets = np.concatenate(([0], np.cumsum(counts)[:-1]))
        wide_offsets = indptr[b0:b0 + batch] - lo
        out.append((torch.from_numpy(ids), torch.from_numpy(offsets),
                    torch.from_numpy(values[lo:hi][order]),
                    torch.from_numpy(indices[lo:hi] % rows),
                    torch.from_numpy(wide_offsets), torch.from_numpy(values[lo:hi]),
                    torch.from_numpy(labels[b0:b0 + batch])))
    return out


class DeepFM(nn.Module):
    def __init__(self, rows, fields, k, hidden, layers, dropout):
        super().__init__()
        self.fields, self.k = fields, k
        self.table = nn.EmbeddingBag(rows, k, mode="sum", sparse=True)
        self.wide = nn.EmbeddingBag(rows, 1, mode="sum", sparse=True)
        self.wide_b = nn.Parameter(torch.zeros(1))
        nn.init.normal_(self.table.weight, std=0.02)
        nn.init.normal_(self.wide.weight, std=0.01)
        dims = [fields * k] + [hidden] * layers
        mlp = []
        for a, b in zip(dims, dims[1:]):
            mlp += [nn.Linear(a, b), nn.ReLU(), nn.Dropout(dropout)]
        mlp.append(nn.Linear(dims[-1], 1))
        self.mlp = nn.Sequential(*mlp)
        # pipenet's fc init (docs/layers.md): w uniform in +-sqrt(6/in) before a relu,
        # +-sqrt(6/(in+size)) otherwise; b zeros (torch's default differs)
        for i, m in enumerate(self.mlp):
            if isinstance(m, nn.Linear):
                relu = isinstance(self.mlp[i + 1] if i + 1 < len(self.mlp) else None, nn.ReLU)
                bound = (6.0 / (m.in_features if relu else m.in_features + m.out_features)) ** 0.5
                nn.init.uniform_(m.weight, -bound, bound)
                nn.init.zeros_(m.bias)

    def forward(self, ids, offsets, weights, wide_ids, wide_offsets, wide_weights):
        v = self.table(ids, offsets, per_sample_weights=weights).view(-1, self.fields, self.k)
        s = v.sum(1)
        fm = 0.5 * (s * s - (v * v).sum(1)).sum(1)
        wide = self.wide(wide_ids, wide_offsets, per_sample_weights=wide_weights)[:, 0]
        deep = self.mlp(v.reshape(v.shape[0], -1))[:, 0]
        return wide + self.wide_b + fm + deep


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True, help="a pipenet CSR dataset file (train.h5)")
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=30, help="timed steps")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rows", type=int, default=0, help="table rows (default: columns)")
    ap.add_argument("--size", type=int, default=16, help="embedding width")
    ap.add_argument("--hidden", type=int, default=400)
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--dropout", type=float, default=0.3, help="after each hidden layer")
    ap.add_argument("--lr", type=float, default=0.001)
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(1)
    need = args.batch * (args.steps + args.warmup)
    data = load(args.data, need)
    columns, fields = data[5], data[6]
    rows = args.rows or columns
    if len(data[4]) < need:
        sys.exit("%s: %d samples, %d needed" % (args.data, len(data[4]), need))
    work = batches(data, args.batch, rows)
    model = DeepFM(rows, fields, args.size, args.hidden, args.layers, args.dropout)
    sparse = [model.table.weight, model.wide.weight]
    dense = [p for p in model.parameters() if all(p is not q for q in sparse)]
    opt_sparse = torch.optim.SparseAdam(sparse, lr=args.lr)
    opt_dense = torch.optim.Adam(dense, lr=args.lr)
    loss_fn = nn.BCEWithLogitsLoss()
    times = []
    for i, b in enumerate(work[: args.warmup + args.steps]):
        t0 = time.perf_counter()
        opt_sparse.zero_grad()
        opt_dense.zero_grad()
        loss = loss_fn(model(*b[:6]), b[6])
        loss.backward()
        opt_sparse.step()
        opt_dense.step()
        t1 = time.perf_counter()
        if i >= args.warmup:
            times.append(t1 - t0)
    step = statistics.median(times)
    params = sum(p.numel() for p in model.parameters())
    print("samples_per_s=%.0f step_ms=%.3f threads=%d batch=%d rows=%d params=%d loss=%.4f "
          "torch=%s" % (args.batch / step, 1000 * step, args.threads, args.batch, rows, params,
                        loss.item(), torch.__version__))
    return 0


if __name__ == "__main__":
    sys.exit(main())

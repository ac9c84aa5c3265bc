#!/usr/bin/env python3
"""Writes one of scikit-learn's bundled datasets as pipenet dataset files and prints
a scikit-learn baseline on the same split (docs/own-data.md walks through it).

  scripts/sklearn_to_h5.py digits   --out data/digits     # classification
  scripts/sklearn_to_h5.py diabetes --out data/diabetes   # regression

Writes OUT/train.h5 and OUT/test.h5 (a fixed 75/25 split) straight from numpy, in
numpy's own types: float64 features, int64 labels, float64 targets of shape [N].
pipenet reads them as they are, converting on read. Needs Debian's python3-sklearn
and python3-h5py; nothing is downloaded (both datasets ship with scikit-learn).
"""
import argparse
import os
import sys

import h5py
import numpy as np
from sklearn import datasets, linear_model, model_selection, neural_network


def load(name):
    """Features, targets and the dataset names they get in the files."""
    if name == "digits":
        d = datasets.load_digits()
        # 8x8 pixels in 0..16: scaled to [0, 1], as a network wants them
        return d.data / 16.0, d.target, "labels"
    d = datasets.load_diabetes()  # ten features, already centred and scaled
    return d.data, d.target, "target"


def baseline(name, x_train, y_train, x_test, y_test):
    """The number pipenet's model is compared with in docs/own-data.md."""
    if name == "digits":
        mlp = neural_network.MLPClassifier(hidden_layer_sizes=(128,), max_iter=300,
                                           random_state=0)
        mlp.fit(x_train, y_train)
        return "scikit-learn MLPClassifier(128): test accuracy %.2f%%" % (
            100.0 * mlp.score(x_test, y_test))
    lin = linear_model.LinearRegression().fit(x_train, y_train)
    rmse = float(np.sqrt(np.mean((lin.predict(x_test) - y_test) ** 2)))
    return "scikit-learn LinearRegression: test RMSE %.2f" % rmse


def write(path, features, y, y_name, source):
    """One dataset file: the rows of features and y; nothing else is required."""
    tmp = path + ".tmp"
    with h5py.File(tmp, "w") as f:
        f["features"] = features
        f[y_name] = y
        f.attrs["source"] = source  # optional: shown by `pipenet inspect`
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("name", choices=["digits", "diabetes"])
    ap.add_argument("--out", required=True, help="directory for train.h5 and test.h5")
    ap.add_argument("--limit", type=int, default=0,
                    help="keep only the first N samples (a quick test)")
    args = ap.parse_args()

    x, y, y_name = load(args.name)
    if args.limit > 0:
        x, y = x[:args.limit], y[:args.limit]
    stratify = y if args.name == "digits" and args.limit == 0 else None
    x_train, x_test, y_train, y_test = model_selection.train_test_split(
        x, y, test_size=0.25, random_state=0, stratify=stratify)

    os.makedirs(args.out, exist_ok=True)
    source = "scikit-learn load_%s()" % args.name
    write(os.path.join(args.out, "train.h5"), x_train, y_train, y_name, source)
    write(os.path.join(args.out, "test.h5"), x_test, y_test, y_name, source)
    print("%s: train.h5 %s, test.h5 %s; features %s [N, %d], %s %s %s" % (
        args.out, len(x_train), len(x_test), x.dtype, x.shape[1], y_name, y.dtype,
        "[N]"))
    print(baseline(args.name, x_train, y_train, x_test, y_test))
    return 0


if __name__ == "__main__":
    sys.exit(main())

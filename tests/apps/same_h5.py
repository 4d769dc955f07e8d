#!/usr/bin/python3
"""Compares every HDF5 dataset of a reference file with the same dataset of another file, byte
for byte (dtype, shape and bytes; string datasets by their values): what the kill-and-resume
tests require of a resumed run's .h5 against an uninterrupted run's.

Usage: same_h5.py REFERENCE OTHER
Prints one line (how many datasets were compared, how many differ, the first five of those);
exit status 1 when one differs or is missing from OTHER, or REFERENCE has no dataset.
"""
import sys

import h5py

a, b = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r")
names = []
a.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)


def same(x, y):
    x, y = x[()], y[()]
    if getattr(x, "dtype", None) is not None and x.dtype.kind == "O":
        return x.shape == y.shape and list(x.ravel()) == list(y.ravel())
    return x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()


bad = [n for n in names if n not in b or not same(a[n], b[n])]
print(f"{sys.argv[2]}: {len(names)} HDF5 datasets compared, {len(bad)} differ {bad[:5]}")
sys.exit(1 if bad or not names else 0)

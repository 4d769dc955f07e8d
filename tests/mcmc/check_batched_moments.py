"""Checks a batched run's .h5 (through the Fortran API): every posterior variable named on
the command line is [32 chains, 2000 draws] with the given mean and standard deviation.

usage: check_batched_moments.py RUN.h5 MEAN SD NAME...

Tolerances: 0.06 on the mean and 0.05 on the sd, about 6 Monte Carlo standard errors of
these runs (32 chains x 2000 draws of a 2-D unit normal, ESS over 10,000; seed fixed).
"""
import sys

import h5py
import numpy as np

path, mean, sd = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
ok = True
with h5py.File(path, "r") as f:
    for name in sys.argv[4:]:
        v = np.asarray(f["posterior/" + name])
        m, s = v.mean(), v.std(ddof=1)
        good = v.shape == (32, 2000) and abs(m - mean) < 0.06 and abs(s - sd) < 0.05
        print(f"{name}: shape {v.shape}, mean {m:.4f} (target {mean}), sd {s:.4f} (target {sd}): "
              + ("ok" if good else "FAILED"))
        ok = ok and good
sys.exit(0 if ok else 1)

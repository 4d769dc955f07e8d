#!/usr/bin/env python3
"""ArviZ baseline for bench_diagnostics: the same deterministic draws, through az.summary.

Usage: arviz_baseline.py CHAINS DRAWS PARAMS REPS
Prints one JSON object: {"arviz": version, "seconds": [wall...], "cpu_seconds": [...],
"param0": {...}}.
Exits 77 when numpy or arviz cannot be imported (the benchmark then skips the baseline).
"""
import json
import math
import sys
import time
import warnings

warnings.filterwarnings("ignore")
try:
    import numpy as np
    import arviz as az
except Exception as exc:  # noqa: BLE001 - any import failure means "no baseline"
    print(f"arviz_baseline: skipped ({exc.__class__.__name__}: {exc})", file=sys.stderr)
    sys.exit(77)


def make_draws(chains, draws, params):
    """[chains, draws, params] AR(1) draws from one LCG per series, exactly as the C++ side."""
    a, c, mod = 1664525.0, 1013904223.0, 4294967296.0
    series = np.arange(params * chains, dtype=np.float64)
    s = 12345.0 + 1000.0 * series  # series index = p * chains + ch
    phi = np.repeat(0.5 + 0.045 * np.arange(params, dtype=np.float64), chains)
    x = np.zeros(params * chains)
    out = np.empty((draws, params * chains))
    for t in range(draws):
        s = np.fmod(a * s + c, mod)
        x = phi * x + ((s + 0.5) / mod - 0.5)
        out[t] = x
    # out[t, p * chains + ch] -> [chains, draws, params]
    return np.ascontiguousarray(out.reshape(draws, params, chains).transpose(2, 0, 1))


def main():
    chains, draws, params, reps = (int(v) for v in sys.argv[1:5])
    x = make_draws(chains, draws, params)
    idata = az.from_dict(posterior={"theta": x})
    times, cpu = [], []
    summary = None
    for _ in range(reps):
        t0, c0 = time.perf_counter(), time.process_time()
        summary = az.summary(idata, round_to="none")
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    row = summary.iloc[0]
    print(json.dumps({
        "arviz": az.__version__,
        "seconds": times,
        "cpu_seconds": cpu,
        "param0": {k: float(row[k]) for k in
                   ("mean", "sd", "mcse_mean", "mcse_sd", "ess_bulk", "ess_tail", "r_hat")},
        "x000": float(x[0, 0, 0]), "sum": float(math.fsum(x.ravel())),
    }))


if __name__ == "__main__":
    main()

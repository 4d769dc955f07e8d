#!/usr/bin/env python3
"""herd-diagnose against ArviZ's az.summary on one HDF5 file, timed interleaved (A B A B ...).

The file (64 chains x 100,000 draws x 10 variables by default: `posterior/theta`
[chains, draws, params], the AR(1) draws of arviz_baseline.py) is made once and reused.
Each pair runs, one after the other,
  A: `herd-diagnose FILE --json` as a process (read, diagnostics, output), and
  B: a fresh Python process that reads FILE with h5py and calls `az.summary` on it,
so machine load that comes and goes hits both alike; `--baseline-herd` adds a third
process C (an older herd-diagnose build) to every round. The ratio is ArviZ's time over
herd's, per pair and of the medians: ArviZ's `summary` call alone (not its import or
the file read) against herd-diagnose's whole process wall time, the comparison least
favourable to herd. Also prints process CPU times and the largest relative difference
between the two tools' mean, sd, ess_bulk, ess_tail, mcse_mean, mcse_sd and r_hat.

Run with a Python that has arviz and h5py (bench/peer-venv makes one):
  $(bench/peer-venv arviz h5py) bench/mcmc/herd_diagnose_vs_arviz.py \
      --herd-diagnose build/apps/herd-diagnose [--file /tmp/draws64.h5] [--pairs 3]
Prints a JSON object on stdout; progress on stderr.
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))

# The ArviZ side, run in its own process each round (as herd-diagnose is).
ARVIZ_CHILD = r"""
import json, sys, time, warnings
warnings.filterwarnings("ignore")
t0 = time.perf_counter()
import h5py, numpy as np, arviz as az
t1 = time.perf_counter()
with h5py.File(sys.argv[1], "r") as f:
    x = f["posterior/theta"][...]
data = az.from_dict({"posterior": {"theta": x}})
t2 = time.perf_counter()
c2 = time.process_time()
s = az.summary(data, round_to="none")
t3 = time.perf_counter()
c3 = time.process_time()
rows = {name: {k: float(s.loc[name, k]) for k in
               ("mean", "sd", "ess_bulk", "ess_tail", "mcse_mean", "mcse_sd", "r_hat")} for name in s.index}
print(json.dumps({"arviz": az.__version__, "import_s": t1 - t0, "read_s": t2 - t1, "summary_s": t3 - t2,
                  "summary_cpu_s": c3 - c2, "rows": rows}))
"""


def make_file(path, chains, draws, params):
    sys.path.insert(0, HERE)
    import h5py  # noqa: PLC0415 - only needed to make the file
    from arviz_baseline import make_draws  # noqa: PLC0415 - the same draws as bench_diagnostics

    x = make_draws(chains, draws, params)
    tmp = path + ".part"
    with h5py.File(tmp, "w") as f:
        f.create_dataset("posterior/theta", data=x)
    os.replace(tmp, path)


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_timed(cmd):
    """(wall seconds, CPU seconds of the process and its children, stdout)."""
    c0 = children_cpu()
    t0 = time.perf_counter()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, check=False)
    wall = time.perf_counter() - t0
    cpu = children_cpu() - c0
    if p.returncode != 0:
        sys.exit(f"herd_diagnose_vs_arviz: {' '.join(cmd)} failed ({p.returncode}): {p.stderr.strip()}")
    return wall, cpu, p.stdout


def stats(v):
    return {"min": min(v), "median": statistics.median(v), "max": max(v), "all": v}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--herd-diagnose", required=True, help="the herd-diagnose executable")
    ap.add_argument("--baseline-herd", help="an older herd-diagnose, timed in the same rounds")
    ap.add_argument("--file", default="/tmp/herd_bench_draws_64x100000x10.h5")
    ap.add_argument("--chains", type=int, default=64)
    ap.add_argument("--draws", type=int, default=100000)
    ap.add_argument("--params", type=int, default=10)
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0, help="herd-diagnose --threads (0: one per core)")
    a = ap.parse_args()

    if not os.path.exists(a.file):
        print(f"making {a.file} ({a.chains} x {a.draws} x {a.params})", file=sys.stderr)
        make_file(a.file, a.chains, a.draws, a.params)
    herd_cmd = [a.herd_diagnose, a.file, "--json", "--threads", str(a.threads)]
    base_cmd = [a.baseline_herd, a.file, "--json", "--threads", str(a.threads)] if a.baseline_herd else None
    az_cmd = [sys.executable, "-c", ARVIZ_CHILD, a.file]

    herd_wall, herd_cpu, base_wall, base_cpu = [], [], [], []
    az_summary, az_summary_cpu, az_wall, az_cpu = [], [], [], []
    herd_rows = az_rows = base_rows = None
    az_version = None
    for i in range(a.pairs):
        w, c, out = run_timed(herd_cmd)
        herd_wall.append(w)
        herd_cpu.append(c)
        herd_rows = json.loads(out)
        print(f"round {i + 1}: herd-diagnose {w:.2f} s wall, {c:.2f} s CPU", file=sys.stderr)
        w, c, out = run_timed(az_cmd)
        j = json.loads(out)
        az_wall.append(w)
        az_cpu.append(c)
        az_summary.append(j["summary_s"])
        az_summary_cpu.append(j["summary_cpu_s"])
        az_rows, az_version = j["rows"], j["arviz"]
        print(f"round {i + 1}: az.summary {j['summary_s']:.2f} s ({w:.2f} s process)", file=sys.stderr)
        if base_cmd:
            w, c, out = run_timed(base_cmd)
            base_wall.append(w)
            base_cpu.append(c)
            base_rows = json.loads(out)
            print(f"round {i + 1}: baseline herd-diagnose {w:.2f} s wall, {c:.2f} s CPU", file=sys.stderr)

    worst = {}
    for name, r in az_rows.items():
        h = dict(herd_rows[name], r_hat=herd_rows[name]["rhat"])
        for k, v in r.items():
            worst[k] = max(worst.get(k, 0.0), abs(h[k] - v) / abs(v))
    out = {
        "benchmark": "herd-diagnose vs az.summary, interleaved",
        "file": a.file,
        "shape": [a.chains, a.draws, a.params],
        "pairs": a.pairs,
        "threads": a.threads or os.cpu_count(),
        "cores": os.cpu_count(),
        "load_average_at_end": os.getloadavg(),
        "arviz": az_version,
        "herd_wall_s": stats(herd_wall),
        "herd_cpu_s": stats(herd_cpu),
        "arviz_summary_s": stats(az_summary),
        "arviz_summary_cpu_s": stats(az_summary_cpu),
        "arviz_process_wall_s": stats(az_wall),
        "arviz_process_cpu_s": stats(az_cpu),
        "ratio_per_pair": [s / h for s, h in zip(az_summary, herd_wall)],
        "ratio_median": statistics.median(az_summary) / statistics.median(herd_wall),
        "ratio_cpu_median": statistics.median(az_summary_cpu) / statistics.median(herd_cpu),
        "max_rel_diff_vs_arviz": worst,
    }
    if base_cmd:
        out["baseline_herd_wall_s"] = stats(base_wall)
        out["baseline_herd_cpu_s"] = stats(base_cpu)
        out["speedup_vs_baseline_per_round"] = [b / h for b, h in zip(base_wall, herd_wall)]
        out["baseline_same_output"] = base_rows == herd_rows
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Helpers of bench_vs_paradram.sh (herd against ParaMonte's ParaDRAM, whole run).

Subcommands:
  chain2txt KIND IN OUT   binary chain file -> ParaDRAM compact text chain (header
                          ProcessID,...,SampleWeight,SampleLogFunc,SampleVariable1..d), so that
                          herd-diagnose reads both sides' binary outputs the same way as their
                          text chains. KIND: `herd` (HERDCHN1: 24-byte header `HERDCHN1`,
                          u32 version, ndim, chain id, record size; records u64 step, i64
                          weight, f64 log density, i32 DR stage, u32 chain id, f64 acceptance
                          probability, f64 adaptation measure, f64 point[ndim]; docs/dram.md)
                          or `paradram` (ParaMonte 1.x's chainFileFormat = "binary": Fortran
                          sequential unformatted records with 4-byte length markers; first the
                          CSV header as characters, then per compact state i32 process id, i32
                          DR stage, f64 mean acceptance rate, f64 adaptation measure, i32
                          burn-in location, i32 weight, f64 log function, f64 point[ndim]).
  record SIDE SIZE FORMAT PAIR REPORT TIMEFILE ERRFILE DIAGJSON
                          prints one JSON line: wall, CPU, peak RSS (from `/usr/bin/time -f
                          "%e %U %S %M"`), proposals and accepted states (the report's
                          `stats.numFuncCall.acceptedRejected` / `.accepted`, which herd's
                          `_report.txt` also has), log-density calls (counted by the program,
                          ERRFILE), and the minimum over the coordinates of herd-diagnose's
                          ess_bulk (DIAGJSON; SampleLogFunc left out).
  summary FILE            reads the JSON lines and prints, per size and chain format, the
                          min / median / max per side and the ratios herd / ParaDRAM of the
                          medians (wall, CPU, RSS, ESS per wall and per CPU second), as a
                          Markdown table.

Only the standard library and NumPy (in the bench venv as a dependency of paramonte).
"""
import json
import statistics
import struct
import sys


def chain2txt(kind, src, dst):
    import numpy as np
    raw = open(src, "rb").read()
    if kind == "herd":
        magic, _version, ndim, _chain, rec = struct.unpack_from("<8sIIII", raw, 0)
        if magic != b"HERDCHN1":
            sys.exit(f"chain2txt: {src}: not a HERDCHN1 file")
        dt = np.dtype([("step", "<u8"), ("w", "<i8"), ("lp", "<f8"), ("stage", "<i4"),
                       ("chain", "<u4"), ("acc", "<f8"), ("adapt", "<f8"), ("x", "<f8", (ndim,))])
        if dt.itemsize != rec:
            sys.exit(f"chain2txt: {src}: record size {rec}, expected {dt.itemsize}")
        r = np.frombuffer(raw, dtype=dt, offset=24)
        proc, stage, acc, adapt = np.ones(len(r), int), r["stage"], r["acc"], r["adapt"]
        burnin = np.ones(len(r), int)
    elif kind == "paradram":
        (hlen,) = struct.unpack_from("<i", raw, 0)
        header = raw[4:4 + hlen].decode()
        ndim = header.count("SampleVariable")
        body = 4 + hlen + 4
        dt = np.dtype([("m0", "<i4"), ("proc", "<i4"), ("stage", "<i4"), ("acc", "<f8"),
                       ("adapt", "<f8"), ("burnin", "<i4"), ("w", "<i4"), ("lp", "<f8"),
                       ("x", "<f8", (ndim,)), ("m1", "<i4")])
        r = np.frombuffer(raw, dtype=dt, offset=body)
        if len(r) and (r["m0"] != dt.itemsize - 8).any():
            sys.exit(f"chain2txt: {src}: record markers are not {dt.itemsize - 8}")
        proc, stage, acc, adapt, burnin = r["proc"], r["stage"], r["acc"], r["adapt"], r["burnin"]
    else:
        sys.exit(f"chain2txt: KIND must be herd or paradram, not {kind!r}")
    cols = ["ProcessID", "DelayedRejectionStage", "MeanAcceptanceRate", "AdaptationMeasure",
            "BurninLocation", "SampleWeight", "SampleLogFunc"]
    cols += [f"SampleVariable{i + 1}" for i in range(ndim)]
    with open(dst, "w") as f:
        f.write(",".join(cols) + "\n")
        table = np.column_stack([proc, stage, acc, adapt, burnin, r["w"], r["lp"], r["x"]])
        fmt = ["%d", "%d", "%.17g", "%.17g", "%d", "%d", "%.17g"] + ["%.17g"] * ndim
        np.savetxt(f, table, fmt=fmt, delimiter=",")


def report_stat(path, key):
    lines = open(path, errors="replace").read().splitlines()
    for i, line in enumerate(lines):
        if line.strip() == key:
            for nxt in lines[i + 1:]:
                if nxt.strip():
                    return int(float(nxt.strip()))
    sys.exit(f"record: {path}: no {key}")


def record(side, size, fmt, pair, report, timefile, errfile, diagjson):
    wall, user, system, rss_kib = open(timefile).read().split()[-4:]
    calls = None
    for line in open(errfile, errors="replace"):
        if line.startswith("paradram_gauss10: log density calls:"):
            calls = int(line.split(":")[-1])
    diag = json.load(open(diagjson))
    ess = min(v["ess_bulk"] for k, v in diag.items() if k != "SampleLogFunc")
    print(json.dumps({
        "side": side, "size": int(size), "format": fmt, "pair": int(pair),
        "wall_s": float(wall), "cpu_s": float(user) + float(system),
        "rss_mib": int(rss_kib) / 1024.0,
        "proposals": report_stat(report, "stats.numFuncCall.acceptedRejected"),
        "accepted": report_stat(report, "stats.numFuncCall.accepted"),
        "logfunc_calls": calls, "ess_bulk_min": ess, "ess_per_wall_s": ess / float(wall)}))


def summary(path):
    rows = [json.loads(line) for line in open(path) if line.strip()]
    for r in rows:
        r["ess_per_cpu_s"] = r["ess_bulk_min"] / r["cpu_s"] if r["cpu_s"] > 0 else float("nan")
    keys = [("wall_s", "wall s", "{:.2f}"), ("cpu_s", "CPU s", "{:.2f}"),
            ("rss_mib", "peak RSS MiB", "{:.0f}"), ("proposals", "proposals", "{:.0f}"),
            ("accepted", "accepted", "{:.0f}"), ("logfunc_calls", "log-density calls", "{:.0f}"),
            ("ess_bulk_min", "min ESS bulk", "{:.0f}"), ("ess_per_wall_s", "ESS / wall s", "{:.0f}"),
            ("ess_per_cpu_s", "ESS / CPU s", "{:.0f}")]
    groups = list(dict.fromkeys((r["size"], r["format"]) for r in rows))  # run order
    for size, fmt in groups:
        g = [r for r in rows if r["size"] == size and r["format"] == fmt]
        sides = {s: [r for r in g if r["side"] == s] for s in ("herd", "paradram")}
        n = min(len(v) for v in sides.values())
        print(f"\nchainSize {size}, chainFileFormat {fmt}, {n} pairs (min / median / max)\n")
        print("| quantity | herd | ParaDRAM | herd / ParaDRAM (medians) |")
        print("|---|---|---|---|")
        for key, label, f in keys:
            cells, med = [], {}
            for s in ("herd", "paradram"):
                v = [r[key] for r in sides[s]]
                if not v:
                    cells.append("-")
                    continue
                med[s] = statistics.median(v)
                cells.append(" / ".join(f.format(x) for x in (min(v), med[s], max(v))))
            ratio = (f"{med['herd'] / med['paradram']:.2f}"
                     if len(med) == 2 and med["paradram"] else "-")
            print(f"| {label} | {cells[0]} | {cells[1]} | {ratio} |")


def main(argv):
    if len(argv) >= 2 and argv[1] == "chain2txt" and len(argv) == 5:
        chain2txt(*argv[2:])
    elif len(argv) >= 2 and argv[1] == "record" and len(argv) == 10:
        record(*argv[2:])
    elif len(argv) == 3 and argv[1] == "summary":
        summary(argv[2])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)

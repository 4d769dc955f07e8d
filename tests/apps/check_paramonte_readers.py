#!/usr/bin/env python3
"""Checks that herd-sample's outputs follow the rules ParaMonte's Python readers (PyPI
`paramonte`, readReport/readProgress/readChain/readSample) parse them by, with the standard
library only (the package itself is never needed by the tests).

usage: check_paramonte_readers.py PREFIX CHAIN_SIZE
"""
import math
import re
import sys

DSYM = "****"
TOPICS = ["ParaMonte library interface specifications", "Runtime platform specifications",
          "simulation environment", "simulation specifications"]
PROGRESS = ["NumFuncCallTotal", "NumFuncCallAccepted", "MeanAcceptanceRateSinceStart",
            "MeanAcceptanceRateSinceLastReport", "TimeElapsedSinceLastReportInSeconds",
            "TimeElapsedSinceStartInSeconds", "TimeRemainedToFinishInSeconds"]
NOTE = "ParaDRAM - NOTE: "
errors = []


def fail(msg):
    errors.append(msg)


def check_report(path, chain_rows):
    lines = open(path).read().replace("\r", "").splitlines()
    # The banner: the first run of lines holding the decoration symbol.
    first = next((i for i, l in enumerate(lines) if DSYM in l), None)
    if first is None:
        fail(f"{path}: no banner (no line holds {DSYM})")
        return
    i = first
    while i < len(lines) and DSYM in lines[i]:
        i += 1
    # Each topic: a framed title line (starting with the symbol), then its text up to the next frame.
    for topic in TOPICS:
        at = next((k for k in range(i, len(lines)) if topic in lines[k]), None)
        if at is None:
            fail(f"{path}: no section titled '{topic}' after the banner")
            continue
        if not lines[at].startswith(DSYM):
            fail(f"{path}:{at + 1}: the title of '{topic}' is not framed by {DSYM}")
        k = at
        while k < len(lines) and lines[k][:4] == DSYM:
            k += 1
        body = []
        while k < len(lines) and lines[k][:4] != DSYM:
            body.append(lines[k])
            k += 1
        if not any(b.strip() for b in body):
            fail(f"{path}: section '{topic}' is empty")
        i = at
    # stats records: name, value lines indented by 8, description lines with the NOTE prefix.
    stats = {}
    k = 0
    while k < len(lines):
        if not lines[k].startswith("stats."):
            k += 1
            continue
        name = lines[k].strip()
        for part in name.split("."):
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", part):
                fail(f"{path}:{k + 1}: '{name}' is not a dotted name of identifiers")
        value, desc = [], []
        k += 1
        while k < len(lines) and not lines[k].startswith("stats."):
            rec = lines[k]
            if len(rec) > 8:
                if NOTE in rec:
                    desc.append(rec)
                elif desc:
                    break
                else:
                    value.append(rec)
            k += 1
        if not value or not desc:
            fail(f"{path}: {name} needs value lines and then '{NOTE}' lines")
        for v in value + desc:
            if "'" in v or "\\" in v:
                fail(f"{path}: {name}: a quote or backslash breaks the reader: {v!r}")
        if value:
            try:
                stats[name] = [float(x) for x in " ".join(value).split()]
            except ValueError:
                stats[name] = None
    for need in ["stats.numFuncCall.accepted", "stats.numFuncCall.acceptedRejected",
                 "stats.chain.verbose.efficiency.meanAcceptanceRate", "stats.time.total"]:
        if stats.get(need) is None:
            fail(f"{path}: no numeric {need}")
    acc = stats.get("stats.numFuncCall.accepted")
    if acc is not None and acc[0] != chain_rows:
        fail(f"{path}: stats.numFuncCall.accepted is {acc[0]}, but the chain file has {chain_rows} rows")
    rate = stats.get("stats.chain.verbose.efficiency.meanAcceptanceRate")
    if rate is not None and not (0 < rate[0] <= 1):
        fail(f"{path}: the mean acceptance rate {rate[0]} is not in (0, 1]")


def table(path):
    rows = [l.rstrip("\n") for l in open(path) if l.strip()]
    return [c.strip() for c in rows[0].split(",")], [r.split(",") for r in rows[1:]]


def main():
    prefix, chain_size = sys.argv[1], int(sys.argv[2])
    head, rows = table(prefix + "_chain.txt")
    if "SampleLogFunc" not in head or head.index("SampleLogFunc") < 2 or head[head.index("SampleLogFunc") - 1] != "SampleWeight":
        fail(f"{prefix}_chain.txt: SampleWeight must precede SampleLogFunc (readMarkovChain takes the weight there)")
    chain_rows = len(rows)
    shead, _ = table(prefix + "_sample.txt")
    if shead[0] != "SampleLogFunc":
        fail(f"{prefix}_sample.txt: the first column must be SampleLogFunc, not {shead[0]}")
    phead, prows = table(prefix + "_progress.txt")
    if phead != PROGRESS:
        fail(f"{prefix}_progress.txt: columns {phead}, but ParaMonte's are {PROGRESS}")
    if len(prows) < 2:
        fail(f"{prefix}_progress.txt: {len(prows)} rows, but the readers need at least 2")
    elif int(prows[-1][1]) != chain_size or any(not math.isfinite(float(x)) for x in prows[-1]):
        fail(f"{prefix}_progress.txt: the last row {prows[-1]} does not end the chain of {chain_size} states")
    check_report(prefix + "_report.txt", chain_rows)
    for e in errors:
        print("check_paramonte_readers:", e)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""End-to-end test of the HTML reports of herd-sample, herd-diagnose and herd-rl.

html_reports.py HERD_SAMPLE HERD_DIAGNOSE HERD_RL WORKDIR [--mpiexec MPIEXEC] [--render PNGDIR]

Runs small serial, multi-chain, fork-join (with --mpiexec, 2 processes) and batched
herd-sample runs, herd-diagnose --html on an .h5 and a CSV file, herd-rl train and herd-rl
report on a progress CSV, and checks every report with tests/support/check_html_report.py:
it parses as HTML, is self-contained, and each plot holds the expected number of panels,
series and points. With --render, each report is also rendered by headless Chromium
(tests/support/render_html_report.py) to PNGDIR/<kind>.png; without Chromium the script
exits 77 (CTest SKIP_RETURN_CODE) saying so.
"""
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SUPPORT = os.path.join(HERE, "..", "support")
CHECK = os.path.join(SUPPORT, "check_html_report.py")
RENDER = os.path.join(SUPPORT, "render_html_report.py")


def fail(msg):
    print(f"html_reports: FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


def run(cmd, cwd, expect_rc=0):
    start = time.time()
    r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=300)
    print(f"html_reports: {' '.join(os.path.basename(c) for c in cmd)}: exit {r.returncode}, {time.time() - start:.1f} s")
    if r.returncode != expect_rc:
        fail(f"{' '.join(cmd)} exited with {r.returncode} (expected {expect_rc}):\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return r


def check(path, *args):
    r = subprocess.run([sys.executable, CHECK, path, *args], capture_output=True, text=True)
    sys.stdout.write(r.stdout)
    if r.returncode != 0:
        fail(f"{path}: {r.stderr.strip()}")


def exp(*items):
    out = []
    for i in items:
        out += ["--expect", i]
    return out


SAMPLE = """description = "report test"
chain_size = {chain_size}
random_seed = 11
output_prefix = "out/{name}"
proposal_std = [0.5, 0.5]
variable_names = ["a", "b"]
{extra}
[target]
builtin = "normal"
ndim = 2
rho = 0.6
"""

CSV_HEADER = ("iteration,env_steps,wall_time_s,episodes,return_mean,return_min,return_max,length_mean,length_min,"
              "length_max,policy_loss,value_loss,entropy,approx_kl,clip_fraction,explained_variance,learning_rate,"
              "sample_steps_per_s,train_steps_per_s")


def main(argv):
    sample, diagnose, rl, work = argv[:4]
    mpiexec, render_dir = None, None
    i = 4
    while i < len(argv):
        if argv[i] == "--mpiexec":
            mpiexec = argv[i + 1]
        elif argv[i] == "--render":
            render_dir = argv[i + 1]
        i += 2
    if render_dir and not any(shutil.which(c) for c in ("chromium", "chromium-browser", "google-chrome")):
        print("SKIP: no Chromium found: the HTML reports were not rendered. Install Debian's chromium to run this "
              "test.")
        sys.exit(77)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    reports = {}

    def sample_run(name, chain_size, extra):
        with open(os.path.join(work, name + ".toml"), "w") as f:
            f.write(SAMPLE.format(chain_size=chain_size, name=name, extra=extra))
        run([sample, name + ".toml"], work)
        path = os.path.join(work, "out", name + "_report.html")
        if not os.path.exists(path):
            fail(f"herd-sample did not write {path}")
        return path

    # Serial, one chain: every plot but the rank plot; 1 final proposal ellipse.
    p = sample_run("serial", 3000, "")
    check(p, "--figures", "7", "--text", "Convergence", "--text", "mcse_mean", *exp(
        "trace:panels=2,series=2,points_max=1001", "density:panels=2,series=2,points=256",
        "corner:panels=4,series=3,points_max=1000", "autocorrelation:panels=2,series=2",
        "acceptance:panels=1,series=1", "adaptation:panels=1,series=1", "covariance:panels=1,series=4"))
    reports["sample_serial"] = p
    # Multi-chain, 4 chains: rank plots; densities per chain and pooled; 4 final ellipses.
    p = sample_run("multi", 3000, 'parallelization_model = "multi_chain"\nchains_per_rank = 4\n')
    check(p, "--figures", "8", *exp(
        "trace:panels=2,series=8,points_max=1001", "density:panels=2,series=10,points=1280",
        "corner:panels=4,series=3", "autocorrelation:panels=2,series=8", "rank:panels=2,series=8,points=168",
        "acceptance:panels=1,series=4", "adaptation:panels=1,series=4", "covariance:panels=1,series=7"))
    reports["sample_multi"] = p
    # Batched (cpu_batched), 8 chains: no history of the run (said in words), 1 frozen proposal.
    p = sample_run("batched", 2000, 'device = "cpu_batched"\nchains_per_rank = 8\nwarmup = 1000\n')
    check(p, "--figures", "6", "--text", "Batched runs do not record the acceptance rate", *exp(
        "trace:panels=2,series=16,points_max=1001", "rank:panels=2,series=16,points=336",
        "covariance:panels=1,series=4"))
    reports["sample_batched"] = p
    # Fork-join: one chain sampled by 2 processes; rank 0 writes the report.
    if mpiexec:
        with open(os.path.join(work, "forkjoin.toml"), "w") as f:
            f.write(SAMPLE.format(chain_size=2000, name="forkjoin", extra='parallelization_model = "single_chain"\n'))
        run([mpiexec, "-n", "2", sample, "forkjoin.toml"], work)
        p = os.path.join(work, "out", "forkjoin_report.html")
        check(p, "--figures", "7", "--text", "single_chain, 2 processes", *exp("trace:panels=2,series=2", "acceptance:series=1"))
        reports["sample_forkjoin"] = p

    # herd-diagnose --html: the multi-chain run's draws (no sampler history, said in words), and a CSV.
    p = os.path.join(work, "diagnose.html")
    run([diagnose, os.path.join("out", "multi.h5"), "--html", p], work)
    check(p, "--figures", "5", "--text", "herd-diagnose reads the draws only", *exp(
        "trace:panels=2,series=8", "corner:panels=4,series=3", "rank:panels=2,series=8,points=168"))
    reports["diagnose"] = p
    with open(os.path.join(work, "theta.csv"), "w") as f:
        f.write("chain1,chain2,chain3\n")
        for t in range(300):
            f.write(f"{(t * 37 % 101) / 50.0:.4f},{(t * 53 % 103) / 50.0:.4f},{(t * 71 % 107) / 50.0:.4f}\n")
    p = os.path.join(work, "diagnose_csv.html")
    run([diagnose, "theta.csv", "--html", p], work)
    check(p, "--figures", "4", *exp("trace:panels=1,series=3,points=900", "rank:panels=1,series=3,points=63"))
    # An unwritable report path: refused before any work (exit 2, one line naming it, no table).
    r = run([diagnose, "theta.csv", "--html", os.path.join(work, "no_such_dir", "x.html")], work, expect_rc=2)
    if "no_such_dir" not in r.stderr or r.stdout:
        fail(f"herd-diagnose --html into a missing folder: {r.stderr!r}")

    # herd-rl report from a progress CSV written by a run (header names, empty fields, nan,
    # a last row cut off by a kill).
    rows = []
    for i in range(1, 6):
        ret = "" if i == 1 else f"{10.0 * i}"
        rmin = "" if i == 1 else f"{5.0 * i}"
        rmax = "" if i == 1 else f"{20.0 * i}"
        rows.append(f"{i},{512 * i},{0.1 * i:.1f},{3 * i},{ret},{rmin},{rmax},{20 + i},{10 + i},{30 + i},"
                    f"{-0.01 * i},{1.0 / i},{0.69 - 0.01 * i},nan,{0.1},{0.2 * i - 0.3},{1e-3 * (6 - i)},"
                    f"{5000 + i},{20000 + i}")
    with open(os.path.join(work, "ppo_progress.csv"), "w") as f:
        f.write(CSV_HEADER + "\n" + "\n".join(rows) + "\n6,3072,0.6")
    r = run([rl, "report", "ppo"], work)
    p = os.path.join(work, "ppo_report.html")
    check(p, "--figures", "3", "--text", "does not exist yet", "--text", "approx_kl", *exp(
        "return:panels=2,series=6,points=27", "losses:panels=6,series=6,points=30",
        "throughput:panels=2,series=3,points=15"))
    reports["rl_progress_csv"] = p
    # Bad CSV: one line naming file, line and column; exit 2; no report written.
    with open(os.path.join(work, "bad_progress.csv"), "w") as f:
        f.write(CSV_HEADER + "\n" + rows[0] + "\n" + rows[1].replace("1024", "abc", 1) + "\n")
    r = run([rl, "report", "bad"], work, expect_rc=2)
    if "bad_progress.csv:3" not in r.stderr or "env_steps" not in r.stderr or os.path.exists(
            os.path.join(work, "bad_report.html")):
        fail(f"herd-rl report of a bad CSV: {r.stderr!r}")
    r = run([rl, "report", "nothing_here"], work, expect_rc=2)
    if "nothing_here_progress.csv" not in r.stderr:
        fail(f"herd-rl report of a missing run: {r.stderr!r}")
    # herd-rl train writes the report at its end (from the .h5 when no progress CSV exists).
    with open(os.path.join(work, "small.toml"), "w") as f:
        f.write('total_steps = 1024\noutput_prefix = "rl/run"\n[sampler]\nnum_envs = 4\nnum_steps = 32\n'
                '[algo]\nepochs = 2\nminibatch_size = 64\n')
    r = run([rl, "train", "small.toml", "--quiet"], work)
    p = os.path.join(work, "rl", "run_report.html")
    check(p, *exp("return:panels=2", "throughput:panels=2"))
    reports["rl_train"] = p

    if render_dir:
        os.makedirs(render_dir, exist_ok=True)
        for kind, path in reports.items():
            png = os.path.join(render_dir, kind + ".png")
            r = subprocess.run([sys.executable, RENDER, path, png, "--height", "6000"], capture_output=True, text=True)
            sys.stdout.write(r.stdout)
            if r.returncode != 0:
                fail(f"rendering {path}: {r.stdout[-1000:]} {r.stderr[-2000:]}")
    print(f"html_reports: {len(reports)} reports OK")


if __name__ == "__main__":
    main(sys.argv[1:])

#!/usr/bin/env python3
"""PyTorch CPU baseline for bench_mlp: the same MLP 64-256-256-16 (tanh, float32) forward
and train step (zero_grad, forward, MSE, backward, Adam) at batch 32, 256, 4096 with 1 and
2 threads. Prints one JSON object: {"torch": version, "blas": ..., "results": [{"name",
"ms"}]} with the median milliseconds per call, or {"skipped": reason} when torch cannot be
imported. Run under /usr/bin/python3 (Debian python3-torch; give it OpenBLAS with
libopenblas0-openmp, its default reference BLAS is slow) or any Python with a pip torch.
Usage: bench_mlp_torch.py [--quick] [--reps N] (N timed repetitions per case; default 5, 3 with --quick)
"""
import json
import statistics
import sys
import time


def loaded_blas():
    libs = set()
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split()[-1]
                if any(k in path for k in ("blas", "mkl", "lapack")) and path.startswith("/"):
                    libs.add(path)
    except OSError:
        pass
    return sorted(libs)


def median_ms(fn, min_time, reps):
    # Calibrate the inner loop to about min_time seconds, then take the median of reps.
    n = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        dt = time.perf_counter() - t0
        if dt >= min_time / 4 or n >= 1 << 20:
            break
        n *= 2
    n = max(1, int(n * (min_time / max(dt, 1e-9))))
    samples = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        samples.append((time.perf_counter() - t0) / n * 1e3)
    return statistics.median(samples)


def main():
    quick = "--quick" in sys.argv
    reps_arg = int(sys.argv[sys.argv.index("--reps") + 1]) if "--reps" in sys.argv else None
    try:
        import torch
    except Exception as e:  # noqa: BLE001 - any import failure means "no baseline"
        print(json.dumps({"skipped": f"torch not importable: {e}"}))
        return 0
    cfg = torch.__config__.show()
    blas_info = ["BLAS_INFO=" + s.split("BLAS_INFO", 1)[1].lstrip("=: ").strip()
                 for s in cfg.replace(",", "\n").splitlines() if "BLAS_INFO" in s]
    results = []
    min_time, reps = (0.1, 3) if quick else (0.3, 5)
    if reps_arg is not None:
        reps = max(1, reps_arg)
    for threads in (1, 2):
        torch.set_num_threads(threads)
        for batch in (32, 256, 4096):
            torch.manual_seed(0)
            model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.Tanh(),
                                        torch.nn.Linear(256, 256), torch.nn.Tanh(),
                                        torch.nn.Linear(256, 16))
            opt = torch.optim.Adam(model.parameters(), lr=1e-4)
            loss_fn = torch.nn.MSELoss()
            x = torch.randn(batch, 64)
            y = torch.randn(batch, 16)

            def forward():
                with torch.no_grad():
                    model(x)

            def train():
                opt.zero_grad()
                loss = loss_fn(model(x), y)
                loss.backward()
                opt.step()

            results.append({"name": f"forward/{batch}/{threads}", "ms": median_ms(forward, min_time, reps)})
            results.append({"name": f"train/{batch}/{threads}", "ms": median_ms(train, min_time, reps)})
    # The BLAS that torch itself reports (pip's torch links MKL statically, so the
    # libraries mapped in the process, e.g. numpy's OpenBLAS, say nothing about it).
    print(json.dumps({"torch": torch.__version__, "blas_info": "; ".join(blas_info),
                      "blas_loaded": loaded_blas(), "results": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

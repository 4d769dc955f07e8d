#!/usr/bin/env python3
"""Gymnasium 1.4.0's CartPole-v1 vector envs, the baseline of bench_env_pool (same run).

Prints one JSON object per line: {"impl": ..., "num_envs": ..., "steps_per_s_median": ...}
for the numpy `CartPoleVectorEnv` (vectorization_mode="vector_entry_point") and for
`SyncVectorEnv` (vectorization_mode="sync"), at 16, 256 and 4096 envs. Actions come from a
pre-drawn table (64 steps x num_envs, cycled), as in the C++ harness. Exit status 3 when
gymnasium cannot be imported. Usage: bench_gymnasium.py [--seconds S] [--repeats R]
"""
import argparse
import json
import statistics
import sys
import time

try:
    import gymnasium as gym
    import numpy as np
except ImportError as e:  # pragma: no cover - depends on the interpreter
    print(f"bench_gymnasium: {e}", file=sys.stderr)
    sys.exit(3)


def measure(envs, n, seconds, repeats):
    table = np.random.default_rng(2024).integers(0, 2, size=(64, n))
    envs.reset(seed=1)
    t = 0

    def block(k):
        nonlocal t
        for _ in range(k):
            envs.step(table[t % 64])
            t += 1

    k = 1
    while True:  # warm up and size a block to about 1 ms
        t0 = time.perf_counter()
        block(k)
        if time.perf_counter() - t0 > 1e-3:
            break
        k *= 2
    rates = []
    for _ in range(repeats):
        iters = 0
        t0 = time.perf_counter()
        while True:
            block(k)
            iters += k
            dt = time.perf_counter() - t0
            if dt >= seconds / repeats:
                break
        rates.append(iters * n / dt)
    return rates


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args()
    for mode, impl in (("vector_entry_point", "gymnasium_numpy_vector"),
                       ("sync", "gymnasium_sync_vector")):
        for n in (16, 256, 4096):
            envs = gym.make_vec("CartPole-v1", num_envs=n, vectorization_mode=mode)
            rates = measure(envs, n, a.seconds, a.repeats)
            envs.close()
            print(json.dumps({"impl": impl, "gymnasium_version": gym.__version__,
                              "numpy_version": np.__version__, "num_envs": n,
                              "steps_per_s_median": statistics.median(rates),
                              "steps_per_s_all": rates}), flush=True)


if __name__ == "__main__":
    main()

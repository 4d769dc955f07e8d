#!/usr/bin/env python3
"""The peers of bench_env_pool on CartPole-v1 (same run): Gymnasium's vector envs and EnvPool.

Prints one JSON object per line: {"impl", "version", "threads", "num_envs",
"steps_per_s_median", "steps_per_s_all", "steps_per_cpu_s_all" (per CPU second of the process)} for Gymnasium's numpy `CartPoleVectorEnv`
(vectorization_mode="vector_entry_point") and `SyncVectorEnv` (vectorization_mode="sync"),
and, when the `envpool` package imports, EnvPool's synchronous CartPole-v1 with 1 and 2
threads, at 16, 256 and 4096 envs (the numpy vector env also at 64 and 1024). Actions come from a pre-drawn table (64 steps x
num_envs, cycled), as in the C++ harness. Exit status 3 when gymnasium cannot be imported.
Usage: bench_gymnasium.py [--seconds S] [--repeats R]
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
    try:
        envs.reset(seed=1)
    except TypeError:  # EnvPool seeds at construction
        envs.reset()
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
    rates, cpu_rates = [], []
    for _ in range(repeats):
        iters = 0
        t0 = time.perf_counter()
        c0 = time.process_time()
        while True:
            block(k)
            iters += k
            dt = time.perf_counter() - t0
            if dt >= seconds / repeats:
                break
        rates.append(iters * n / dt)
        cpu_rates.append(iters * n / max(time.process_time() - c0, 1e-9))
    return rates, cpu_rates


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args()
    def emit(impl, version, threads, n, rates):
        rates, cpu_rates = rates
        print(json.dumps({"impl": impl, "version": version, "threads": threads,
                          "numpy_version": np.__version__, "num_envs": n,
                          "steps_per_s_median": statistics.median(rates),
                          "steps_per_s_all": rates, "steps_per_cpu_s_all": cpu_rates}), flush=True)

    for mode, impl, counts in (("vector_entry_point", "gymnasium_numpy_vector", (16, 64, 256, 1024, 4096)),
                               ("sync", "gymnasium_sync_vector", (16, 256, 4096))):
        for n in counts:
            envs = gym.make_vec("CartPole-v1", num_envs=n, vectorization_mode=mode)
            rates = measure(envs, n, a.seconds, a.repeats)
            envs.close()
            emit(impl, gym.__version__, 1, n, rates)
    try:
        import envpool
    except ImportError:
        return
    for threads in (1, 2):
        for n in (16, 256, 4096):
            envs = envpool.make_gymnasium("CartPole-v1", num_envs=n, batch_size=n, num_threads=threads, seed=1)
            rates = measure(envs, n, a.seconds, a.repeats)
            getattr(envs, "close", lambda: None)()
            emit("envpool", envpool.__version__, threads, n, rates)


if __name__ == "__main__":
    main()

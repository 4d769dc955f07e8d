#!/usr/bin/env python3
"""MinAtar env steps/s with random actions: herd's EnvPool (float32 batches, 1 and 2
threads, measured by build/bench/rl/bench_minatar_pool) against the same loop over a
Gymnasium SyncVectorEnv of the `minatar` wrapper in bench/rl/minatar_gym.py (one thread:
SyncVectorEnv steps its envs in turn), 16 to 4096 envs, Breakout and Freeway. Actions for
the peer are drawn before timing (a table of 64 steps, cycled) as bench_minatar_pool does;
finished envs reset automatically on both sides. By hand only, never in CI.

Prints one JSON document on stdout and a table (herd / peer ratios) on stderr.

Usage: bench/rl/minatar_throughput.py [--seconds S] [--repeats R]
           [--bin build/bench/rl/bench_minatar_pool] [--sizes 16,64,256,1024,4096]
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
GAMES = {"MinAtar/Breakout-v1": "breakout", "MinAtar/Freeway-v1": "freeway"}


def peer_worker(game, n, seconds, repeats):
    import gymnasium as gym
    import numpy as np
    sys.path.insert(0, HERE)
    from minatar_gym import MinAtarGymEnv
    env = gym.vector.SyncVectorEnv([lambda: MinAtarGymEnv(game) for _ in range(n)])
    env.reset(seed=1)
    na = env.single_action_space.n
    table = np.random.default_rng(2024).integers(0, na, size=(64, n))
    t = 0
    for _ in range(3):
        env.step(table[t % 64]); t += 1
    rates = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        steps = 0
        while True:
            env.step(table[t % 64]); t += 1
            steps += n
            el = time.perf_counter() - t0
            if el >= seconds / repeats:
                break
        rates.append(steps / el)
    rates.sort()
    k = len(rates)
    return rates[k // 2] if k % 2 else 0.5 * (rates[k // 2 - 1] + rates[k // 2])


def main():
    if len(sys.argv) == 6 and sys.argv[1] == "--peer-worker":
        print(peer_worker(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])))
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=1.0, help="seconds per configuration")
    ap.add_argument("--repeats", type=int, default=5, help="timed repeats per configuration (median)")
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bench", "rl", "bench_minatar_pool"))
    ap.add_argument("--sizes", default="16,64,256,1024,4096")
    a = ap.parse_args()
    if not os.access(a.bin, os.X_OK):
        sys.exit(f"minatar_throughput: {a.bin} is not an executable (build the bench_minatar_pool target)")
    python = subprocess.run([os.path.join(ROOT, "bench", "peer-venv"), "gymnasium", "minatar"], check=True,
                            capture_output=True, text=True).stdout.strip()
    sizes = [int(s) for s in a.sizes.split(",")]
    rows = []
    for env_id, game in GAMES.items():
        herd = json.loads(subprocess.run([a.bin, "--seconds", str(a.seconds), "--repeats", str(a.repeats), "--env",
                                          env_id], check=True, capture_output=True, text=True).stdout)["results"]
        for n in sizes:
            peer = float(subprocess.run([python, os.path.abspath(__file__), "--peer-worker", game, str(n),
                                         str(a.seconds), str(a.repeats)], check=True, capture_output=True,
                                        text=True, env=dict(os.environ, OMP_NUM_THREADS="1")).stdout)
            row = {"env": env_id, "num_envs": n, "peer_steps_per_s": peer}
            for r in herd:
                if r["num_envs"] == n:
                    row[f"herd_{r['threads']}t_steps_per_s"] = r["float32_steps_per_s"]
                    row[f"herd_{r['threads']}t_uint8_steps_per_s"] = r["uint8_steps_per_s"]
            rows.append(row)
            print(f"minatar_throughput: {env_id} {n} envs: peer {peer:.0f}/s", file=sys.stderr, flush=True)
    print(json.dumps({"benchmark": "MinAtar random-action env steps/s: herd EnvPool vs Gymnasium SyncVectorEnv "
                      "over PyPI minatar", "seconds_per_config": a.seconds, "repeats": a.repeats,
                      "load_average": os.getloadavg(), "results": rows}, indent=2))
    print(f"\n{'env':20} {'envs':>5} {'herd 1t':>10} {'herd 2t':>10} {'peer':>9} {'1t/peer':>8} {'2t/peer':>8}",
          file=sys.stderr)
    for r in rows:
        h1, h2, p = r.get("herd_1t_steps_per_s", float("nan")), r.get("herd_2t_steps_per_s", float("nan")), \
            r["peer_steps_per_s"]
        print(f"{r['env']:20} {r['num_envs']:5d} {h1:10.0f} {h2:10.0f} {p:9.0f} {h1 / p:8.1f} {h2 / p:8.1f}",
              file=sys.stderr)


if __name__ == "__main__":
    main()

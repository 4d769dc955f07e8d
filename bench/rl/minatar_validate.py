#!/usr/bin/env python3
"""Compares herd's MinAtar games with PyPI's `minatar` package (never run in CI).

For each game, a uniformly random policy plays >= 2000 episodes in both implementations
(herd's through build/bench/rl/bench_minatar_episodes, MinAtar's through its public
`Environment` API with sticky actions 0.1); the distributions of episode returns and of
episode lengths are compared with a two-sample Kolmogorov-Smirnov test (asymptotic p-value,
as scipy.stats.ks_2samp(method="asymp")). Seeds are fixed. Exit status 1 when a p-value is
below --alpha (0.01), 0 otherwise; 77 when `minatar` is not importable.

Usage: python3 bench/rl/minatar_validate.py [--bin build/bench/rl/bench_minatar_episodes]
           [--episodes 2000] [--games breakout,freeway,asterix,space_invaders,seaquest]
           [--full-actions] [--alpha 0.01]
"""
import argparse
import csv
import io
import math
import subprocess
import sys

GAMES = {"breakout": "Breakout", "freeway": "Freeway", "asterix": "Asterix",
         "space_invaders": "SpaceInvaders", "seaquest": "Seaquest"}


def ks_2samp(a, b):
    """Two-sample KS statistic D and its asymptotic p-value (Kolmogorov distribution)."""
    a, b = sorted(a), sorted(b)
    n, m = len(a), len(b)
    i = j = 0
    d = 0.0
    while i < n and j < m:
        v = min(a[i], b[j])
        while i < n and a[i] == v:
            i += 1
        while j < m and b[j] == v:
            j += 1
        d = max(d, abs(i / n - j / m))
    en = math.sqrt(n * m / (n + m))
    lam = (en + 0.12 + 0.11 / en) * d
    if lam < 1e-3:
        return d, 1.0
    p = 2.0 * sum((-1) ** (k - 1) * math.exp(-2.0 * k * k * lam * lam) for k in range(1, 101))
    return d, min(1.0, max(0.0, p))


def herd_episodes(binary, env_id, episodes, seed):
    out = subprocess.run([binary, env_id, str(episodes), str(seed)], check=True,
                         capture_output=True, text=True).stdout
    rows = list(csv.DictReader(io.StringIO(out)))
    return [float(r["return"]) for r in rows], [int(r["length"]) for r in rows]


def minatar_episodes(game, episodes, seed, full_actions):
    import numpy as np
    from minatar import Environment
    env = Environment(game, sticky_action_prob=0.1)
    env.seed(seed)  # MinAtar's own stream (sticky actions, game randomness)
    rng = np.random.default_rng(seed)
    actions = list(range(env.num_actions())) if full_actions else env.minimal_action_set()
    returns, lengths = [], []
    for _ in range(episodes):
        env.reset()
        ret, n, done = 0.0, 0, False
        while not done:
            r, done = env.act(actions[rng.integers(len(actions))])
            ret += r
            n += 1
        returns.append(ret)
        lengths.append(n)
    return returns, lengths


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default="build/bench/rl/bench_minatar_episodes")
    ap.add_argument("--episodes", type=int, default=2000)
    ap.add_argument("--games", default=",".join(GAMES))
    ap.add_argument("--full-actions", action="store_true")
    ap.add_argument("--alpha", type=float, default=0.01)
    ap.add_argument("--seed", type=int, default=12345)
    args = ap.parse_args()
    try:
        import minatar  # noqa: F401
    except ImportError:
        print("minatar_validate: the minatar package is not importable; nothing compared")
        return 77
    ok = True
    print("game,actions,herd_mean_return,minatar_mean_return,ks_p_return,"
          "herd_mean_length,minatar_mean_length,ks_p_length")
    for game in args.games.split(","):
        if game not in GAMES:
            print(f"minatar_validate: --games has \"{game}\", but must be among "
                  f"{', '.join(GAMES)}", file=sys.stderr)
            return 2
        env_id = f"MinAtar/{GAMES[game]}-{'v0' if args.full_actions else 'v1'}"
        hr, hl = herd_episodes(args.bin, env_id, args.episodes, args.seed)
        mr, ml = minatar_episodes(game, args.episodes, args.seed, args.full_actions)
        _, pr = ks_2samp(hr, mr)
        _, pl = ks_2samp(hl, ml)
        ok = ok and pr >= args.alpha and pl >= args.alpha
        print(f"{game},{'full' if args.full_actions else 'minimal'},{sum(hr)/len(hr):.4f},"
              f"{sum(mr)/len(mr):.4f},{pr:.4g},{sum(hl)/len(hl):.2f},{sum(ml)/len(ml):.2f},"
              f"{pl:.4g}", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

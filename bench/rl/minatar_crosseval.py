#!/usr/bin/env python3
"""A herd-rl MinAtar policy in herd's game and in PyPI's `minatar` game (never run in CI).

Loads a trained policy (PPO: `policy/pi.*`; DQN: `q_network/*`) from a herd-rl run's
`<prefix>.h5`, with a NumPy forward pass, and

1. checks the NumPy forward pass against herd's own (build/bench/rl/bench_minatar_policy
   `forward` on the checkpoint): log pi(a|obs) and V(obs) (PPO) or Q(obs, a) (DQN) on
   observations drawn from minatar's game, to float tolerance;
2. checks the observation and action mapping: episodes played in minatar's game with sticky
   actions off (the policy's sampled actions and uniformly random ones) are replayed, action
   for action, in herd's game (`bench_minatar_policy replay`); every step's observation,
   reward and termination are compared, and the first difference of each episode is
   reported (cells that differ, both frames), which also finds rules in which the two games
   part;
3. evaluates the policy over N episodes in both games with sticky actions 0.1: the mode
   of the policy (DQN: greedy) and sampled actions (DQN: epsilon-greedy with the run's final
   epsilon, as `herd-rl eval --stochastic`); herd's episodes are `herd-rl eval`'s own
   (`bench_minatar_policy episodes`, the same function). Reports mean, sd, quantiles and
   lengths of both, and two-sample Kolmogorov-Smirnov and Mann-Whitney tests.

Only `minatar.Environment`'s public API is used (constructor, seed, reset, act, state,
minimal_action_set, num_actions, and the game's `channels` names to label channels);
MinAtar's source (GPL-3.0) was not read. Observations: minatar's state() is [10, 10, C]
booleans, herd's [C, 10, 10] (channel, row, column): the same channels in the same order
(checked by step 2), transposed. Action k of herd's minimal set plays
`minimal_action_set()[k]` (herd's "-v0" ids: the full set, action k plays k).

Runs in bench/peer-venv (numpy, scipy, h5py, minatar; installed on first use): started with
another interpreter, it re-executes itself there.

Usage: python3 bench/rl/minatar_crosseval.py PREFIX.ckpt [--h5 PREFIX.h5] [--episodes 200]
           [--seed 0] [--replay-episodes 40] [--max-steps 27000] [--only check|eval]
           [--bin build/bench/rl/bench_minatar_policy] [--json FILE]
Exit status: 0; 1 when the forward pass or the mapping check fails on observations that
both games agree on; 2 on a usage error.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PACKAGES = ["numpy", "scipy", "h5py", "minatar"]


def peer_python():
    out = subprocess.run([os.path.join(ROOT, "bench", "peer-venv"), *PACKAGES], check=True,
                         capture_output=True, text=True).stdout.strip()
    return out


class Policy:
    """The trained network of a herd-rl run's .h5 in NumPy (float64): conv layers (weights
    [O, C, k, k], the config's strides and padding), flatten in (channel, row, column)
    order, dense layers, the config's activation after every layer but the last."""

    def __init__(self, h5_path):
        import h5py
        import numpy as np
        import tomllib
        with h5py.File(h5_path, "r") as h:
            self.config = tomllib.loads(h.attrs["config"])
            self.algorithm = h.attrs["algorithm"]
            self.env_id = h.attrs["env"]
            if self.algorithm == "dqn":
                heads = {"pi": "q_network/encoder.", "vf": None}
                if "q_network/value.weight" in h:
                    sys.exit("minatar_crosseval: dueling Q-networks are not supported")
            else:
                heads = {"pi": "policy/pi.", "vf": "policy/vf."}
            self.layers = {}
            for key, prefix in heads.items():
                if prefix is None:
                    continue
                group, stem = prefix.split("/")
                idx = sorted({int(n.split(".")[1]) for n in h[group] if n.startswith(stem)})
                self.layers[key] = [(np.asarray(h[f"{prefix}{i}.weight"], np.float64),
                                     np.asarray(h[f"{prefix}{i}.bias"], np.float64)) for i in idx]
            if self.algorithm == "dqn":
                self.layers["pi"].append((np.asarray(h["q_network/q.weight"], np.float64),
                                          np.asarray(h["q_network/q.bias"], np.float64)))
        net, env = self.config["network"], self.config["env"]
        if self.config["normalize"]["obs"]:
            sys.exit("minatar_crosseval: the run normalises observations (normalize.obs): not supported")
        if env.get("frame_stack", 1) != 1:
            sys.exit("minatar_crosseval: frame stacks are not supported")
        if self.algorithm != "dqn" and net.get("shared_trunk", False):
            sys.exit("minatar_crosseval: a shared trunk is not supported")
        n_conv = len(net["conv_channels"])
        self.strides = net["conv_strides"] or [1] * n_conv
        self.padding = net["conv_padding"] or [0] * n_conv
        self.act = {"relu": lambda x: np.maximum(x, 0.0), "tanh": np.tanh}[net["activation"]]
        self.epsilon = self.config.get("dqn", {}).get("exploration_final_eps", 0.0)

    def _trunk(self, layers, x):
        import numpy as np
        from numpy.lib.stride_tricks import sliding_window_view
        k = 0
        for j, (w, b) in enumerate(layers):
            if w.ndim == 4:
                s, p = self.strides[k], self.padding[k]
                k += 1
                if p:
                    x = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)))
                win = sliding_window_view(x, w.shape[2:], axis=(2, 3))[:, :, ::s, ::s]
                x = np.einsum("ncijkl,ockl->noij", win, w, optimize=True) + b[None, :, None, None]
            else:
                x = x.reshape(len(x), -1) @ w.T + b
            if j + 1 < len(layers):
                x = self.act(x)
        return x

    def outputs(self, obs):
        """obs [n, C, 10, 10] -> PPO: (log pi [n, A], V [n]); DQN: (Q [n, A], None)."""
        import numpy as np
        x = np.asarray(obs, np.float64)
        head = self._trunk(self.layers["pi"], x)
        if self.algorithm == "dqn":
            return head, None
        z = head - head.max(axis=1, keepdims=True)
        logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
        return logp, self._trunk(self.layers["vf"], x)[:, 0]

    def actions(self, obs, rng, sampled):
        """Actions of obs [n, C, 10, 10]: the mode (DQN: greedy; first maximum, as herd) or
        sampled (DQN: epsilon-greedy with the run's final epsilon)."""
        import numpy as np
        out, _ = self.outputs(obs)
        a = out.argmax(axis=1)
        if not sampled:
            return a
        if self.algorithm == "dqn":
            explore = rng.random(len(a)) < self.epsilon
            return np.where(explore, rng.integers(0, out.shape[1], len(a)), a)
        p = np.exp(out)
        u = rng.random(len(a))[:, None]
        return np.minimum((np.cumsum(p, axis=1) < u).sum(axis=1), out.shape[1] - 1)


class Game:
    """minatar's game through its public API, observations in herd's layout."""

    def __init__(self, env_id, sticky, seed):
        from minatar import Environment
        name = env_id.split("/")[1].split("-")[0]
        self.game = {"SpaceInvaders": "space_invaders"}.get(name, name.lower())
        self.env = Environment(self.game, sticky_action_prob=sticky)
        self.env.seed(seed)
        full = env_id.endswith("-v0")
        self.actions = list(range(self.env.num_actions())) if full else list(self.env.minimal_action_set())

    def obs(self):
        import numpy as np
        return np.transpose(self.env.state(), (2, 0, 1)).astype(np.float32)

    def reset(self):
        self.env.reset()
        return self.obs()

    def step(self, a):
        r, t = self.env.act(self.actions[int(a)])
        return float(r), bool(t), self.obs()


def play_minatar(policy, env_id, episodes, seed, sticky, mode, max_steps, record=False):
    """`episodes` episodes in lockstep (one minatar Environment each, seeded seed + i).
    mode: "mode", "sampled" or "random". Returns returns, lengths, capped count and, with
    record, per episode (first observation, actions, observations, rewards, terminals)."""
    import numpy as np
    rng = np.random.default_rng(seed)
    games = [Game(env_id, sticky, seed + i) for i in range(episodes)]
    obs = np.stack([g.reset() for g in games])
    ret = np.zeros(episodes)
    length = np.zeros(episodes, np.int64)
    live = np.ones(episodes, bool)
    capped = 0
    logs = [{"first": obs[i].copy(), "actions": [], "obs": [], "rewards": [], "terminals": []}
            for i in range(episodes)] if record else None
    n_actions = len(games[0].actions)
    while live.any():
        idx = np.flatnonzero(live)
        if mode == "random":
            acts = rng.integers(0, n_actions, len(idx))
        else:
            acts = policy.actions(obs[idx], rng, mode == "sampled")
        for j, i in enumerate(idx):
            r, t, o = games[i].step(acts[j])
            obs[i] = o
            ret[i] += r
            length[i] += 1
            if record:
                lg = logs[i]
                lg["actions"].append(int(acts[j]))
                lg["obs"].append(o.copy())
                lg["rewards"].append(r)
                lg["terminals"].append(t)
            if t or (max_steps and length[i] >= max_steps):
                live[i] = False
                capped += 0 if t else 1
    return ret, length, capped, logs


def bits(o):
    import numpy as np
    return "".join("1" if v else "0" for v in np.asarray(o).reshape(-1))


def check_forward(policy, binary, ckpt, obs):
    import numpy as np
    with tempfile.TemporaryDirectory(prefix="herd_crosseval_") as tmp:
        path = os.path.join(tmp, "obs.f32")
        np.ascontiguousarray(obs, np.float32).tofile(path)
        out = subprocess.run([binary, "forward", ckpt, path], check=True, capture_output=True, text=True).stdout
    herd = np.array([[float(v) for v in line.split()] for line in out.splitlines()])
    ours, value = policy.outputs(obs)
    mine = ours if value is None else np.column_stack([ours, value])
    diff = np.abs(herd - mine)
    scale = np.maximum(1.0, np.abs(herd))
    return {"observations": int(len(obs)), "max_abs_diff": float(diff.max()),
            "max_rel_diff": float((diff / scale).max()),
            "argmax_agree": float((herd[:, :ours.shape[1]].argmax(1) == ours.argmax(1)).mean()),
            "columns": "log pi(a|obs) per action, then V(obs)" if value is not None else "Q(obs, a) per action"}


def describe_cells(o, channels):
    """Lit cells of an observation [C, 10, 10] as 'name:(row,col)' strings."""
    import numpy as np
    names = {v: k for k, v in channels.items()}
    return [f"{names.get(c, c)}:({r},{x})" for c, r, x in zip(*np.nonzero(o))]


def check_replay(binary, env_id, logs, channels):
    """Replays minatar's recorded episodes in herd's game; per episode the number of steps
    that agree and the first difference."""
    import numpy as np
    with tempfile.TemporaryDirectory(prefix="herd_crosseval_") as tmp:
        path = os.path.join(tmp, "script.txt")
        with open(path, "w") as f:
            for lg in logs:
                f.write(bits(lg["first"]) + "\n" + " ".join(map(str, lg["actions"])) + "\n")
        res = subprocess.run([binary, "replay", env_id, path], capture_output=True, text=True)
    if res.returncode != 0:
        return {"error": res.stderr.strip()}
    episodes, cur = [], []
    for line in res.stdout.splitlines():
        if line == "end":
            episodes.append(cur)
            cur = []
        else:
            r, t, o = line.split()
            cur.append((float(r), t == "1", o))
    shape = logs[0]["first"].shape
    report = []
    for lg, herd in zip(logs, episodes):
        n = len(lg["actions"])
        first = None
        for k in range(n):
            mo = bits(lg["obs"][k])
            if k >= len(herd) or herd[k][2] != mo or herd[k][0] != lg["rewards"][k] or herd[k][1] != lg["terminals"][k]:
                first = k
                break
        item = {"steps": n, "agree_steps": n if first is None else first,
                "minatar_return": float(sum(lg["rewards"]))}
        if first is not None:
            prev = lg["obs"][first - 1] if first > 0 else lg["first"]
            m_obs = np.asarray(lg["obs"][first])
            item["first_difference"] = {
                "step": first + 1, "action": lg["actions"][first],
                "before": describe_cells(prev, channels),
                "minatar": {"reward": lg["rewards"][first], "terminal": lg["terminals"][first],
                            "cells": describe_cells(m_obs, channels)}}
            if first < len(herd):
                h_obs = np.array([int(c) for c in herd[first][2]], np.float32).reshape(shape)
                item["first_difference"]["herd"] = {"reward": herd[first][0], "terminal": herd[first][1],
                                                    "cells": describe_cells(h_obs, channels)}
            else:
                item["first_difference"]["herd"] = "episode already over"
        report.append(item)
    return {"episodes": report}


def stats(x):
    import numpy as np
    x = np.asarray(x, np.float64)
    q = np.quantile(x, [0.05, 0.25, 0.5, 0.75, 0.95])
    return {"n": int(len(x)), "mean": float(x.mean()), "sd": float(x.std(ddof=1)) if len(x) > 1 else 0.0,
            "q05": float(q[0]), "q25": float(q[1]), "median": float(q[2]), "q75": float(q[3]),
            "q95": float(q[4]), "min": float(x.min()), "max": float(x.max())}


def herd_episodes(binary, ckpt, n, sampled):
    out = subprocess.run([binary, "episodes", ckpt, str(n)] + (["--stochastic"] if sampled else []), check=True,
                         capture_output=True, text=True).stdout.splitlines()[1:]
    rows = [line.split(",") for line in out]
    return [float(r[0]) for r in rows], [int(r[1]) for r in rows]


def compare(a, b):
    from scipy import stats as st
    ks = st.ks_2samp(a, b)
    mw = st.mannwhitneyu(a, b, alternative="two-sided")
    return {"ks_D": float(ks.statistic), "ks_p": float(ks.pvalue), "mannwhitney_p": float(mw.pvalue)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("checkpoint")
    ap.add_argument("--h5", help="the run's .h5 (default: the checkpoint's prefix + .h5)")
    ap.add_argument("--episodes", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--replay-episodes", type=int, default=40)
    ap.add_argument("--max-steps", type=int, default=27000, help="cap per evaluation episode (herd-rl eval's)")
    ap.add_argument("--only", choices=["check", "eval"])
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bench", "rl", "bench_minatar_policy"))
    ap.add_argument("--json")
    a = ap.parse_args()
    if a.episodes < 2 or a.replay_episodes < 1:
        sys.exit("minatar_crosseval: --episodes must be >= 2 and --replay-episodes >= 1")
    if not os.access(a.bin, os.X_OK):
        sys.exit(f"minatar_crosseval: {a.bin} is not an executable (build the bench_minatar_policy target)")
    h5 = a.h5 or os.path.splitext(a.checkpoint)[0] + ".h5"
    import numpy as np
    policy = Policy(h5)
    doc = {"checkpoint": a.checkpoint, "env": policy.env_id, "algorithm": policy.algorithm, "seed": a.seed}
    ok = True
    log = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731
    if a.only != "eval":
        channels = Game(policy.env_id, 0.0, 0).env.env.channels
        doc["channels"] = channels
        half = max(1, a.replay_episodes // 2)
        _, _, _, logs_p = play_minatar(policy, policy.env_id, half, a.seed + 50000, 0.0, "sampled", 5000, True)
        _, _, _, logs_r = play_minatar(policy, policy.env_id, half, a.seed + 60000, 0.0, "random", 5000, True)
        obs = np.concatenate([np.stack([lg["first"]] + lg["obs"]) for lg in logs_p + logs_r])
        pick = np.random.default_rng(a.seed).choice(len(obs), min(len(obs), 4000), replace=False)
        doc["forward"] = fw = check_forward(policy, a.bin, a.checkpoint, obs[pick])
        log(f"forward: {fw['observations']} observations from minatar, max |herd - numpy| {fw['max_abs_diff']:.3g} "
            f"(relative {fw['max_rel_diff']:.3g}), argmax agree {fw['argmax_agree']:.4f}")
        ok &= fw["max_rel_diff"] < 1e-4
        for name, logs in (("policy", logs_p), ("random", logs_r)):
            rep = check_replay(a.bin, policy.env_id, logs, channels)
            doc[f"replay_{name}"] = rep
            if "error" in rep:
                log(f"replay ({name} actions): {rep['error']}")
                ok = False
                continue
            eps = rep["episodes"]
            same = sum(e["agree_steps"] == e["steps"] for e in eps)
            steps = sum(e["steps"] for e in eps)
            agree = sum(e["agree_steps"] for e in eps)
            log(f"replay ({name} actions, sticky off): {same}/{len(eps)} episodes identical frame by frame; "
                f"{agree}/{steps} steps before the first difference")
            for k, e in enumerate(eps):
                if "first_difference" in e:
                    d = e["first_difference"]
                    log(f"  episode {k}: first difference at step {d['step']} of {e['steps']} "
                        f"(minatar return {e['minatar_return']:g}); action {d['action']}\n"
                        f"    before:  {' '.join(d['before'])}\n"
                        f"    minatar: r={d['minatar']['reward']:g} t={d['minatar']['terminal']} "
                        f"{' '.join(d['minatar']['cells'])}\n"
                        f"    herd:    " + (d['herd'] if isinstance(d['herd'], str) else
                                            f"r={d['herd']['reward']:g} t={d['herd']['terminal']} "
                                            f"{' '.join(d['herd']['cells'])}"))
    if a.only != "check":
        doc["evaluation"] = {}
        for sampled in (False, True):
            name = "sampled" if sampled else "mode"
            m_ret, m_len, capped, _ = play_minatar(policy, policy.env_id, a.episodes, a.seed, 0.1, name,
                                                   a.max_steps)
            h_ret, h_len = herd_episodes(a.bin, a.checkpoint, a.episodes, sampled)
            r = {"minatar_return": stats(m_ret), "herd_return": stats(h_ret), "minatar_length": stats(m_len),
                 "herd_length": stats(h_len), "minatar_capped": capped, "return_test": compare(m_ret, h_ret),
                 "length_test": compare(m_len, h_len)}
            doc["evaluation"][name] = r
            for what in ("return", "length"):
                mm, hh, t = r[f"minatar_{what}"], r[f"herd_{what}"], r[f"{what}_test"]
                log(f"{name:7} {what:6}: minatar mean {mm['mean']:8.2f} sd {mm['sd']:7.2f} q05/q50/q95 "
                    f"{mm['q05']:g}/{mm['median']:g}/{mm['q95']:g} | herd mean {hh['mean']:8.2f} sd {hh['sd']:7.2f} "
                    f"q05/q50/q95 {hh['q05']:g}/{hh['median']:g}/{hh['q95']:g} | KS D {t['ks_D']:.3f} "
                    f"p {t['ks_p']:.3g}, Mann-Whitney p {t['mannwhitney_p']:.3g}")
    text = json.dumps(doc, indent=1)
    if a.json:
        with open(a.json, "w") as f:
            f.write(text)
    else:
        print(text)
    return 0 if ok else 1


if __name__ == "__main__":
    if os.environ.get("HERD_CROSSEVAL_CHILD") != "1":
        python = peer_python()
        os.environ["HERD_CROSSEVAL_CHILD"] = "1"
        os.execv(python, [python, os.path.abspath(__file__)] + sys.argv[1:])
    sys.exit(main())

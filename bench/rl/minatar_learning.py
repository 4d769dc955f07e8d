#!/usr/bin/env python3
"""MinAtar learning against Stable-Baselines3: herd-rl's DQN and PPO presets and SB3's DQN
and PPO with the same network and hyperparameters, the same frames, interleaved in one run
(herd seed s, SB3 seed s, herd seed s+1, ...). By hand only, never in CI.

Per game in {breakout, freeway} and algorithm in {dqn, ppo}:
  herd: `herd-rl train examples/rl/minatar_<game>_<algo>.toml --set total_steps=F ...`
  SB3:  DQN / PPO on a Gymnasium wrapper of PyPI's `minatar` (bench/rl/minatar_gym.py),
        every hyperparameter taken from the same preset TOML (a key that cannot be mapped
        stops the run with its name), the features extractor = herd's encoder.
Both sides run in child processes with one thread (herd-rl's serial sampler and nn on one
thread; torch.set_num_threads(1)). Reported per run: wall seconds, CPU seconds (user + sys
of the child), frames/s (frames / wall), all of the whole child process (SB3's include
importing torch; its learn() alone is reported as learn_wall_s / learn_cpu_s), and the
final return = mean return of the last 100 *training* episodes (herd: the progress CSV's
return_mean of the last iteration; SB3: its Monitor episode buffer of 100), i.e. with
DQN's epsilon-greedy exploration and PPO's sampled actions on both sides. F is rounded up
to a whole number of iterations of the preset (num_envs x num_steps) so both sides train
the same frames; frames = env steps (MinAtar has no frame skip, as in the MinAtar paper).

DQN's epsilon decays over the preset's absolute number of frames (exploration_fraction x
the preset's total_steps: the paper's 100000) when F is at least that, else over all of F
(herd and SB3 alike; both take a fraction of the run).

--sb3-log DIR writes SB3's logger (its train/ and rollout/ keys, one row per iteration) to
DIR/sb3_<game>_<algo>_<seed>/progress.csv, to compare with herd-rl's progress CSV (--keep).
--schedule-frames S (PPO only): both sides anneal as if the run had S frames (herd:
total_steps = S and --stop-after; SB3: learn(S) stopped after F frames), so the first F
frames of an S-frame run are trained (e.g. the first 1M frames of the preset's 5M).

--sides herd or --sides sb3 runs one side only (two such invocations side by side run
the sides concurrently instead of interleaved; the table then needs both documents).

Prints one JSON document on stdout and a table of herd/SB3 ratios on stderr.

Usage: bench/rl/minatar_learning.py --frames F [--seeds 0,1] [--games breakout,freeway]
           [--algos dqn,ppo] [--herd-rl build/apps/herd-rl] [--presets examples/rl] [--keep DIR]
           [--sb3-log DIR] [--schedule-frames S]
"""
import argparse
import csv
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
import tomllib
from functools import partial

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

# Keys of the preset that do not change what is learnt (bookkeeping of herd-rl's run).
BOOKKEEPING = {"env", "algorithm", "total_steps", "output_prefix", "checkpoint_period_seconds",
               "checkpoint_period", "progress_period", "seed", "device", "sampler.kind",
               "sampler.num_threads", "max_memory", "logging.tensorboard"}


class UnmappedKey(Exception):
    pass


def flatten(d, prefix=""):
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(flatten(v, prefix + k + "."))
        else:
            out[prefix + k] = v
    return out


def take(cfg, used, key, default):
    used.add(key)
    return cfg.get(key, default)


def encoder_kwargs(cfg, used):
    ch = take(cfg, used, "network.conv_channels", [])
    ks = take(cfg, used, "network.conv_kernels", [])
    st = take(cfg, used, "network.conv_strides", []) or [1] * len(ch)
    pd = take(cfg, used, "network.conv_padding", []) or [0] * len(ch)
    act = take(cfg, used, "network.activation", "tanh")
    if act not in ("relu", "tanh"):
        raise UnmappedKey(f'network.activation = "{act}" (only relu and tanh are mapped)')
    if not (len(ch) == len(ks) == len(st) == len(pd)):
        raise UnmappedKey("network.conv_* lists of unequal lengths")
    return dict(channels=ch, kernels=ks, strides=st, padding=pd,
                hidden=take(cfg, used, "network.hidden", [64, 64]), activation=act)


def sb3_spec(algo, cfg, frames):
    """SB3 constructor arguments from the flattened herd preset `cfg`; raises UnmappedKey
    for any key of the preset that is not mapped (or a value SB3 has no equivalent for)."""
    used = set(BOOKKEEPING)
    n_envs = take(cfg, used, "sampler.num_envs", 8)
    take(cfg, used, "sampler.num_steps", 128)
    for key in ("normalize.obs", "normalize.reward"):
        if take(cfg, used, key, False):
            raise UnmappedKey(f"{key} = true (not mapped: add VecNormalize)")
    enc = encoder_kwargs(cfg, used)
    gamma = take(cfg, used, "algo.gamma", 0.99)
    init = take(cfg, used, "network.init", "orthogonal")
    if init not in ("orthogonal", "pytorch"):
        raise UnmappedKey(f'network.init = "{init}"')
    # herd's orthogonal init is SB3's ortho_init=True (encoder gain sqrt 2, policy head 0.01,
    # value head 1, zero biases); "pytorch" keeps PyTorch's defaults. SB3's DQN has no
    # ortho_init: the worker applies it to the Q-network's encoder (herd's Q head keeps
    # PyTorch's default either way).
    spec = {"n_envs": n_envs, "encoder": enc, "ortho_init": init == "orthogonal"}
    if algo == "ppo":
        n_steps = cfg.get("sampler.num_steps", 128)
        nmb = take(cfg, used, "algo.num_minibatches", 0)
        mbs = take(cfg, used, "algo.minibatch_size", 256)
        if take(cfg, used, "algo.optimizer", "adam") != "adam":
            raise UnmappedKey("algo.optimizer (only adam is mapped for PPO)")
        for key, dflt in (("algo.lr_scaling", "none"), ("algo.lr_warmup_iterations", 0)):
            if take(cfg, used, key, dflt) != dflt:
                raise UnmappedKey(f"{key} = {cfg[key]!r}")
        clip_vf = take(cfg, used, "algo.clip_range_vf", 0.0)
        spec["kwargs"] = dict(
            n_steps=n_steps,
            batch_size=(n_envs * n_steps) // nmb if nmb else mbs,
            n_epochs=take(cfg, used, "algo.epochs", 10),
            gamma=gamma,
            gae_lambda=take(cfg, used, "algo.gae_lambda", 0.95),
            ent_coef=take(cfg, used, "algo.ent_coef", 0.0),
            vf_coef=take(cfg, used, "algo.vf_coef", 0.5),
            max_grad_norm=take(cfg, used, "algo.max_grad_norm", 0.5),
            normalize_advantage=take(cfg, used, "algo.normalize_advantage", True),
            clip_range_vf=clip_vf if clip_vf > 0 else None)
        spec["learning_rate"] = take(cfg, used, "algo.learning_rate", 3e-4)
        spec["anneal_lr"] = take(cfg, used, "algo.anneal_lr", False)
        spec["clip_range"] = take(cfg, used, "algo.clip_range", 0.2)
        spec["anneal_clip"] = take(cfg, used, "algo.anneal_clip", False)
        spec["optimizer_eps"] = take(cfg, used, "algo.optimizer_eps", 1e-5)
        spec["shared_trunk"] = take(cfg, used, "network.shared_trunk", False)
    elif algo == "dqn":
        for key in ("dqn.double_q", "dqn.dueling", "dqn.prioritized"):
            if take(cfg, used, key, False):
                raise UnmappedKey(f"{key} = true (SB3's DQN has no equivalent)")
        for key in ("dqn.alpha", "dqn.beta0", "dqn.priority_eps"):
            used.add(key)  # prioritized replay only (refused above)
        opt = take(cfg, used, "dqn.optimizer", "adam")
        eps = take(cfg, used, "dqn.optimizer_eps", 1e-8)
        alpha = take(cfg, used, "dqn.rmsprop_alpha", 0.95)
        centered = take(cfg, used, "dqn.rmsprop_centered", False)
        grad = take(cfg, used, "dqn.max_grad_norm", 10.0)
        total = cfg.get("total_steps", frames)
        fraction = take(cfg, used, "dqn.exploration_fraction", 0.1)
        spec["epsilon_frames"] = min(frames, fraction * total)
        spec["optimizer"] = opt
        spec["optimizer_kwargs"] = ({"alpha": alpha, "eps": eps, "centered": centered} if opt == "rmsprop"
                                    else {"eps": eps})
        spec["kwargs"] = dict(
            learning_rate=take(cfg, used, "dqn.learning_rate", 1e-4),
            buffer_size=take(cfg, used, "dqn.buffer_size", 1000000),
            learning_starts=take(cfg, used, "dqn.learning_starts", 100),
            batch_size=take(cfg, used, "dqn.batch_size", 32),
            tau=take(cfg, used, "dqn.tau", 1.0),
            gamma=gamma,
            train_freq=(take(cfg, used, "dqn.train_freq", 4), "step"),
            gradient_steps=take(cfg, used, "dqn.gradient_steps", 1),
            n_steps=take(cfg, used, "dqn.n_step", 1),
            target_update_interval=take(cfg, used, "dqn.target_update_interval", 10000),
            exploration_fraction=spec["epsilon_frames"] / frames,
            exploration_initial_eps=take(cfg, used, "dqn.exploration_initial_eps", 1.0),
            exploration_final_eps=take(cfg, used, "dqn.exploration_final_eps", 0.05),
            max_grad_norm=grad if grad > 0 else math.inf)
    else:
        raise UnmappedKey(f'algorithm "{algo}"')
    left = sorted(set(cfg) - used)
    if left:
        raise UnmappedKey(", ".join(left))
    return spec


def run_child(cmd, env=None):
    """Runs `cmd`; returns (stdout, wall seconds, CPU seconds of the child)."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        sys.exit(f"minatar_learning: {' '.join(cmd)} exited {p.returncode}:\n{p.stderr[-3000:]}")
    return p.stdout, wall, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def run_herd(herd_rl, preset, frames, seed, epsilon_frames, tmp, schedule_frames=None, per_iter=None):
    prefix = os.path.join(tmp, f"herd_{os.path.basename(preset)[:-5]}_{seed}")
    cmd = [herd_rl, "train", preset, "--set", f"total_steps={schedule_frames or frames}", "--set", f"seed={seed}",
           "--set", f"output_prefix={prefix}", "--set", "checkpoint_period_seconds=1000000000",
           "--overwrite", "--quiet"]
    if schedule_frames:
        cmd += ["--stop-after", str(frames // per_iter)]
    if epsilon_frames is not None:
        cmd += ["--set", f"dqn.exploration_fraction={epsilon_frames / frames!r}"]
    _, wall, cpu = run_child(cmd, env=dict(os.environ, OMP_NUM_THREADS="1"))
    with open(prefix + "_progress.csv") as f:
        last = list(csv.DictReader(f))[-1]
    return {"side": "herd", "seed": seed, "frames": int(float(last["env_steps"])), "wall_s": wall,
            "cpu_s": cpu, "final_return": float(last["return_mean"]),
            "episodes": int(float(last["episodes"]))}


def run_sb3(python, game, algo, spec, frames, seed, log_dir=None, schedule_frames=None):
    job = json.dumps({"game": game, "algo": algo, "spec": spec, "frames": frames, "seed": seed,
                      "log_dir": log_dir and os.path.join(log_dir, f"sb3_{game}_{algo}_{seed}"),
                      "schedule_frames": schedule_frames})
    out, wall, cpu = run_child([python, os.path.abspath(__file__), "--sb3-worker", job],
                               env=dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1"))
    res = json.loads(out.strip().splitlines()[-1])
    res.update({"side": "sb3", "seed": seed, "wall_s": wall, "cpu_s": cpu})
    return res


def sb3_worker(job):
    """Child process: one SB3 run; prints {frames, final_return, episodes} as JSON."""
    import torch as th
    th.set_num_threads(1)
    from stable_baselines3 import DQN, PPO
    from stable_baselines3.common.monitor import Monitor
    from stable_baselines3.common.vec_env import DummyVecEnv
    sys.path.insert(0, HERE)
    from minatar_gym import MinAtarGymEnv, conv_extractor_class

    j = json.loads(job)
    spec, frames, seed = j["spec"], j["frames"], j["seed"]
    venv = DummyVecEnv([lambda: Monitor(MinAtarGymEnv(j["game"])) for _ in range(spec["n_envs"])])
    pk = dict(features_extractor_class=conv_extractor_class(), features_extractor_kwargs=spec["encoder"])
    kw = dict(spec["kwargs"])
    if j["algo"] == "ppo":
        lr, clip = spec["learning_rate"], spec["clip_range"]
        kw["learning_rate"] = (lambda p: lr * p) if spec["anneal_lr"] else lr
        kw["clip_range"] = (lambda p: clip * p) if spec["anneal_clip"] else clip
        pk.update(net_arch=dict(pi=[], vf=[]), share_features_extractor=spec["shared_trunk"],
                  optimizer_kwargs={"eps": spec["optimizer_eps"]}, ortho_init=spec["ortho_init"])
        model = PPO("MlpPolicy", venv, policy_kwargs=pk, seed=seed, device="cpu", **kw)
    else:
        kw["train_freq"] = tuple(kw["train_freq"])
        pk.update(net_arch=[], optimizer_class=th.optim.RMSprop if spec["optimizer"] == "rmsprop" else th.optim.Adam,
                  optimizer_kwargs=spec["optimizer_kwargs"])
        model = DQN("MlpPolicy", venv, policy_kwargs=pk, seed=seed, device="cpu", **kw)
        if spec["ortho_init"]:
            from stable_baselines3.common.policies import BasePolicy
            model.q_net.features_extractor.apply(partial(BasePolicy.init_weights, gain=math.sqrt(2)))
            model.q_net_target.load_state_dict(model.q_net.state_dict())
    if j.get("log_dir"):
        from stable_baselines3.common.logger import configure
        os.makedirs(j["log_dir"], exist_ok=True)
        model.set_logger(configure(j["log_dir"], ["csv"]))
    callback = None
    if j.get("schedule_frames"):
        from stable_baselines3.common.callbacks import BaseCallback

        class StopAt(BaseCallback):  # anneal over schedule_frames, stop after `frames`
            def _on_step(self):
                return self.num_timesteps <= frames  # the F-th frame's rollout is trained

        callback = StopAt()
    w0, c0 = time.perf_counter(), time.process_time()
    model.learn(total_timesteps=j.get("schedule_frames") or frames, callback=callback)
    learn_wall, learn_cpu = time.perf_counter() - w0, time.process_time() - c0
    eps = list(model.ep_info_buffer)
    ret = sum(e["r"] for e in eps) / len(eps) if eps else float("nan")
    print(json.dumps({"frames": int(model.num_timesteps), "final_return": ret, "episodes_in_mean": len(eps),
                      "learn_wall_s": learn_wall, "learn_cpu_s": learn_cpu}))


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--sb3-worker":
        return sb3_worker(sys.argv[2])
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--frames", type=int, required=True, help="env steps per run (rounded up to whole iterations)")
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--games", default="breakout,freeway")
    ap.add_argument("--algos", default="dqn,ppo")
    ap.add_argument("--sides", default="herd,sb3", help="which sides to run (one of them: to run both concurrently)")
    ap.add_argument("--herd-rl", default=os.path.join(ROOT, "build", "apps", "herd-rl"))
    ap.add_argument("--presets", default=os.path.join(ROOT, "examples", "rl"))
    ap.add_argument("--keep", metavar="DIR",
                    help="write herd-rl's outputs (checkpoint, .h5, progress CSV) to DIR and keep them "
                         "(default: a temporary folder, removed at the end)")
    ap.add_argument("--sb3-log", metavar="DIR",
                    help="write SB3's logger CSV (train/ keys per iteration) to DIR/sb3_<game>_<algo>_<seed>/")
    ap.add_argument("--schedule-frames", type=int, metavar="S",
                    help="PPO: anneal as in an S-frame run on both sides and stop after --frames")
    a = ap.parse_args()
    if a.frames < 1:
        sys.exit(f"minatar_learning: --frames is {a.frames}, but must be >= 1")
    for opt, value, allowed in (("--sides", a.sides, ("herd", "sb3")), ("--algos", a.algos, ("dqn", "ppo"))):
        bad = [v for v in value.split(",") if v not in allowed]
        if bad:
            sys.exit(f"minatar_learning: {opt} is {value!r}, but its items must be among {', '.join(allowed)}")
    if a.schedule_frames is not None and (a.schedule_frames < a.frames or a.algos != "ppo"):
        sys.exit(f"minatar_learning: --schedule-frames is {a.schedule_frames}, but needs --algos ppo and "
                 f"must be >= --frames ({a.frames})")
    if not os.access(a.herd_rl, os.X_OK):
        sys.exit(f"minatar_learning: {a.herd_rl} is not an executable (build the herd-rl target, or pass --herd-rl)")
    python = subprocess.run([os.path.join(ROOT, "bench", "peer-venv"), "torch", "stable-baselines3", "gymnasium",
                             "minatar"], check=True, capture_output=True, text=True).stdout.strip()
    seeds = [int(s) for s in a.seeds.split(",")]
    runs = []
    for game in a.games.split(","):
        for algo in a.algos.split(","):
            preset = os.path.join(a.presets, f"minatar_{game}_{algo}.toml")
            try:
                with open(preset, "rb") as f:
                    cfg = flatten(tomllib.load(f))
            except OSError as e:
                sys.exit(f"minatar_learning: cannot read preset {preset}: {e.strerror}")
            per_iter = cfg.get("sampler.num_envs", 8) * cfg.get("sampler.num_steps", 128)
            frames = -(-a.frames // per_iter) * per_iter
            schedule = -(-a.schedule_frames // per_iter) * per_iter if a.schedule_frames else None
            try:
                spec = sb3_spec(algo, cfg, frames)
            except UnmappedKey as e:
                sys.exit(f"minatar_learning: {preset}: cannot map to Stable-Baselines3: {e}")
            with tempfile.TemporaryDirectory(prefix="herd_minatar_") as tmp:
                for s in seeds:
                    for side in a.sides.split(","):
                        print(f"minatar_learning: {game} {algo} {side} seed {s}, {frames} frames ...", file=sys.stderr,
                              flush=True)
                        r = (run_herd(a.herd_rl, preset, frames, s, spec.get("epsilon_frames"), a.keep or tmp,
                                      schedule, per_iter)
                             if side == "herd"
                             else run_sb3(python, game, algo, spec, frames, s, a.sb3_log, schedule))
                        r.update({"game": game, "algo": algo, "frames_per_s": r["frames"] / r["wall_s"]})
                        runs.append(r)
                        print(f"  wall {r['wall_s']:.1f} s, cpu {r['cpu_s']:.1f} s, {r['frames_per_s']:.0f} frames/s, "
                              f"return {r['final_return']:.2f}", file=sys.stderr, flush=True)
    doc = {"benchmark": "MinAtar learning, herd-rl vs Stable-Baselines3 (same network, hyperparameters, frames)",
           "final_return": "mean return of the last 100 training episodes (exploration/sampled actions included)",
           "frames_requested": a.frames, "seeds": seeds, "load_average": os.getloadavg(), "runs": runs}
    print(json.dumps(doc, indent=2))
    print(f"\n{'game':9} {'algo':4} {'seed':>4} {'herd ret':>8} {'sb3 ret':>8} {'herd f/s':>8} {'sb3 f/s':>8} "
          f"{'wall h/s':>8} {'cpu h/s':>8}", file=sys.stderr)
    for h in (r for r in runs if r["side"] == "herd"):
        s = next((r for r in runs if r["side"] == "sb3" and all(r[k] == h[k] for k in ("game", "algo", "seed"))), None)
        if s is None:
            continue
        print(f"{h['game']:9} {h['algo']:4} {h['seed']:>4} {h['final_return']:8.2f} {s['final_return']:8.2f} "
              f"{h['frames_per_s']:8.0f} {s['frames_per_s']:8.0f} {h['wall_s'] / s['wall_s']:8.3f} "
              f"{h['cpu_s'] / s['cpu_s']:8.3f}", file=sys.stderr)


if __name__ == "__main__":
    main()

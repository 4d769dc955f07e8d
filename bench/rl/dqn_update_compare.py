#!/usr/bin/env python3
"""herd's DQN update against Stable-Baselines3's on identical inputs (never run in CI).

  dqn_update_compare.py HERD.h5 [--preset TOML] [--sb3-frames N] [--json FILE]

HERD.h5 is build/bench/rl/dqn_update_dump's record of K consecutive herd gradient steps
(the networks and RMSprop state before the first, every step's minibatch, TD targets,
loss, gradient and parameters after it; epsilon, gradient steps and target changes per
frame). Runs in the bench venv (~/.cache/herd/bench-venv: torch, stable-baselines3,
gymnasium, minatar, h5py; started with another interpreter, the script re-executes itself
there).

1. Same inputs. Builds SB3's DQN with bench/rl/minatar_learning.py's mapping of the preset
   (the MinAtar network as features extractor, net_arch [], torch RMSprop with the preset's
   alpha, eps and centred flag, smooth L1 loss, no clipping: max_grad_norm inf), loads
   herd's online and target parameters into `q_net` and `q_net_target` and herd's
   "square_avg" / "grad_avg" into torch RMSprop's state, then for each recorded step at
   frame f calls SB3's own `_on_step()` as `collect_rollouts` does after frame f
   (`_n_calls` = f: its target copy and epsilon) and its own `train(1, N)` with the replay
   buffer's `sample` returning herd's minibatch (dones = herd's discount 0, rewards = herd's
   returns). SB3's TD targets and Q(s, a) are captured from its `smooth_l1_loss` call, its
   gradient from its `clip_grad_norm_` call (before clipping; nothing is clipped), its
   parameters after its `optimizer.step()`. SB3 runs free from the first step on (its own
   parameters and target network; herd's only as the start), so differences can grow.
2. Schedules. herd's `exploration_epsilon` at every frame of the preset's total_steps
   against SB3's `exploration_schedule(1 - t / total)`; herd's epsilon per frame in the run
   against SB3's rate set by `_on_step` after the frame before; and with --sb3-frames N > 0
   (default 6001) SB3's own `learn()` on minatar (stopped after N frames by a callback)
   logging the frames at which it trains, copies the target (`polyak_update` calls) and the
   epsilon each frame's action used, against herd's frames from the dump.

Parameter mapping: herd "encoder.0" (conv [16, C, 3, 3] = torch's [out, in, kh, kw]) is
`features_extractor.net.0` of SB3's `QNetwork`, "encoder.3" (linear [128, 1024] = torch's
[out, in]; herd flattens the conv output in (channel, row, column) order, as torch's
Flatten of NCHW) is `features_extractor.net.3`, "q" is `q_net.0`.
"""
import argparse
import json
import os
import sys
import tomllib

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
VENV_PY = os.path.expanduser(os.environ.get("HERD_BENCH_VENV", "~/.cache/herd/bench-venv")) + "/bin/python"
PRESET = os.path.join(ROOT, "examples", "rl", "minatar_breakout_dqn.toml")
MAP = {"encoder.0": "features_extractor.net.0", "encoder.3": "features_extractor.net.3", "q": "q_net.0"}


def reexec():
    if os.path.realpath(sys.executable) != os.path.realpath(VENV_PY) and os.path.exists(VENV_PY):
        os.execv(VENV_PY, [VENV_PY, os.path.abspath(__file__), *sys.argv[1:]])


def torch_name(herd_name):
    layer, kind = herd_name.rsplit(".", 1)
    return f"{MAP[layer]}.{kind}"


def build_model(preset, seed):
    """SB3's DQN as minatar_learning.py's worker builds it (one thread), set up to learn the
    preset's total_steps; returns (model, cfg, total)."""
    import torch as th
    th.set_num_threads(1)
    from stable_baselines3 import DQN
    from stable_baselines3.common.monitor import Monitor
    from stable_baselines3.common.vec_env import DummyVecEnv
    sys.path.insert(0, HERE)
    from minatar_gym import MinAtarGymEnv, conv_extractor_class
    from minatar_learning import flatten, sb3_spec
    with open(preset, "rb") as f:
        cfg = flatten(tomllib.load(f))
    game = cfg["env"].split("/")[1].split("-")[0].lower()
    total = cfg["total_steps"]
    spec = sb3_spec("dqn", cfg, total)
    venv = DummyVecEnv([lambda: Monitor(MinAtarGymEnv(game)) for _ in range(spec["n_envs"])])
    pk = dict(features_extractor_class=conv_extractor_class(), features_extractor_kwargs=spec["encoder"])
    kw = dict(spec["kwargs"])
    kw["train_freq"] = tuple(kw["train_freq"])
    pk.update(net_arch=[], optimizer_class=th.optim.RMSprop if spec["optimizer"] == "rmsprop" else th.optim.Adam,
              optimizer_kwargs=spec["optimizer_kwargs"])
    model = DQN("MlpPolicy", venv, policy_kwargs=pk, seed=seed, device="cpu", **kw)
    return model, cfg, total


def load_herd_state(model, h, names):
    import torch as th
    on, tg = model.q_net.state_dict(), model.q_net_target.state_dict()
    with th.no_grad():
        for n in names:
            for sd, src in ((on, h["init/online"][n][:]), (tg, h["init/target"][n][:])):
                t = sd[torch_name(n)]
                assert tuple(t.shape) == src.shape, (n, t.shape, src.shape)
                t.copy_(th.as_tensor(src))
    opt = model.policy.optimizer
    by_param = {p: name for name, p in model.q_net.named_parameters()}
    herd_of = {torch_name(n): n for n in names}
    group = opt.param_groups[0]
    o = h["init/optimizer"]
    assert abs(group["lr"] - float(o["lr"][0])) <= 1e-7 * group["lr"], (group["lr"], o["lr"][0])  # stored as float32
    steps = float(o["step"][0])
    centred = group.get("centered", False)
    for p in group["params"]:
        n = herd_of[by_param[p]]
        st = {"step": th.tensor(steps), "square_avg": th.as_tensor(o[f"{n}.square_avg"][:]).clone()}
        if centred:
            st["grad_avg"] = th.as_tensor(o[f"{n}.grad_avg"][:]).clone()
        if group.get("momentum", 0) > 0:
            st["momentum_buffer"] = th.zeros_like(p)
        opt.state[p] = st
    assert len(group["params"]) == len(names)
    return {k: group[k] for k in ("lr", "alpha", "eps", "centered", "momentum", "weight_decay")}


def rel(a, b):
    import numpy as np
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-30))


def same_inputs(model, h, names, total):
    """Part 1: SB3's _on_step and train() on herd's recorded minibatches, step by step."""
    import numpy as np
    import torch as th
    import torch.nn.functional as F
    from stable_baselines3.common.type_aliases import ReplayBufferSamples
    s = h["step"]
    K, N = s["actions"].shape
    cur = {}
    orig_loss, orig_clip, orig_step = F.smooth_l1_loss, th.nn.utils.clip_grad_norm_, model.policy.optimizer.step

    def sample(batch_size, env=None):
        k = cur["k"]
        assert batch_size == N
        disc = s["discounts"][k]
        gamma = float(h["gamma"][()])
        assert np.all((disc == 0) | (np.abs(disc - gamma) < 1e-15)), "n-step or another discount: not mapped"
        assert np.all(s["weights"][k] == 1.0), "importance weights: not mapped"
        return ReplayBufferSamples(
            observations=th.as_tensor(s["obs"][k]), actions=th.as_tensor(s["actions"][k]).reshape(N, 1),
            next_observations=th.as_tensor(s["next_obs"][k]),
            dones=th.as_tensor((disc == 0).astype(np.float32)).reshape(N, 1),
            rewards=th.as_tensor(s["returns"][k].astype(np.float32)).reshape(N, 1))

    def smooth_l1_loss(inp, target, *a, **k):
        out = orig_loss(inp, target, *a, **k)
        cur["q"] = inp.detach().numpy().reshape(-1).copy()
        cur["y"] = target.detach().numpy().reshape(-1).copy()
        cur["loss"] = out.item()
        return out

    def clip_grad_norm_(parameters, max_norm, *a, **k):
        cur["grad"] = {n: p.grad.detach().numpy().copy() for n, p in model.q_net.named_parameters()}
        cur["max_norm"] = max_norm
        return orig_clip(parameters, max_norm, *a, **k)

    def step(*a, **k):
        out = orig_step(*a, **k)
        cur["params"] = {n: p.detach().numpy().copy() for n, p in model.q_net.named_parameters()}
        return out

    model.replay_buffer.sample = sample
    F.smooth_l1_loss = smooth_l1_loss
    th.nn.utils.clip_grad_norm_ = clip_grad_norm_
    model.policy.optimizer.step = step
    init = {n: h["init/online"][n][:] for n in names}
    rows = []
    try:
        for k in range(K):
            f = int(s["frame"][k])
            cur.clear()
            cur["k"] = k
            before = {n: p.detach().numpy().copy() for n, p in model.q_net_target.named_parameters()}
            # collect_rollouts after frame f: num_timesteps = f, progress, then _on_step (n_calls = f).
            model.num_timesteps = f
            model._update_current_progress_remaining(f, total)
            model._n_calls = f - 1
            model._on_step()
            copied = any(not np.array_equal(before[n], p.detach().numpy())
                         for n, p in model.q_net_target.named_parameters())
            tgt = {n: p.detach().numpy() for n, p in model.q_net_target.named_parameters()}
            target_used = max(float(np.max(np.abs(tgt[torch_name(n)] - s["target"][n][k]))) for n in names)
            model.train(gradient_steps=1, batch_size=N)
            hy = s["targets"][k]
            hq = s["td_errors"][k] + hy
            hg = {n: s["grad"][n][k] for n in names}
            hp = {n: s["params"][n][k] for n in names}
            row = {
                "frame": f, "sb3_target_copied": bool(copied), "target_net_max_abs": target_used,
                "targets_max_abs": float(np.max(np.abs(cur["y"] - hy))), "targets_rel": rel(cur["y"], hy),
                "q_max_abs": float(np.max(np.abs(cur["q"] - hq))), "q_rel": rel(cur["q"], hq),
                "loss_herd": float(s["loss"][k]), "loss_sb3": cur["loss"],
                "loss_rel": abs(cur["loss"] - float(s["loss"][k])) / max(abs(float(s["loss"][k])), 1e-30),
                "grad_rel": max(rel(cur["grad"][torch_name(n)], hg[n]) for n in names),
                "grad_rel_by_tensor": {n: rel(cur["grad"][torch_name(n)], hg[n]) for n in names},
                "param_max_abs": max(float(np.max(np.abs(cur["params"][torch_name(n)] - hp[n]))) for n in names),
                # in float32 spacings (ulps) of the tensor's largest element
                "param_ulps": max(float(np.max(np.abs(cur["params"][torch_name(n)] - hp[n])) /
                                        np.spacing(np.max(np.abs(hp[n])).astype(np.float32))) for n in names),
                "param_rel_change": max(float(np.max(np.abs(cur["params"][torch_name(n)] - hp[n])) /
                                              max(np.max(np.abs(hp[n] - init[n])), 1e-30)) for n in names),
                "param_rel_step": max(float(np.max(np.abs(cur["params"][torch_name(n)] - hp[n])) /
                                            max(np.max(np.abs(hp[n] - (s["params"][n][k - 1] if k else init[n]))),
                                                1e-30)) for n in names),
                "sb3_epsilon_next": float(model.exploration_rate), "max_norm": float(cur["max_norm"])}
            rows.append(row)
    finally:
        F.smooth_l1_loss, th.nn.utils.clip_grad_norm_ = orig_loss, orig_clip
        del model.replay_buffer.sample, model.policy.optimizer.step
    return rows


def sb3_run_frames(preset, seed, frames):
    """SB3's own learn() for `frames` frames: the frames at which it trains and copies the
    target, and the epsilon each frame's action used (index f - 1 for frame f)."""
    import stable_baselines3.dqn.dqn as dqn_mod
    from stable_baselines3.common.callbacks import BaseCallback
    model, cfg, total = build_model(preset, seed)
    log = {"train": [], "copy": [], "eps": []}
    orig_polyak, orig_train, orig_sample = dqn_mod.polyak_update, model.train, model._sample_action
    copies = {"n": 0}

    def polyak(params, target_params, tau):
        copies["n"] += 1
        if copies["n"] % 2 == 1:  # _on_step calls it twice: parameters, then batch-norm statistics
            log["copy"].append(model.num_timesteps)
        return orig_polyak(params, target_params, tau)

    def train(gradient_steps, batch_size=100):
        log["train"].extend([model.num_timesteps] * gradient_steps)
        return orig_train(gradient_steps, batch_size)

    def sample_action(learning_starts, action_noise=None, n_envs=1):
        warm = model.num_timesteps < learning_starts
        log["eps"].append(1.0 if warm else float(model.exploration_rate))
        return orig_sample(learning_starts, action_noise, n_envs)

    class Stop(BaseCallback):
        def _on_step(self):
            return self.num_timesteps < frames

    dqn_mod.polyak_update = polyak
    model.train, model._sample_action = train, sample_action
    try:
        model.learn(total_timesteps=total, callback=Stop())
    finally:
        dqn_mod.polyak_update = orig_polyak
    # The callback stops collect_rollouts after frame `frames`, before its _on_step and train.
    return log, int(model.num_timesteps)


def main():
    reexec()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("herd")
    ap.add_argument("--preset", default=PRESET)
    ap.add_argument("--sb3-frames", type=int, default=6001,
                    help="frames of SB3's own learn() for the timing check (0: skip)")
    ap.add_argument("--json")
    a = ap.parse_args()
    import h5py
    import numpy as np
    h = h5py.File(a.herd, "r")
    names = list(h["init/online"].keys())
    seed = int(h["seed"][()])
    model, cfg, total = build_model(a.preset, seed)
    assert total == int(h["total_steps"][()]), "preset and dump disagree on total_steps"
    model._setup_learn(total, None)
    from stable_baselines3.common.logger import configure
    model.set_logger(configure(None, []))
    opt = load_herd_state(model, h, names)
    out = {"herd": a.herd, "seed": seed, "sb3_optimizer": opt, "max_grad_norm": model.max_grad_norm,
           "target_update_interval": model.target_update_interval, "learning_starts": model.learning_starts}
    rows = same_inputs(model, h, names, total)
    out["steps"] = rows

    # Schedules: herd's epsilon at every frame against SB3's schedule.
    sched = h["schedule/epsilon"][:]
    sb3 = np.array([model.exploration_schedule(1.0 - float(t) / float(total)) for t in range(total + 1)])
    d = np.abs(sched - sb3)
    out["schedule"] = {"frames": total + 1, "max_abs": float(d.max()), "frames_differing": int((d > 0).sum()),
                       "first_final_herd": int(np.argmax(sched == sched[-1])),
                       "first_final_sb3": int(np.argmax(sb3 == sb3[-1]))}
    eps_run = h["frame/epsilon"][:]  # herd's trainer, before frame f's action (index f - 1)
    t = np.arange(len(eps_run))
    out["run_epsilon_vs_schedule_max_abs"] = float(np.max(np.abs(eps_run - sched[t])))
    gs = h["frame/gradient_steps"][:]
    out["herd_first_train_frame"] = int(np.argmax(gs > 0)) + 1
    out["herd_target_changed_frames"] = [int(i) + 1 for i in np.nonzero(h["frame/target_changed"][:])[0]]
    if a.sb3_frames > 0:
        log, done = sb3_run_frames(a.preset, seed, a.sb3_frames)
        ls = int(h["learning_starts"][()])
        he = np.where(t < ls, 1.0, eps_run)  # herd acts uniformly at random before learning_starts
        se = np.array(log["eps"])
        n = min(len(he), len(se))
        out["sb3_run"] = {"frames": done, "first_train_frame": log["train"][0] if log["train"] else None,
                          "gradient_steps": len(log["train"]), "copy_frames": log["copy"],
                          "epsilon_frames_compared": n,
                          "epsilon_max_abs_vs_herd": float(np.max(np.abs(he[:n] - se[:n])))}
        # SB3 stopped after frame `done`, before training on it: its last train() was at done - 1.
        out["sb3_run"]["last_train_frame"] = done - 1
        out["herd_gradient_steps_by_sb3_last_train"] = int(gs[min(done - 1, len(gs)) - 1])

    print(f"SB3 optimizer: {opt}; max_grad_norm {model.max_grad_norm}")
    print(f"{'step':>4} {'frame':>5} {'copy':>4} {'tgt net':>8} {'y abs':>8} {'Q abs':>8} {'loss herd':>10} "
          f"{'loss rel':>8} {'grad rel':>8} {'param abs':>9} {'ulps':>4} {'/chg':>8} {'/step':>8}")
    for k, r in enumerate(rows):
        print(f"{k:4d} {r['frame']:5d} {'yes' if r['sb3_target_copied'] else '':>4} {r['target_net_max_abs']:8.1e} "
              f"{r['targets_max_abs']:8.1e} {r['q_max_abs']:8.1e} {r['loss_herd']:10.4e} {r['loss_rel']:8.1e} "
              f"{r['grad_rel']:8.1e} {r['param_max_abs']:9.1e} {r['param_ulps']:4.0f} {r['param_rel_change']:8.1e} "
              f"{r['param_rel_step']:8.1e}")
    s = out["schedule"]
    print(f"epsilon schedule over {s['frames']} frames: max abs diff {s['max_abs']:.1e} ({s['frames_differing']} "
          f"frames differ); final value from t = {s['first_final_herd']} (herd), {s['first_final_sb3']} (SB3); "
          f"herd's run epsilon vs its schedule: {out['run_epsilon_vs_schedule_max_abs']:.1e}")
    print(f"herd: first gradient step at frame {out['herd_first_train_frame']}; target changed at frames "
          f"{out['herd_target_changed_frames']}; SB3 (same inputs): target copied at frames "
          f"{[r['frame'] for r in rows if r['sb3_target_copied']]}")
    if "sb3_run" in out:
        r = out["sb3_run"]
        print(f"SB3's own learn() to frame {r['frames']}: first train() at frame {r['first_train_frame']}, "
              f"{r['gradient_steps']} gradient steps to frame {r['last_train_frame']} (herd to that frame: "
              f"{out['herd_gradient_steps_by_sb3_last_train']}); "
              f"target copies at frames {r['copy_frames']}; epsilon of frames 1-{r['epsilon_frames_compared']} "
              f"(1 in the warm-up) max abs diff to herd's {r['epsilon_max_abs_vs_herd']:.1e}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()

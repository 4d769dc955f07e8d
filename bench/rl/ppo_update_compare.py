#!/usr/bin/env python3
"""herd's PPO update against Stable-Baselines3's on identical inputs (never run in CI).

Two commands (run in the bench venv, ~/.cache/herd/bench-venv: torch, stable-baselines3,
gymnasium, minatar, h5py; started with another interpreter, the script re-executes itself
there):

  ppo_update_compare.py compare HERD.h5 [--preset TOML] [--json FILE] [--population-std]
      HERD.h5 is build/bench/rl/ppo_update_dump's record of one herd update (initial
      parameters, rollout, permutations, every minibatch's losses, gradient norm and
      parameters). Builds SB3's PPO with bench/rl/minatar_learning.py's mapping of the
      preset, loads herd's initial parameters into the torch policy, fills SB3's
      RolloutBuffer with herd's rollout (checking SB3's GAE on it against herd's, then
      training on herd's advantages and returns), makes SB3's buffer draw herd's
      permutations, runs SB3's own `PPO.train()` at herd's learning rate, and compares
      minibatch by minibatch: the loss terms, approx KL, clip fraction, the pre-clipping
      gradient norm, the first minibatch's gradient and the parameters after every step.
      SB3's loss terms are recomputed from the tensors of its own train() (captured from
      `evaluate_actions` and the buffer's samples) with its formulas; gradients and
      parameters are train()'s own. --population-std: SB3 normalises the advantages with
      the population standard deviation, as herd does, instead of its sample one (a
      diagnostic: the one known difference between the two updates).

  ppo_update_compare.py sb3-rollout OUT.h5 --seed S [--preset TOML]
      SB3's own first iteration for seed S, as minatar_learning.py's worker runs it (the
      same env wrapper, seed, mapping): its initial parameters and first rollout written in
      ppo_update_dump's input layout (`init/<name>` in herd's names and layouts,
      `rollout/*` time-major [T, B]), then SB3's own train() on it (its own permutations,
      its own learning-rate schedule) whose logged train/approx_kl (SB3 2.9.2: the mean
      over the *last epoch's* minibatches) and per-minibatch KLs are stored in OUT.h5
      (`sb3/approx_kl` per minibatch, `sb3/logged_approx_kl`). `ppo_update_dump OUT2.h5
      --input OUT.h5` then runs herd's update on the same inputs.

Parameter mapping: herd "pi.0" (conv [16, C, 3, 3] = torch's [out, in, kh, kw]) is
`pi_features_extractor.net.0`, "pi.3" (linear [128, 1024] = torch's [out, in]; herd flattens
the conv output in (channel, row, column) order, as torch's Flatten of NCHW) is
`pi_features_extractor.net.3`, "pi.5" is `action_net`; "vf.*" alike with
`vf_features_extractor` and `value_net`. Row t * B + b of herd's rollout is SB3's
(step t, env b), i.e. row b * T + t of SB3's flattened buffer.
"""
import argparse
import json
import os
import sys
import tomllib

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
VENV_PY = os.path.expanduser(os.environ.get("HERD_BENCH_VENV", "~/.cache/herd/bench-venv")) + "/bin/python"
PRESET = os.path.join(ROOT, "examples", "rl", "minatar_breakout_ppo.toml")
MAP = {"pi.0": "pi_features_extractor.net.0", "pi.3": "pi_features_extractor.net.3", "pi.5": "action_net",
       "vf.0": "vf_features_extractor.net.0", "vf.3": "vf_features_extractor.net.3", "vf.5": "value_net"}


def reexec():
    if os.path.realpath(sys.executable) != os.path.realpath(VENV_PY) and os.path.exists(VENV_PY):
        os.execv(VENV_PY, [VENV_PY, os.path.abspath(__file__), *sys.argv[1:]])


def torch_name(herd_name):
    layer, kind = herd_name.rsplit(".", 1)
    return f"{MAP[layer]}.{kind}"


def build_model(preset, seed, lr_constant=None):
    """SB3's PPO as minatar_learning.py's worker builds it (one thread)."""
    import torch as th
    th.set_num_threads(1)
    from stable_baselines3 import PPO
    from stable_baselines3.common.monitor import Monitor
    from stable_baselines3.common.vec_env import DummyVecEnv
    sys.path.insert(0, HERE)
    from minatar_gym import MinAtarGymEnv, conv_extractor_class
    from minatar_learning import flatten, sb3_spec
    with open(preset, "rb") as f:
        cfg = flatten(tomllib.load(f))
    game = cfg["env"].split("/")[1].split("-")[0].lower()
    spec = sb3_spec("ppo", cfg, cfg["total_steps"])
    venv = DummyVecEnv([lambda: Monitor(MinAtarGymEnv(game)) for _ in range(spec["n_envs"])])
    pk = dict(features_extractor_class=conv_extractor_class(), features_extractor_kwargs=spec["encoder"])
    kw = dict(spec["kwargs"])
    lr, clip = spec["learning_rate"], spec["clip_range"]
    if lr_constant is not None:
        kw["learning_rate"] = lr_constant
    else:
        kw["learning_rate"] = (lambda p: lr * p) if spec["anneal_lr"] else lr
    kw["clip_range"] = (lambda p: clip * p) if spec["anneal_clip"] else clip
    pk.update(net_arch=dict(pi=[], vf=[]), share_features_extractor=spec["shared_trunk"],
              optimizer_kwargs={"eps": spec["optimizer_eps"]})
    model = PPO("MlpPolicy", venv, policy_kwargs=pk, seed=seed, device="cpu", **kw)
    return model, cfg


def params_of(model, names):
    sd = model.policy.state_dict()
    return {n: sd[torch_name(n)].detach().cpu().numpy().copy() for n in names}


def fill_buffer(model, h):
    """Herd's rollout into SB3's RolloutBuffer; returns SB3's GAE (advantages, returns)."""
    import numpy as np
    import torch as th
    r = h["rollout"]
    buf = model.rollout_buffer
    buf.reset()
    T, B = r["rewards"].shape
    assert (buf.buffer_size, buf.n_envs) == (T, B), "preset and dump disagree on T, B"
    term = r["terminated"][:].astype(np.float32)
    buf.observations[:] = r["obs"][:].reshape(buf.observations.shape)
    buf.actions[:] = r["actions"][:].reshape(T, B, 1).astype(np.float32)
    buf.rewards[:] = r["rewards"][:]
    buf.values[:] = r["values"][:]
    buf.log_probs[:] = r["log_probs"][:]
    buf.episode_starts[0] = 1.0
    buf.episode_starts[1:] = term[:-1]
    buf.pos, buf.full = T, True
    buf.compute_returns_and_advantage(th.as_tensor(r["last_values"][:]), term[-1])
    return buf.advantages.copy(), buf.returns.copy()


def herd_to_sb3_rows(perm, T, B):
    """herd row t * B + b -> SB3's flattened row b * T + t."""
    return (perm % B) * T + perm // B


def run_train(model, perms, T, B, names, population_std=False):
    """SB3's train() with the given per-epoch permutations (SB3 rows, or None for its own);
    returns per-minibatch records. population_std: SB3's advantage normalisation divides by
    the population standard deviation (herd's) instead of the sample one (a diagnostic)."""
    import numpy as np
    import torch as th
    from stable_baselines3.common import buffers
    recs, cur = [], {}
    buf, pol = model.rollout_buffer, model.policy
    orig_perm = buffers.np.random.permutation
    orig_get = buf._get_samples
    orig_eval = pol.evaluate_actions
    orig_clip = th.nn.utils.clip_grad_norm_
    orig_step = pol.optimizer.step
    orig_std = th.Tensor.std
    it = iter(perms) if perms is not None else None
    clip = model.clip_range(model._current_progress_remaining)

    def permutation(n):
        return next(it) if it is not None else orig_perm(n)

    def get_samples(idx, env=None):
        cur["data"] = orig_get(idx, env)
        cur["idx"] = np.asarray(idx)
        return cur["data"]

    def evaluate_actions(obs, actions):
        out = orig_eval(obs, actions)
        cur["out"] = out
        return out

    def clip_grad_norm_(parameters, max_norm, *a, **k):
        parameters = list(parameters)
        grads = None
        if not recs:
            grads = {n: p.grad.detach().cpu().numpy().copy()
                     for n, p in pol.state_dict(keep_vars=True).items() if getattr(p, "grad", None) is not None}
        norm = orig_clip(parameters, max_norm, *a, **k)
        d, (values, log_prob, entropy) = cur["data"], cur["out"]
        with th.no_grad():
            adv = d.advantages
            if model.normalize_advantage and len(adv) > 1:
                adv = (adv - adv.mean()) / (adv.std(unbiased=not population_std) + 1e-8)
            log_ratio = log_prob - d.old_log_prob
            ratio = th.exp(log_ratio)
            pl = -th.min(adv * ratio, adv * th.clamp(ratio, 1 - clip, 1 + clip)).mean()
            vl = th.nn.functional.mse_loss(d.returns, values.flatten())
            rec = {"policy_loss": pl.item(), "value_loss": vl.item(), "entropy": entropy.mean().item(),
                   "approx_kl": th.mean((ratio - 1) - log_ratio).item(),
                   "clip_fraction": th.mean((th.abs(ratio - 1) > clip).float()).item(),
                   "grad_norm": float(norm), "learning_rate": pol.optimizer.param_groups[0]["lr"],
                   "rows": cur["idx"]}
        if grads is not None:
            rec["grad0"] = grads
        recs.append(rec)
        return norm

    def step(*a, **k):
        out = orig_step(*a, **k)
        recs[-1]["params"] = params_of(model, names)
        return out

    buffers.np.random.permutation = permutation
    buf._get_samples = get_samples
    pol.evaluate_actions = evaluate_actions
    th.nn.utils.clip_grad_norm_ = clip_grad_norm_
    pol.optimizer.step = step
    if population_std:
        th.Tensor.std = lambda self, *a, **k: orig_std(self, *a, **{**k, "unbiased": False})
    try:
        model.train()
    finally:
        buffers.np.random.permutation = orig_perm
        th.nn.utils.clip_grad_norm_ = orig_clip
        th.Tensor.std = orig_std
        del buf._get_samples, pol.evaluate_actions, pol.optimizer.step
    return recs


def rel(a, b):
    import numpy as np
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-30))


def compare(a):
    import h5py
    import numpy as np
    h = h5py.File(a.herd, "r")
    names = list(h["init"].keys())
    lr = float(h["update/learning_rate"][0])
    model, cfg = build_model(a.preset, int(h["seed"][()]), lr_constant=lr)
    from stable_baselines3.common.logger import configure
    model.set_logger(configure(None, []))
    sd = model.policy.state_dict()
    import torch as th
    with th.no_grad():
        for n in names:
            t = sd[torch_name(n)]
            src = h["init"][n][:]
            assert t.shape == src.shape, (n, t.shape, src.shape)
            t.copy_(th.as_tensor(src))
    model._current_progress_remaining = 1.0
    # The torch policy's outputs on herd's rollout against herd's stored old log-probs and values.
    r = h["rollout"]
    T, B = r["rewards"].shape
    obs = th.as_tensor(r["obs"][:].reshape(T * B, *r["obs"].shape[2:]))
    with th.no_grad():
        v, lp, _ = model.policy.evaluate_actions(obs, th.as_tensor(r["actions"][:].reshape(-1)))
    out = {"herd": a.herd, "forward": {
        "log_prob_max_abs": float(np.max(np.abs(lp.numpy() - r["log_probs"][:].reshape(-1)))),
        "value_max_abs": float(np.max(np.abs(v.numpy().reshape(-1) - r["values"][:].reshape(-1))))}}
    adv, ret = fill_buffer(model, h)
    out["gae"] = {"advantages_max_abs": float(np.max(np.abs(adv - r["advantages"][:]))),
                  "advantages_rel": rel(adv, r["advantages"][:]),
                  "returns_max_abs": float(np.max(np.abs(ret - r["returns"][:])))}
    model.rollout_buffer.advantages[:] = r["advantages"][:]  # train on herd's GAE exactly
    model.rollout_buffer.returns[:] = r["returns"][:]
    perms = [herd_to_sb3_rows(p.astype(np.int64), T, B) for p in h["update/perm"][:]]
    recs = run_train(model, perms, T, B, names, a.population_std)
    u = h["update"]
    keys = ["policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction", "grad_norm"]
    rows = []
    init = {n: h["init"][n][:] for n in names}
    for m, rec in enumerate(recs):
        row = {k: (float(u[k][m]), rec[k]) for k in keys}
        hp = {n: u["params"][n][m] for n in names}
        row["param_max_abs"] = max(float(np.max(np.abs(hp[n] - rec["params"][n]))) for n in names)
        # relative to the parameters' total change so far (herd's)
        row["param_rel_change"] = max(float(np.max(np.abs(hp[n] - rec["params"][n])) /
                                            max(np.max(np.abs(hp[n] - init[n])), 1e-30)) for n in names)
        rows.append(row)
    final = len(recs) - 1
    out["final_param_rel_change"] = {
        n: float(np.max(np.abs(u["params"][n][final] - recs[final]["params"][n])) /
                 max(np.max(np.abs(u["params"][n][final] - init[n])), 1e-30)) for n in names}
    g0 = recs[0]["grad0"]
    tn = {n: torch_name(n) for n in names}
    out["grad0_rel"] = {n: rel(g0[tn[n]], u["grad0"][n][:]) for n in names}
    out["minibatches"] = rows
    E = len(perms)
    M = len(recs) // E
    kl_h = np.array([r_["approx_kl"][0] for r_ in rows])
    kl_s = np.array([r_["approx_kl"][1] for r_ in rows])
    out["approx_kl"] = {"herd_mean_all": float(kl_h.mean()), "sb3_mean_all": float(kl_s.mean()),
                        "herd_mean_last_epoch": float(kl_h[-M:].mean()), "sb3_mean_last_epoch": float(kl_s[-M:].mean()),
                        "sb3_logged": float(model.logger.name_to_value.get("train/approx_kl", float("nan")))}
    print(f"forward on herd's rollout: log-prob max abs diff {out['forward']['log_prob_max_abs']:.2e}, "
          f"value {out['forward']['value_max_abs']:.2e}")
    print(f"SB3's GAE on herd's rollout: advantages max abs diff {out['gae']['advantages_max_abs']:.2e} "
          f"(rel {out['gae']['advantages_rel']:.2e}), returns {out['gae']['returns_max_abs']:.2e}")
    print("first minibatch gradient (before clipping), max abs diff / max abs: " +
          ", ".join(f"{n} {v:.1e}" for n, v in out["grad0_rel"].items()))
    print(f"{'mb':>3} {'kl herd':>10} {'kl sb3':>10} {'kl rel':>8} {'pl rel':>8} {'vl rel':>8} {'ent rel':>8} "
          f"{'cf h/s':>13} {'gnorm herd':>10} {'gnorm sb3':>10} {'param abs':>9} {'param/chg':>9}")
    for m, row in enumerate(rows):
        def rd(k):
            x, y = row[k]
            return abs(x - y) / max(abs(x), 1e-30)
        print(f"{m + 1:3d} {row['approx_kl'][0]:10.3e} {row['approx_kl'][1]:10.3e} {rd('approx_kl'):8.1e} "
              f"{rd('policy_loss'):8.1e} {rd('value_loss'):8.1e} {rd('entropy'):8.1e} "
              f"{row['clip_fraction'][0]:6.4f}/{row['clip_fraction'][1]:6.4f} {row['grad_norm'][0]:10.4f} "
              f"{row['grad_norm'][1]:10.4f} {row['param_max_abs']:9.1e} {row['param_rel_change']:9.1e}")
    print("after the last minibatch, max abs parameter difference / max abs change of that tensor: " +
          ", ".join(f"{n} {v:.1e}" for n, v in out["final_param_rel_change"].items()))
    k = out["approx_kl"]
    print(f"approx KL mean over all {len(rows)} minibatches: herd {k['herd_mean_all']:.4e}, SB3 {k['sb3_mean_all']:.4e}; "
          f"over the last epoch's {M}: herd {k['herd_mean_last_epoch']:.4e}, SB3 {k['sb3_mean_last_epoch']:.4e}; "
          f"SB3's logged train/approx_kl {k['sb3_logged']:.4e}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


def sb3_rollout(a):
    import h5py
    import numpy as np
    import torch as th
    model, cfg = build_model(a.preset, a.seed)
    names = [f"{l}.{k}" for l in MAP for k in ("weight", "bias")]
    init = params_of(model, names)
    total = cfg["total_steps"]
    per_iter = cfg["sampler.num_envs"] * cfg["sampler.num_steps"]
    total = -(-total // per_iter) * per_iter
    total, cb = model._setup_learn(total, None)
    cb.on_training_start(locals(), globals())
    model.collect_rollouts(model.env, cb, model.rollout_buffer, n_rollout_steps=model.n_steps)
    model._update_current_progress_remaining(model.num_timesteps, total)
    buf = model.rollout_buffer
    T, B = buf.buffer_size, buf.n_envs
    with th.no_grad():
        last_values = model.policy.predict_values(th.as_tensor(model._last_obs)).numpy().reshape(B)
    term = np.zeros((T, B), np.uint8)
    term[:-1] = buf.episode_starts[1:] > 0.5
    term[-1] = np.asarray(model._last_episode_starts) > 0.5
    with h5py.File(a.out, "w") as h:
        for n, v in init.items():
            h[f"init/{n}"] = v
        r = h.create_group("rollout")
        r["obs"] = buf.observations.astype(np.float32)
        r["actions"] = buf.actions.reshape(T, B).astype(np.int64)
        r["log_probs"] = buf.log_probs.astype(np.float32)
        r["values"] = buf.values.astype(np.float32)
        r["rewards"] = buf.rewards.astype(np.float32)
        r["terminated"] = term
        r["last_values"] = last_values.astype(np.float32)
        r["advantages"] = buf.advantages.astype(np.float32)
        r["returns"] = buf.returns.astype(np.float32)
        recs = run_train(model, None, T, B, names)
        s = h.create_group("sb3")
        for k in ("approx_kl", "clip_fraction", "grad_norm", "policy_loss", "value_loss", "entropy", "learning_rate"):
            s[k] = np.array([rec[k] for rec in recs])
        s["logged_approx_kl"] = float(model.logger.name_to_value["train/approx_kl"])
        kl = s["approx_kl"][:]
        M = len(kl) // model.n_epochs
        print(f"sb3-rollout seed {a.seed}: {a.out}: episodes ended {int(term.sum())}, reward sum {float(buf.rewards.sum()):.0f}; "
              f"SB3's update: approx KL mean over all {len(kl)} minibatches {kl.mean():.4e}, over the last epoch "
              f"{kl[-M:].mean():.4e}, logged {float(s['logged_approx_kl'][()]):.4e}; clip fraction "
              f"{float(s['clip_fraction'][:].mean()):.4f}")


def main():
    reexec()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("compare")
    c.add_argument("herd")
    c.add_argument("--preset", default=PRESET)
    c.add_argument("--json")
    c.add_argument("--population-std", action="store_true",
                   help="SB3 normalises advantages with the population standard deviation, as herd (diagnostic)")
    s = sub.add_parser("sb3-rollout")
    s.add_argument("out")
    s.add_argument("--seed", type=int, required=True)
    s.add_argument("--preset", default=PRESET)
    a = ap.parse_args()
    compare(a) if a.cmd == "compare" else sb3_rollout(a)


if __name__ == "__main__":
    main()

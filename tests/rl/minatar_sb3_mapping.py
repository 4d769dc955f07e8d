#!/usr/bin/env python3
"""Checks how bench/rl/minatar_learning.py maps herd-rl's MinAtar presets to
Stable-Baselines3 arguments (no torch, SB3 or minatar needed): known answers for the DQN
and PPO presets, network.init as SB3's ortho_init, DQN's epsilon schedule kept in frames, gradient clipping off as +inf, and
every key it cannot map refused by name, and --schedule-frames checked. Exit 0 when all checks pass, 1 otherwise.

Usage: minatar_sb3_mapping.py REPO_ROOT
"""
import copy
import importlib.util
import math
import os
import sys
import tomllib

root = sys.argv[1]
spec_ = importlib.util.spec_from_file_location("minatar_learning", os.path.join(root, "bench/rl/minatar_learning.py"))
ml = importlib.util.module_from_spec(spec_)
spec_.loader.exec_module(ml)
failures = []


def check(what, got, want):
    ok = (math.isclose(got, want, rel_tol=1e-12) if isinstance(want, float) and not math.isinf(want) else got == want)
    if not ok:
        failures.append(f"{what}: got {got!r}, expected {want!r}")


def preset(game, algo):
    with open(os.path.join(root, "examples/rl", f"minatar_{game}_{algo}.toml"), "rb") as f:
        return ml.flatten(tomllib.load(f))


def refused(algo, cfg, word):
    try:
        ml.sb3_spec(algo, cfg, 40000)
    except ml.UnmappedKey as e:
        if word not in str(e):
            failures.append(f"refusal names {e}, expected {word}")
        return
    failures.append(f"{word}: accepted, expected a refusal")


for game in ("breakout", "freeway"):
    d = preset(game, "dqn")
    s = ml.sb3_spec("dqn", d, 40000)
    k = s["kwargs"]
    check(f"{game} dqn buffer_size", k["buffer_size"], 100000)
    check(f"{game} dqn batch_size", k["batch_size"], 32)
    check(f"{game} dqn learning_starts", k["learning_starts"], 5000)
    check(f"{game} dqn train_freq", k["train_freq"], (1, "step"))
    check(f"{game} dqn gradient_steps", k["gradient_steps"], 1)
    check(f"{game} dqn target_update_interval", k["target_update_interval"], 1000)
    check(f"{game} dqn learning_rate", k["learning_rate"], 2.5e-4)
    check(f"{game} dqn gamma", k["gamma"], 0.99)
    check(f"{game} dqn final eps", k["exploration_final_eps"], 0.1)
    check(f"{game} dqn max_grad_norm (0 = off)", k["max_grad_norm"], math.inf)
    check(f"{game} dqn optimizer", (s["optimizer"], s["optimizer_kwargs"]),
          ("rmsprop", {"alpha": 0.95, "eps": 0.01, "centered": True}))
    check(f"{game} dqn encoder", s["encoder"], {"channels": [16], "kernels": [3], "strides": [1], "padding": [0],
                                               "hidden": [128], "activation": "relu"})
    # epsilon decays over the preset's 0.1 x 1e6 = 1e5 frames, or over all of a shorter run
    check(f"{game} dqn eps fraction at 40k", k["exploration_fraction"], 1.0)
    check(f"{game} dqn eps fraction at 200k", ml.sb3_spec("dqn", d, 200000)["kwargs"]["exploration_fraction"], 0.5)
    check(f"{game} dqn eps fraction at 1M", ml.sb3_spec("dqn", d, 1000000)["kwargs"]["exploration_fraction"], 0.1)
    # network.init: "pytorch" is SB3's DQN as it is; "orthogonal" (the default) asks the
    # worker to apply SB3's ortho init to the encoder.
    want = d.get("network.init", "orthogonal") == "orthogonal"
    check(f"{game} dqn ortho_init", s["ortho_init"], want)
    for init, ortho in (("orthogonal", True), ("pytorch", False)):
        c = copy.deepcopy(d)
        c["network.init"] = init
        check(f"{game} dqn network.init={init}", ml.sb3_spec("dqn", c, 40000)["ortho_init"], ortho)
    for key, value, word in (("network.init", "xavier", "network.init"), ("dqn.dueling", True, "dqn.dueling"), ("dqn.double_q", True, "dqn.double_q"),
                             ("dqn.prioritized", True, "dqn.prioritized"), ("normalize.obs", True, "normalize.obs"),
                             ("network.activation", "elu", "network.activation"), ("dqn.bogus", 1, "dqn.bogus")):
        c = copy.deepcopy(d)
        c[key] = value
        refused("dqn", c, word)

    p = preset(game, "ppo")
    s = ml.sb3_spec("ppo", p, 98304)
    k = s["kwargs"]
    check(f"{game} ppo n_envs", s["n_envs"], 64)
    check(f"{game} ppo n_steps", k["n_steps"], 128)
    check(f"{game} ppo batch_size (64 x 128 / 8)", k["batch_size"], 1024)
    check(f"{game} ppo n_epochs", k["n_epochs"], 4)
    check(f"{game} ppo gae_lambda", k["gae_lambda"], 0.95)
    check(f"{game} ppo ent_coef", k["ent_coef"], 0.01)
    check(f"{game} ppo clip_range_vf (0 = off)", k["clip_range_vf"], None)
    check(f"{game} ppo lr, annealed", (s["learning_rate"], s["anneal_lr"]), (5e-4, True))
    check(f"{game} ppo clip, constant", (s["clip_range"], s["anneal_clip"]), (0.2, False))
    check(f"{game} ppo separate actor and critic", s["shared_trunk"], False)
    check(f"{game} ppo ortho_init (herd's orthogonal default)", s["ortho_init"], True)
    c = copy.deepcopy(p)
    c["network.init"] = "pytorch"
    check(f"{game} ppo network.init=pytorch", ml.sb3_spec("ppo", c, 98304)["ortho_init"], False)
    c = copy.deepcopy(p)
    c["algo.minibatch_size"], c["algo.num_minibatches"] = 512, 0
    check(f"{game} ppo batch_size from minibatch_size", ml.sb3_spec("ppo", c, 98304)["kwargs"]["batch_size"], 512)
    for key, value, word in (("algo.optimizer", "rmsprop", "algo.optimizer"), ("algo.lr_scaling", "sqrt", "algo.lr_scaling"),
                             ("normalize.reward", True, "normalize.reward"), ("algo.bogus", 1, "algo.bogus")):
        c = copy.deepcopy(p)
        c[key] = value
        refused("ppo", c, word)

# --schedule-frames (anneal as in a longer run, stop early) is for PPO only and must not be
# below --frames: refused before anything runs (no herd-rl or SB3 needed).
import subprocess
script = os.path.join(root, "bench/rl/minatar_learning.py")
for args, word in ((["--frames", "100", "--schedule-frames", "50", "--algos", "ppo"], "must be >= --frames"),
                   (["--frames", "100", "--schedule-frames", "500", "--algos", "dqn"], "needs --algos ppo")):
    # --herd-rl names no executable: without the check the script would stop there instead.
    r = subprocess.run([sys.executable, script, "--herd-rl", "/nonexistent/herd-rl"] + args, capture_output=True,
                       text=True)
    check(f"minatar_learning.py {' '.join(args)}: exit status", r.returncode, 1)
    check(f"minatar_learning.py {' '.join(args)}: names the problem", word in r.stderr, True)

for f in failures:
    print("FAIL:", f)
print(f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)

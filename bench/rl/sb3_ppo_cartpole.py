#!/usr/bin/env python3
"""Stable-Baselines3 peer of bench_ppo_cartpole: PPO on CartPole-v1 with herd-rl's default
settings (the RL Zoo's tuned CartPole-v1 hyperparameters: 8 envs x 32 steps, minibatch 256,
20 epochs, gamma 0.98, GAE lambda 0.8, learning rate 1e-3 and clip range 0.2 both annealed
linearly to 0, no entropy bonus, separate 64-64 tanh actor and critic, Adam eps 1e-5,
max grad norm 0.5), one torch thread, CPU. Trains until the mean return of the last 100
training episodes is >= 475 or --max-steps env steps, and prints one JSON line:
{"seed", "reached", "seconds" (wall, from before the model is built), "cpu_seconds",
"env_steps", "sb3", "torch"}. Exit 77 when stable_baselines3 cannot be imported.
Usage: sb3_ppo_cartpole.py --seed S [--max-steps N]
"""
import argparse
import json
import sys
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-steps", type=int, default=200000)
    args = ap.parse_args()
    try:
        import torch
        import stable_baselines3 as sb3
        from stable_baselines3 import PPO
        from stable_baselines3.common.callbacks import BaseCallback
        from stable_baselines3.common.env_util import make_vec_env
    except ImportError as e:
        print(json.dumps({"skipped": f"stable_baselines3 not importable: {e}"}))
        return 77
    torch.set_num_threads(1)

    class StopAt475(BaseCallback):
        def __init__(self):
            super().__init__()
            self.returns = []
            self.reached = False

        def _on_step(self):
            for info in self.locals["infos"]:
                ep = info.get("episode")
                if ep is not None:
                    self.returns.append(ep["r"])
            last = self.returns[-100:]
            if len(last) >= 100 and sum(last) / len(last) >= 475.0:
                self.reached = True
                return False
            return True

    t0, c0 = time.perf_counter(), time.process_time()
    env = make_vec_env("CartPole-v1", n_envs=8, seed=args.seed)

    def linear(v):
        return lambda progress_remaining: progress_remaining * v

    model = PPO("MlpPolicy", env, n_steps=32, batch_size=256, n_epochs=20, gamma=0.98, gae_lambda=0.8,
                learning_rate=linear(1e-3), clip_range=linear(0.2), ent_coef=0.0, vf_coef=0.5,
                max_grad_norm=0.5, seed=args.seed, device="cpu", verbose=0)
    cb = StopAt475()
    model.learn(total_timesteps=args.max_steps, callback=cb)
    print(json.dumps({"seed": args.seed, "reached": cb.reached, "seconds": time.perf_counter() - t0,
                      "cpu_seconds": time.process_time() - c0, "env_steps": int(model.num_timesteps),
                      "sb3": sb3.__version__, "torch": torch.__version__}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

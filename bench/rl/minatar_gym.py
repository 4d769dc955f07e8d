"""Gymnasium wrapper of PyPI's `minatar` package and the MinAtar paper's network for
Stable-Baselines3, shared by the MinAtar benchmarks against herd (never run in CI).

Only `minatar.Environment`'s public API is used (constructor, seed, reset, act, state,
num_actions, minimal_action_set); MinAtar's source (GPL-3.0) was not read.
"""
import gymnasium as gym
import numpy as np


class MinAtarGymEnv(gym.Env):
    """One MinAtar game as a Gymnasium env: observations float32 [C, 10, 10] of 0/1
    (channel first, as herd's MinAtar envs), the minimal action set (action k plays
    `minimal_action_set()[k]`), sticky actions with probability 0.1 (the package's
    default). MinAtar's terminal flag is reported as `terminated` (Freeway's 2500-frame
    end included, as herd does); nothing is truncated."""

    metadata = {"render_modes": []}

    def __init__(self, game, sticky_action_prob=0.1):
        from minatar import Environment
        self.game = game
        self.env = Environment(game, sticky_action_prob=sticky_action_prob)
        self.actions = list(self.env.minimal_action_set())
        c = self.env.state_shape()[2]
        self.observation_space = gym.spaces.Box(0.0, 1.0, (c, 10, 10), np.float32)
        self.action_space = gym.spaces.Discrete(len(self.actions))

    def _obs(self):
        return np.ascontiguousarray(np.transpose(self.env.state(), (2, 0, 1)), dtype=np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        if seed is not None:
            self.env.seed(int(seed))
        self.env.reset()
        return self._obs(), {}

    def step(self, action):
        reward, terminal = self.env.act(self.actions[int(action)])
        return self._obs(), float(reward), bool(terminal), False, {}


def conv_extractor_class():
    """SB3 features extractor: [Conv2d, act]* -> Flatten -> [Linear, act]* (herd's
    `make_encoder` layout; the MinAtar paper's network is one 3x3 conv with 16 channels,
    stride 1, then 128 units, all ReLU)."""
    import torch as th
    from stable_baselines3.common.torch_layers import BaseFeaturesExtractor

    class MinAtarEncoder(BaseFeaturesExtractor):
        def __init__(self, observation_space, channels, kernels, strides, padding, hidden, activation):
            act = {"relu": th.nn.ReLU, "tanh": th.nn.Tanh}[activation]
            c, h, w = observation_space.shape
            layers = []
            for ch, k, s, p in zip(channels, kernels, strides, padding):
                layers += [th.nn.Conv2d(c, ch, k, s, p), act()]
                c, h, w = ch, (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
            layers.append(th.nn.Flatten())
            n = c * h * w
            for u in hidden:
                layers += [th.nn.Linear(n, u), act()]
                n = u
            super().__init__(observation_space, n)
            self.net = th.nn.Sequential(*layers)

        def forward(self, obs):
            return self.net(obs)

    return MinAtarEncoder

#pragma once
/// @file a2c.hpp
/// `A2c`: synchronous advantage actor-critic (Mnih et al. 2016, "Asynchronous methods for
/// deep reinforcement learning", in the batched synchronous form of Stooke & Abbeel 2018
/// and Stable-Baselines3).

#include "herd/rl/ppo.hpp"

namespace herd::rl {

/// Options of `A2c` (defaults: SB3's A2C).
struct A2cOptions {
  double learning_rate = 7e-4;  ///< initial learning rate
  bool anneal_lr = false;       ///< lr * progress_remaining
  double ent_coef = 0.0;        ///< entropy bonus coefficient
  double vf_coef = 0.5;         ///< value loss coefficient
  double max_grad_norm = 0.5;   ///< global gradient-norm clip (<= 0: off)
  /// Normalise advantages over the rollout (not a rollout of one sample, as Stable-Baselines3).
  bool normalize_advantage = false;
  OptimizerKind optimizer = OptimizerKind::kRmsProp;  ///< RMSprop (alpha 0.99) or Adam
  double optimizer_eps = 1e-5;                        ///< optimizer epsilon
  int lr_warmup_iterations = 0;                       ///< gradual warm-up iterations (see `PpoOptions`; 0: none)
  double lr_warmup_start = 1.0;                       ///< warm-up factor at iteration 0
};

/// A2C: one gradient step per rollout on the whole `[T, B]` batch of
/// L = -mean(A log pi(a|s)) + vf_coef mean((V - R)^2) - ent_coef mean(H).
/// It is computed as PPO's loss with one epoch, one minibatch and no clipping: at the
/// parameters that collected the rollout the ratio is 1, so the gradient of the surrogate
/// r A is exactly A grad log pi. Not thread-safe.
class A2c : public Ppo {
 public:
  /// `comm`: data-parallel training as `Ppo` (the whole rollout of every rank is one
  /// minibatch). @throws herd::InputError for a non-positive learning rate.
  /// `grad_comm`: the gradients' communicator, as for `Ppo` (null: `comm`).
  A2c(ActorCriticAgent& agent, const A2cOptions& options, Communicator* comm = nullptr,
      Communicator* grad_comm = nullptr);
  /// PPO options equivalent to `options`.
  static PpoOptions as_ppo(const A2cOptions& options);
};

}  // namespace herd::rl

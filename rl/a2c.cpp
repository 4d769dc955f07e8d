#include "herd/rl/a2c.hpp"

namespace herd::rl {

PpoOptions A2c::as_ppo(const A2cOptions& a) {
  PpoOptions p;
  p.learning_rate = a.learning_rate;
  p.anneal_lr = a.anneal_lr;
  p.clip_range = 1e30;  // never active: the ratio is 1 in the single step
  p.anneal_clip = false;
  p.clip_range_vf = 0.0;
  p.epochs = 1;
  p.minibatch_size = 0;  // whole rollout
  p.ent_coef = a.ent_coef;
  p.vf_coef = a.vf_coef;
  p.max_grad_norm = a.max_grad_norm;
  p.normalize_advantage = a.normalize_advantage;
  p.optimizer = a.optimizer;
  p.optimizer_eps = a.optimizer_eps;
  p.lr_warmup_iterations = a.lr_warmup_iterations;
  p.lr_warmup_start = a.lr_warmup_start;
  return p;
}

A2c::A2c(ActorCriticAgent& agent, const A2cOptions& options, Communicator* comm, Communicator* grad_comm)
    : Ppo(agent, as_ppo(options), comm, grad_comm) {}

}  // namespace herd::rl

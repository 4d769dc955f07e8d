#include "herd/rl/train_config.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include "herd/core/config.hpp"
#include "herd/core/device.hpp"
#include "herd/core/error.hpp"
#include "herd/core/memory.hpp"
#include "herd/io/config.hpp"
#include "herd/io/toml_reader.hpp"
#include "herd/rl/env_library.hpp"
#include "herd/rl/network.hpp"
#include "herd/rl/registry.hpp"
#include "herd/rl/wrappers.hpp"

namespace herd::rl {
namespace {
bool fs_is_absolute(const std::string& p) { return std::filesystem::path(p).is_absolute(); }

// Refuses a configuration value: one line `<origin>: key "<key>" is <value>, but <expected>`
// (the value as the message should show it, quoted by the caller where it is a string).
[[noreturn]] void refuse_key(const io::Settings& st, const std::string& key, const std::string& value,
                             const std::string& expected) {
  throw InputError(st.origin(key) + ": key \"" + key + "\" is " + value + ", but " + expected);
}
// Whether `algorithm` reads `key`: DQN reads only algo.gamma and the learning-rate scaling
// keys of [algo] (the rest is PPO's and A2C's) and neither the policy's network.shared_trunk
// nor network.init_log_std; A2C does not read PPO's epochs, minibatches and clipping; PPO
// and A2C read nothing of [dqn].
bool algorithm_reads(const std::string& algorithm, const std::string& key);
// A key given for another algorithm would be read by nothing: refused rather than ignored.
void refuse_other_algorithm_keys(const io::Settings& st, const std::string& algorithm);
}  // namespace

const io::Schema& train_schema() {
  static const io::Schema schema = [] {
    io::Schema s("herd-rl");
    s.add_string("env.id", "CartPole-v1",
                 "environment id (registry; `env = \"<id>\"` is short for it); with env.library: the name of the "
                 "library's environment (default: env.symbol)");
    s.add_string(
        "env.library", std::nullopt,
        "shared library of a C environment (herd/rl/c_env.h); a relative path is relative to the folder of the "
        "file that names it (to the working folder with --set)");
    s.add_string("env.symbol", "herd_env", "function of env.library that fills the environment's herd_env_spec");
    s.add_int("env.max_episode_steps", -1,
              "time limit: truncate an episode after this many steps of the game (-1: the env's registered limit; 0: "
              "none)")
        .min(-1);
    s.add_int("env.frame_stack", 1,
              "observations stacked, oldest first, along the channel axis of images or along vectors; a reset fills "
              "every slot with the first observation (Gymnasium FrameStackObservation); 1: none")
        .range(1, 64);
    s.add_bool("env.clip_reward", false, "reward -> sign(reward), as Atari DQN (SB3 ClipRewardEnv)");
    s.add_string("env.obs_dtype", "float32",
                 "dtype of the env batches: \"uint8\" steps integer observations in [0, 255] (MinAtar) as bytes, "
                 "converted to float32 for the network")
        .choices({"float32", "uint8"});
    s.add_bool("env.episodic_life", false,
               "a lost life ends the episode, the game goes on (SB3 EpisodicLifeEnv); only for envs with lives");
    s.add_string("algorithm", "ppo", "training algorithm").choices({"ppo", "a2c", "dqn"});
    s.add_int("seed", 0, "seed of every random stream").min(0);
    s.add_int("total_steps", 100000, "env steps to train").range(1, 1e18);
    s.add_string("output_prefix", "herd_rl", "writes <prefix>.h5 and <prefix>.ckpt");
    s.add_int("checkpoint_period", 0, "iterations between checkpoints (0: at the end only)").min(0);
    s.add_float("checkpoint_period_seconds", 120,
                "wall-clock seconds between checkpoints: one after each iteration that ends at least this long after "
                "the last (0: none by time)")
        .min(0);
    s.add_int("progress_period", 10, "iterations between progress lines (0: none)").min(0);
    s.add_int("eval.max_episode_steps", 27000,
              "herd-rl eval and evaluation during training (eval.every_steps): steps after which an evaluation "
              "episode is cut off and reported as truncated (as "
              "Stable-Baselines3's Atari evaluations: 27000 agent steps, 108000 frames); 0: no cap (an agent that "
              "never ends an episode then runs forever)")
        .min(0);
    s.add_int("eval.every_steps", 0,
              "evaluation during training: every this many env steps (all envs, all ranks), eval.episodes "
              "episodes on a separate env with the current policy, recorded in the curve, <prefix>.h5's /eval and "
              "the progress CSV (as Stable-Baselines3's EvalCallback); 0: none")
        .min(0);
    s.add_int("eval.episodes", 5, "episodes of each evaluation during training (eval.every_steps)").range(1, 100000);
    s.add_bool("eval.stochastic", false,
               "evaluation during training samples actions (DQN: epsilon-greedy with the final epsilon) instead of "
               "the deterministic mode or greedy action");
    s.add_bool("eval.save_best", true,
               "write <prefix>_best.ckpt, a full checkpoint, at each evaluation whose mean return beats every earlier "
               "one (Stable-Baselines3's best_model)");
    s.add_float("eval.stop_return", std::nullopt,
                "training ends after an evaluation during training whose mean return is at least this "
                "(Stable-Baselines3's StopTrainingOnRewardThreshold); unset: never")
        .finite();
    s.add_bool("logging.tensorboard", false,
               "also write TensorBoard event files (scalars of every iteration) to <prefix>_tb/");
    s.add_string("device", "cpu", "where the networks run and train: \"cpu\", \"cuda\" or \"cuda:<index>\"");
    s.add_string("sampler.kind", "serial", "sampler").choices({"serial", "parallel", "alternating"});
    s.add_int("sampler.num_envs", 8, "environments B").range(1, 65536);
    s.add_int("sampler.num_steps", 32, "steps per env per rollout T").range(1, 1 << 20);
    s.add_int("sampler.num_threads", 1, "env-stepping threads of the parallel sampler").range(1, 256);
    s.add_bool("normalize.obs", false, "running observation normalisation");
    s.add_bool("normalize.reward", false, "reward scaling by the std of the discounted return");
    s.add_int_list("network.hidden", std::vector<std::int64_t>{64, 64},
                   "hidden widths of the policy and value networks (DQN: of the Q-network); may be [] when "
                   "network.conv_channels gives convolutions")
        .length(0, 8)
        .min(1);
    s.add_string("network.activation", "tanh", "hidden nonlinearity").choices({"tanh", "relu", "elu"});
    s.add_bool("network.shared_trunk", false, "one trunk with policy and value heads");
    s.add_string("network.init", "orthogonal",
                 "initialisation of the encoder layers and of PPO/A2C's heads: \"orthogonal\" (gain sqrt 2, policy "
                 "head 0.01, value head 1, zero biases; SB3's PPO/A2C) or \"pytorch\" (PyTorch's default, uniform "
                 "+-1/sqrt(fan_in); what SB3's DQN uses, and the MinAtar DQN presets); DQN's Q head always has "
                 "PyTorch's default")
        .choices({"orthogonal", "pytorch"});
    s.add_float("network.init_log_std", 0.0, "initial log std of a Gaussian policy").range(-20, 5);
    s.add_int_list("network.conv_channels", std::vector<std::int64_t>{},
                   "output channels of each convolution before the hidden layers, for image observations "
                   "{channels, height, width} (empty: none)")
        .length(0, 8)
        .min(1);
    s.add_int_list("network.conv_kernels", std::vector<std::int64_t>{},
                   "square kernel size of each convolution, one per network.conv_channels entry")
        .length(0, 8)
        .min(1);
    s.add_int_list("network.conv_strides", std::vector<std::int64_t>{},
                   "stride of each convolution, one per network.conv_channels entry (empty: 1 for every layer)")
        .length(0, 8)
        .min(1);
    s.add_int_list("network.conv_padding", std::vector<std::int64_t>{},
                   "zero padding on each border of each convolution, one per network.conv_channels entry (empty: 0 "
                   "for every layer)")
        .length(0, 8)
        .min(0);
    s.add_float("algo.gamma", 0.98, "discount").range(0, 1);
    s.add_float("algo.gae_lambda", 0.8, "GAE lambda").range(0, 1);
    s.add_float("algo.learning_rate", 1e-3, "initial learning rate").min(0, true);
    s.add_bool("algo.anneal_lr", true, "anneal the learning rate linearly to 0");
    s.add_float("algo.clip_range", 0.2, "PPO clip range").min(0, true);
    s.add_bool("algo.anneal_clip", true, "anneal the clip range linearly to 0");
    s.add_float("algo.clip_range_vf", 0.0, "value clipping (0: off)").min(0);
    s.add_int("algo.epochs", 20, "PPO epochs per rollout").range(1, 1000);
    s.add_int("algo.minibatch_size", 256, "PPO minibatch size (over all ranks)").range(1, 2147483647);
    s.add_int("algo.num_minibatches", 0,
              "PPO minibatches per epoch; when > 0 it sets the minibatch size to the steps per iteration / "
              "num_minibatches (0: use algo.minibatch_size)")
        .min(0);
    s.add_string("algo.lr_scaling", "none",
                 "scale the learning rate by (batch / algo.lr_reference_batch) to the power 1 (linear) or 1/2 "
                 "(sqrt): PPO/A2C scale algo.learning_rate with the env steps per iteration (all ranks) as the "
                 "batch, DQN dqn.learning_rate with ranks x dqn.batch_size")
        .choices({"none", "sqrt", "linear"});
    s.add_int("algo.lr_reference_batch", 256,
              "the batch at which the learning rate is tuned (PPO/A2C: env steps per iteration, all ranks; DQN: "
              "ranks x dqn.batch_size)")
        .min(1);
    s.add_int("algo.lr_warmup_iterations", 0,
              "iterations of linear warm-up from the unscaled to the scaled learning rate (0: none)")
        .range(0, 2147483647);
    s.add_float("algo.ent_coef", 0.0, "entropy bonus coefficient").min(0);
    s.add_float("algo.vf_coef", 0.5, "value loss coefficient").min(0);
    s.add_float("algo.max_grad_norm", 0.5, "gradient-norm clip (0: off)").min(0);
    s.add_bool("algo.normalize_advantage", true, "per-minibatch advantage normalisation");
    s.add_string("max_memory", "0",
                 "memory the run may hold, e.g. \"16GiB\" or \"500MB\" (0: the memory available on the machine); "
                 "a run that needs more is refused before it starts");
    s.add_string("algo.optimizer", "adam", "optimizer").choices({"adam", "rmsprop"});
    s.add_float("algo.optimizer_eps", 1e-5, "optimizer epsilon").min(0);
    // DQN (algorithm = "dqn"): Stable-Baselines3's names and defaults.
    s.add_int("dqn.buffer_size", 1000000, "replay capacity in transitions (all envs)").range(1, 1e12);
    s.add_int("dqn.batch_size", 32, "transitions per gradient step").range(1, 1 << 24);
    s.add_int("dqn.learning_starts", 100, "env steps of random actions before training starts").min(0);
    s.add_int("dqn.train_freq", 4, "vector steps (one step of every env) between training rounds").range(1, 1 << 30);
    s.add_int("dqn.gradient_steps", 1,
              "gradient steps per training round (-1: as many as the round's env steps, train_freq x num_envs)")
        .range(-1, 1 << 20);
    s.add_int("dqn.target_update_interval", 10000, "env steps between target-network updates").range(1, 1e18);
    s.add_float("dqn.tau", 1.0, "target update coefficient (1: hard copy, < 1: Polyak averaging)").min(0, true).max(1);
    s.add_float("dqn.exploration_initial_eps", 1.0, "initial epsilon of epsilon-greedy").range(0, 1);
    s.add_float("dqn.exploration_final_eps", 0.05, "final epsilon").range(0, 1);
    s.add_float("dqn.exploration_fraction", 0.1, "fraction of total_steps over which epsilon decays linearly")
        .range(0, 1);
    s.add_bool("dqn.double_q", false, "double DQN targets (van Hasselt et al. 2016)");
    s.add_bool("dqn.dueling", false, "dueling value/advantage heads (Wang et al. 2016)");
    s.add_int("dqn.n_step", 1, "n of the n-step return").range(1, 1000);
    s.add_bool("dqn.prioritized", false, "proportional prioritized replay (Schaul et al. 2016)");
    s.add_float("dqn.alpha", 0.6, "priority exponent of prioritized replay").range(0, 10);
    s.add_float("dqn.beta0", 0.4, "initial importance-sampling exponent, annealed linearly to 1").range(0, 1);
    s.add_float("dqn.priority_eps", 1e-6, "added to |TD error| in priorities").min(0, true).finite();
    s.add_float("dqn.learning_rate", 1e-4, "learning rate (constant)").min(0, true).finite();
    s.add_float("dqn.max_grad_norm", 10.0, "gradient-norm clip (0: off)").min(0).finite();
    s.add_string("dqn.loss", "huber", "TD loss: Huber (smooth L1, threshold 1) or mean squared error")
        .choices({"huber", "mse"});
    s.add_string("dqn.optimizer", "adam", "optimizer").choices({"adam", "rmsprop"});
    s.add_float("dqn.optimizer_eps", 1e-8, "optimizer epsilon").min(0).finite();
    s.add_bool("dqn.rmsprop_centered", false,
               "centred RMSprop (PyTorch's centered=True: the gradient's running mean is subtracted from its second "
               "moment; the MinAtar paper's DQN)");
    s.add_float("dqn.rmsprop_alpha", 0.95, "RMSprop squared-gradient decay").range(0, 0.999999);
    return s;
  }();
  return schema;
}

namespace {

std::string int_list(const std::vector<std::int64_t>& v) {
  std::string out = "[";
  for (std::size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
  return out + "]";
}

// The convolutions of network.conv_* (one entry per layer in each list; strides and padding
// may be left empty), checked against the observation shape of `env`.
std::vector<ConvLayerSpec> conv_layers(const io::Settings& st, const std::string& env) {
  const auto channels = st.get_int_list("network.conv_channels");
  const auto kernels = st.get_int_list("network.conv_kernels");
  const auto strides = st.get_int_list("network.conv_strides");
  const auto padding = st.get_int_list("network.conv_padding");
  const std::size_t n = channels.size();
  auto check_length = [&](const char* key, const std::vector<std::int64_t>& v, bool may_be_empty) {
    if (v.size() == n || (may_be_empty && v.empty())) return;
    // A list left at its default is wrong because of network.conv_channels: named by where
    // that was set.
    const bool left = st.is_default(key);
    throw InputError(st.origin(left ? "network.conv_channels" : key) + ": key \"" + key + "\" is " + int_list(v) +
                     (left ? " (its default)" : "") +
                     ", but must have one entry per convolution (network.conv_channels is " + int_list(channels) +
                     ", " + std::to_string(n) + (n == 1 ? " layer)" : " layers)") +
                     (may_be_empty ? ", or be empty" : ""));
  };
  check_length("network.conv_kernels", kernels, false);
  check_length("network.conv_strides", strides, true);
  check_length("network.conv_padding", padding, true);
  std::vector<ConvLayerSpec> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    out[i].channels = channels[i];
    out[i].kernel = kernels[i];
    out[i].stride = strides.empty() ? 1 : strides[i];
    out[i].padding = padding.empty() ? 0 : padding[i];
  }
  if (n == 0) return out;
  const std::vector<std::int64_t> shape = make_env(env)->observation_space().shape();
  EncoderSpec spec;
  spec.conv = out;
  spec.hidden = {1};
  try {
    encoder_output_features(shape, spec);
  } catch (const InputError& e) {
    std::string why = e.what();
    if (const std::string prefix = "rl::make_encoder: "; why.rfind(prefix, 0) == 0) why = why.substr(prefix.size());
    const char* key = shape.size() == 3 ? "network.conv_kernels" : "network.conv_channels";
    std::string shape_text = "{";
    for (std::size_t i = 0; i < shape.size(); ++i) shape_text += (i ? ", " : "") + std::to_string(shape[i]);
    shape_text += "}";
    refuse_key(st, key, int_list(st.get_int_list(key)),
               "the convolutions (network.conv_channels " + int_list(channels) + ", network.conv_kernels " +
                   int_list(kernels) + ") must fit env \"" + env + "\", whose observations have shape " + shape_text +
                   ": " + why);
  }
  return out;
}

}  // namespace

A2cOptions TrainConfig::a2c() const {
  A2cOptions a;
  a.learning_rate = ppo.learning_rate;
  a.anneal_lr = ppo.anneal_lr;
  a.ent_coef = ppo.ent_coef;
  a.vf_coef = ppo.vf_coef;
  a.max_grad_norm = ppo.max_grad_norm;
  a.normalize_advantage = ppo.normalize_advantage;
  a.optimizer = ppo.optimizer;
  a.optimizer_eps = ppo.optimizer_eps;
  a.lr_warmup_iterations = ppo.lr_warmup_iterations;
  a.lr_warmup_start = ppo.lr_warmup_start;
  return a;
}

namespace {

/// `env = "<id>"` (the form from before `[env]` had other keys) as `[env] id = "<id>"`, in
/// the file and in `--set env=<id>` overrides (moved into the copy of the configuration,
/// keeping their origin). Returns whether the id was written as `env`.
bool normalize_env_key(io::Config& cfg, std::vector<std::string>& overrides) {
  bool legacy = false;
  auto to_table = [&cfg, &legacy] {
    const io::ConfigValue* e = cfg.root().find("env");
    if (e == nullptr || e->is_table()) return;
    io::ConfigValue id = *e;
    cfg.root().set("env", io::ConfigValue::table(id.where));
    cfg.set("env.id", std::move(id));
    legacy = true;
  };
  to_table();
  const auto key_of = [](const std::string& o) {
    const auto eq = o.find('=');
    std::string key = eq == std::string::npos ? o : o.substr(0, eq);
    while (!key.empty() && (key.back() == ' ' || key.back() == '\t')) key.pop_back();
    while (!key.empty() && (key.front() == ' ' || key.front() == '\t')) key.erase(key.begin());
    return key;
  };
  std::vector<std::string> rest;
  for (const std::string& o : overrides) {
    if (key_of(o) != "env") {
      rest.push_back(o);
      continue;
    }
    // The last of `--set env=` and `--set env.id=` wins, as for any key given twice: this one
    // is applied before the overrides left in `rest`, so earlier env.id ones are dropped (a
    // later one still overrides it).
    std::erase_if(rest, [&](const std::string& r) { return key_of(r) == "env.id"; });
    io::Config tmp;
    tmp.set_override(o);
    io::ConfigValue v = *tmp.root().find("env");
    if (cfg.root().find("env") == nullptr) cfg.root().set("env", io::ConfigValue::table(v.where));
    cfg.set("env.id", std::move(v));
    legacy = true;
  }
  overrides = std::move(rest);
  return legacy;
}

/// A relative `env.library` from a file is relative to that file's folder, from --set to
/// the working folder; the result is absolute, so that a checkpoint's configuration finds
/// the library from any working folder (herd-rl eval, resume).
std::string library_path(const io::Settings& st) {
  const std::string lib = st.get_path("env.library");
  return std::filesystem::absolute(lib).lexically_normal().string();
}

}  // namespace

namespace {
/// The [algo] keys that PPO reads and A2C does not: A2C takes one full-batch step per rollout
/// at ratio 1, so it has no epochs, minibatches or clipping.
const std::set<std::string>& ppo_only_keys() {
  static const std::set<std::string> keys = {"algo.epochs",     "algo.minibatch_size", "algo.num_minibatches",
                                             "algo.clip_range", "algo.anneal_clip",    "algo.clip_range_vf"};
  return keys;
}

bool algorithm_reads(const std::string& algorithm, const std::string& key) {
  static const std::set<std::string> kDqnReadsAlgo = {"algo.gamma", "algo.lr_scaling", "algo.lr_reference_batch"};
  if (algorithm == "dqn")
    return key != "network.shared_trunk" && key != "network.init_log_std" &&
           (key.rfind("algo.", 0) != 0 || kDqnReadsAlgo.count(key) != 0);
  if (algorithm == "a2c" && ppo_only_keys().count(key) != 0) return false;
  return key.rfind("dqn.", 0) != 0;
}

void refuse_other_algorithm_keys(const io::Settings& st, const std::string& algorithm) {
  std::vector<std::string> set;  // every such key, so that one run names them all
  for (const io::SchemaKey& k : train_schema().keys())
    if (st.is_set(k.name()) && !algorithm_reads(algorithm, k.name())) set.push_back(k.name());
  if (set.empty()) return;
  const std::string& key = set.front();
  std::string why;
  if (algorithm == "dqn" && key.rfind("network.", 0) == 0)
    why = "its Q-network has no policy head to share a trunk with, nor a Gaussian policy's log std";
  else if (algorithm == "dqn")
    why =
        "of [algo] DQN reads only gamma, lr_scaling and lr_reference_batch; its own settings are under [dqn], e.g. "
        "dqn.learning_rate";
  else if (algorithm == "a2c" && ppo_only_keys().count(key) != 0)
    why =
        "A2C takes one full-batch gradient step per rollout without clipping; algo.epochs, minibatch_size, "
        "num_minibatches, clip_range, anneal_clip and clip_range_vf are PPO's: remove it, or set algorithm = "
        "\"ppo\"";
  st.refuse_unread(set, "algorithm = \"" + algorithm + "\"" +
                            (!why.empty() ? " does not read it (" + why + ")"
                                          : " does not read [dqn] (set algorithm = \"dqn\" or remove it)"));
}
}  // namespace

TrainConfig resolve_train_config(const io::Config& config, const std::vector<std::string>& overrides, std::string* text,
                                 int ranks, bool user_input) {
  if (ranks < 1) throw InputError("rl::resolve_train_config: ranks is " + std::to_string(ranks) + ", but must be >= 1");
  io::Config cfg = config;
  std::vector<std::string> sets = overrides;
  const bool legacy_env = normalize_env_key(cfg, sets);
  io::Settings st = train_schema().apply(cfg, sets);
  TrainConfig c;
  c.env = st.get_string("env.id");
  // The id as the input spelled its key: `env = "..."` (the older form), unless a later
  // --set env.id=... gave the value.
  const std::string env_key = legacy_env && st.origin("env.id").rfind("--set env.id", 0) != 0 ? "env" : "env.id";
  if (st.has("env.library")) {
    // A C environment from a shared library, registered under env.id (default: the symbol).
    c.env_library = library_path(st);
    c.env_symbol = st.get_string("env.symbol");
    if (st.is_default("env.id")) c.env = c.env_symbol;
    const std::string where = st.origin("env.library") + ": env.library \"" + st.get_string("env.library") +
                              "\" (env.symbol \"" + c.env_symbol + "\")";
    if (is_registered(c.env) && !is_library_env(c.env))
      throw InputError(st.origin(st.is_default("env.id") ? "env.symbol" : "env.id") + ": the environment of " +
                       "env.library would be registered as \"" + c.env + "\", but that is a built-in environment; " +
                       "set env.id to another name");
    try {
      load_env_library(c.env_library, c.env_symbol, c.env);
    } catch (const InputError& e) {
      throw InputError(where + ": " + e.what());
    }
    // herd-rl always writes a checkpoint (at the end, on --stop-after and Ctrl-C), which holds
    // every environment's state: refused now rather than after the training.
    if (make_env(c.env)->state_dim() == 0)
      throw InputError(where +
                       ": the spec has state_dim 0 (no get_state/set_state), but herd-rl writes a checkpoint "
                       "that holds every environment's state (at the end, on --stop-after and Ctrl-C): give "
                       "state_dim, get_state and set_state (docs/rl.md, \"Your own environment\")");
    // The resolved text (checkpoints, the .h5 output) holds the absolute path and the id.
    const bool relative = !fs_is_absolute(st.get_string("env.library")), default_id = st.is_default("env.id");
    if (relative) cfg.set("env.library", io::ConfigValue::string(c.env_library, st.value("env.library").where));
    if (default_id) cfg.set("env.id", io::ConfigValue::string(c.env, st.value("env.symbol").where));
    if (relative || default_id) st = train_schema().apply(cfg, sets);
  } else if (user_input && st.is_set("env.symbol")) {
    // Without env.library there is no function to look up: the symbol would be ignored.
    st.refuse_unread({"env.symbol"},
                     "env.library is not set: env.symbol names the function of a C environment's shared library "
                     "(docs/rl.md, \"Your own environment\"); set env.library too, or remove it");
  } else if (!is_registered(c.env)) {
    std::string ids;
    for (const auto& id : registered_env_ids()) ids += (ids.empty() ? "\"" : ", \"") + id + "\"";
    throw InputError(st.origin("env.id") + ": key \"" + env_key + "\" is \"" + c.env + "\", but must be one of " + ids +
                     " (an environment registered by a program with register_c_env is known to that program only: " +
                     "name its shared library in [env] library and symbol)");
  }
  {
    // Wrappers: a registered id that makes the wrapped env (the id itself when none).
    WrapperOptions w;
    w.max_episode_steps = st.get_int("env.max_episode_steps");
    w.frame_stack = static_cast<int>(st.get_int("env.frame_stack"));
    c.frame_stack = w.frame_stack;
    w.clip_reward = st.get_bool("env.clip_reward");
    w.episodic_life = st.get_bool("env.episodic_life");
    try {
      c.env = register_wrapped_env(c.env, w);
    } catch (const InputError& e) {
      const char* key = w.episodic_life ? "env.episodic_life" : "env.frame_stack";
      throw InputError(st.origin(key) + ": key \"" + key + "\": " + e.what());
    }
  }
  if (st.get_string("env.obs_dtype") == "uint8") {
    const auto probe = make_env(c.env);
    const Space& os = probe->observation_space();
    for (std::size_t i = 0; i < os.dim(); ++i)
      if (!(os.low()[i] >= 0 && os.high()[i] <= 255))
        refuse_key(st, "env.obs_dtype", "\"uint8\"",
                   c.env + " has observations in [" + std::to_string(os.low()[i]) + ", " +
                       std::to_string(os.high()[i]) + "] (component " + std::to_string(i) +
                       "); uint8 needs integer observations in [0, 255]");
    if (os.values() != BoxValues::kInteger)
      refuse_key(st, "env.obs_dtype", "\"uint8\"",
                 c.env +
                     " has real-valued observations (not declared integer), which uint8 would round to whole "
                     "numbers; uint8 needs integer observations in [0, 255] (a C env declares them with "
                     "obs_integer = 1)");
    c.sampler_options.obs_dtype = ObsDtype::kUint8;
  }
  c.algorithm = st.get_string("algorithm");
  if (user_input) refuse_other_algorithm_keys(st, c.algorithm);
  c.seed = static_cast<std::uint64_t>(st.get_int("seed"));
  c.total_steps = st.get_int("total_steps");
  c.output_prefix = st.get_string("output_prefix");
  if (c.output_prefix.empty()) refuse_key(st, "output_prefix", "\"\"", "must not be empty");
  // The outputs are <prefix>.ckpt, <prefix>.h5, ...: a prefix without a file name ("sub/dir/",
  // ".") would make them hidden files named only by their extensions. (A checkpoint's own
  // configuration, written before this was refused, still evaluates.)
  if (const std::string name = std::filesystem::path(c.output_prefix).filename().string();
      user_input && (name.empty() || name == "." || name == "..")) {
    std::string dir = c.output_prefix;
    if (name == "." || name == "..") dir += "/";
    refuse_key(st, "output_prefix", "\"" + c.output_prefix + "\"",
               "must end in a file name, which starts the outputs' names (e.g. \"" + dir + "run\" writes " + dir +
                   "run.ckpt, " + dir + "run.h5 and " + dir + "run_progress.csv)");
  }
  c.checkpoint_period = st.get_int("checkpoint_period");
  c.checkpoint_period_seconds = st.get_float("checkpoint_period_seconds");
  c.progress_period = st.get_int("progress_period");
  c.eval_max_episode_steps = st.get_int("eval.max_episode_steps");
  c.eval_every_steps = st.get_int("eval.every_steps");
  c.eval_episodes = static_cast<int>(st.get_int("eval.episodes"));
  c.eval_stochastic = st.get_bool("eval.stochastic");
  c.eval_save_best = st.get_bool("eval.save_best");
  if (st.is_set("eval.stop_return")) c.eval_stop_return = st.get_float("eval.stop_return");
  if (user_input && c.eval_every_steps == 0) {
    std::vector<std::string> set;
    for (const char* k : {"eval.episodes", "eval.stochastic", "eval.save_best", "eval.stop_return"})
      if (st.is_set(k)) set.push_back(k);
    if (!set.empty()) st.refuse_unread(set, "eval.every_steps = 0 (no evaluation during training)");
  }
  c.tensorboard = st.get_bool("logging.tensorboard");
  c.device = st.get_string("device");
  {
    const std::string where = st.origin("device") + ": key \"device\" is \"" + c.device + "\", but ";
    try {
      c.agent.device = parse_device(c.device);
    } catch (const InputError&) {
      // A near miss ("cdua", "CPU", "cuda0", "gpu:1") gets a suggestion.
      std::string head = c.device.substr(0, c.device.find(':'));
      for (char& ch : head) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      std::string hint;
      if (head == "gpu") hint = "cuda";
      // The nearest of "cpu" and "cuda" within 2 edits (a transposition, "cdua", is one).
      if (hint.empty() && head.size() >= 2) {
        const std::size_t dc = io::edit_distance(head, "cpu"), dg = io::edit_distance(head, "cuda");
        if (std::min(dc, dg) <= 2) hint = dc < dg ? "cpu" : "cuda";
      }
      if (!hint.empty() && hint != "cpu" && c.device.find(':') != std::string::npos) hint += ":<index>";
      throw InputError(where +
                       "must be \"cpu\", \"cuda\" or \"cuda:<index>\" (<index> a GPU number >= 0, e.g. "
                       "\"cuda:0\")" +
                       (hint.empty() ? std::string() : "; did you mean \"" + hint + "\"?"));
    }
    if (c.agent.device.is_cuda() && user_input) {
      if (!HERD_HAVE_CUDA) throw InputError(where + "this build of herd has no CUDA support; use device = \"cpu\"");
      const int count = cuda_device_count();
      if (count == 0)
        throw InputError(where + "no CUDA device is usable here (" + describe_devices() + "); use device = \"cpu\"");
      if (c.agent.device.index >= count)
        throw InputError(where + "only " + std::to_string(count) +
                         " CUDA device(s) are usable here (cuda:0 to cuda:" + std::to_string(count - 1) + ")");
    }
  }
  c.sampler = st.get_string("sampler.kind");
  // The serial sampler steps every env on the calling thread: more threads would be ignored.
  if (user_input && c.sampler == "serial" && st.get_int("sampler.num_threads") > 1)
    st.refuse_unread({"sampler.num_threads"},
                     "sampler.kind = \"serial\" does not read it (it steps every env on the calling thread): set "
                     "sampler.kind = \"parallel\" for env-stepping threads, or remove it");
  SamplerOptions& so = c.sampler_options;
  so.env_id = c.env;
  so.num_envs = static_cast<int>(st.get_int("sampler.num_envs"));
  so.num_steps = static_cast<int>(st.get_int("sampler.num_steps"));
  so.num_threads = static_cast<int>(st.get_int("sampler.num_threads"));
  // A rollout's samples are indexed with 32-bit integers (the minibatch shuffles).
  if (static_cast<std::int64_t>(so.num_envs) * so.num_steps > std::int64_t{4294967295}) {
    std::ostringstream m;
    m << st.origin("sampler.num_steps") << ": sampler.num_envs x sampler.num_steps is " << so.num_envs << " x "
      << so.num_steps << ", but a rollout may hold at most 4294967295 samples (2^32 - 1)";
    throw InputError(m.str());
  }
  so.seed = c.seed;
  so.normalize_obs = st.get_bool("normalize.obs");
  so.normalize_reward = st.get_bool("normalize.reward");
  c.gamma = st.get_float("algo.gamma");
  c.gae_lambda = st.get_float("algo.gae_lambda");
  so.gamma = c.gamma;
  c.agent.hidden = st.get_int_list("network.hidden");
  const std::string act = st.get_string("network.activation");
  c.agent.activation = act == "relu"  ? nn::Activation::kReLU
                       : act == "elu" ? nn::Activation::kELU
                                      : nn::Activation::kTanh;
  c.agent.init_log_std = st.get_float("network.init_log_std");
  c.agent.shared_trunk = st.get_bool("network.shared_trunk");
  c.agent.init = st.get_string("network.init") == "pytorch" ? EncoderInit::kPyTorch : EncoderInit::kOrthogonal;
  c.agent.conv = conv_layers(st, c.env);
  // Without convolutions the dense layers are the whole network: at least one.
  if (c.agent.hidden.empty() && c.agent.conv.empty())
    refuse_key(st, "network.hidden", "[]",
               "the network needs at least one layer: give hidden widths (e.g. [64, 64]), or convolutions in "
               "network.conv_channels and network.conv_kernels for image observations");
  c.agent.seed = c.seed;
  PpoOptions& p = c.ppo;
  p.learning_rate = st.get_float("algo.learning_rate");
  p.anneal_lr = st.get_bool("algo.anneal_lr");
  p.clip_range = st.get_float("algo.clip_range");
  p.anneal_clip = st.get_bool("algo.anneal_clip");
  p.clip_range_vf = st.get_float("algo.clip_range_vf");
  p.epochs = static_cast<int>(st.get_int("algo.epochs"));
  p.minibatch_size = static_cast<int>(st.get_int("algo.minibatch_size"));
  p.ent_coef = st.get_float("algo.ent_coef");
  p.vf_coef = st.get_float("algo.vf_coef");
  p.max_grad_norm = st.get_float("algo.max_grad_norm");
  p.normalize_advantage = st.get_bool("algo.normalize_advantage");
  p.optimizer = st.get_string("algo.optimizer") == "rmsprop" ? OptimizerKind::kRmsProp : OptimizerKind::kAdam;
  p.optimizer_eps = st.get_float("algo.optimizer_eps");
  p.seed = c.seed;
  c.ranks = ranks;
  if (const std::int64_t nmb = st.get_int("algo.num_minibatches"); nmb > 0) {
    const std::int64_t spi = c.steps_per_iteration();
    if (spi % nmb != 0)
      refuse_key(st, "algo.num_minibatches", std::to_string(nmb),
                 std::string("must divide sampler.num_envs * sampler.num_steps") + (ranks > 1 ? " * ranks" : "") +
                     " = " + std::to_string(spi));
    if (spi / nmb > std::numeric_limits<int>::max())
      refuse_key(st, "algo.num_minibatches", std::to_string(nmb),
                 "the minibatches would have " + std::to_string(spi / nmb) + " samples (at most 2147483647); raise it");
    // Both given and disagreeing: one of them would be ignored without a word.
    if (user_input && st.is_set("algo.minibatch_size") && p.minibatch_size != spi / nmb)
      refuse_key(st, "algo.minibatch_size", std::to_string(p.minibatch_size),
                 "algo.num_minibatches = " + std::to_string(nmb) + " (" + st.origin("algo.num_minibatches") +
                     ") sets the minibatch size to " + std::to_string(spi) + " / " + std::to_string(nmb) + " = " +
                     std::to_string(spi / nmb) +
                     ": give one of them (algo.num_minibatches = 0 uses algo.minibatch_size)");
    p.minibatch_size = static_cast<int>(spi / nmb);
  }
  c.lr_scaling = st.get_string("algo.lr_scaling");
  c.lr_reference_batch = st.get_int("algo.lr_reference_batch");
  const double k = static_cast<double>(c.steps_per_iteration()) / static_cast<double>(c.lr_reference_batch);
  c.lr_scale = c.lr_scaling == "linear" ? k : c.lr_scaling == "sqrt" ? std::sqrt(k) : 1.0;
  p.learning_rate *= c.lr_scale;
  p.lr_warmup_iterations = static_cast<int>(st.get_int("algo.lr_warmup_iterations"));
  // Goyal et al. (2017): warm up from the unscaled rate (only when scaling raised it).
  p.lr_warmup_start = c.lr_scale > 1.0 ? 1.0 / c.lr_scale : 1.0;
  if (p.lr_warmup_start >= 1.0) p.lr_warmup_iterations = 0;
  if (c.algorithm == "dqn") {
    DqnOptions& q = c.dqn;
    q.buffer_size = st.get_int("dqn.buffer_size");
    q.batch_size = static_cast<int>(st.get_int("dqn.batch_size"));
    q.learning_starts = st.get_int("dqn.learning_starts");
    q.train_freq = static_cast<int>(st.get_int("dqn.train_freq"));
    q.gradient_steps = static_cast<int>(st.get_int("dqn.gradient_steps"));
    q.target_update_interval = st.get_int("dqn.target_update_interval");
    q.tau = st.get_float("dqn.tau");
    q.exploration_initial_eps = st.get_float("dqn.exploration_initial_eps");
    q.exploration_final_eps = st.get_float("dqn.exploration_final_eps");
    q.exploration_fraction = st.get_float("dqn.exploration_fraction");
    q.double_q = st.get_bool("dqn.double_q");
    q.dueling = st.get_bool("dqn.dueling");
    q.n_step = static_cast<int>(st.get_int("dqn.n_step"));
    q.prioritized = st.get_bool("dqn.prioritized");
    q.alpha = st.get_float("dqn.alpha");
    q.beta0 = st.get_float("dqn.beta0");
    q.priority_eps = st.get_float("dqn.priority_eps");
    q.learning_rate = st.get_float("dqn.learning_rate");
    q.max_grad_norm = st.get_float("dqn.max_grad_norm");
    q.loss = st.get_string("dqn.loss") == "mse" ? DqnLoss::kMse : DqnLoss::kHuber;
    q.optimizer = st.get_string("dqn.optimizer") == "rmsprop" ? OptimizerKind::kRmsProp : OptimizerKind::kAdam;
    q.optimizer_eps = st.get_float("dqn.optimizer_eps");
    q.rmsprop_alpha = st.get_float("dqn.rmsprop_alpha");
    q.rmsprop_centered = st.get_bool("dqn.rmsprop_centered");
    q.gamma = c.gamma;
    // Stooke & Abbeel (2018): the learning rate grows with the minibatch (over all ranks:
    // data-parallel DQN averages the ranks' batch_size-sample gradients).
    const double kb =
        static_cast<double>(ranks) * static_cast<double>(q.batch_size) / static_cast<double>(c.lr_reference_batch);
    c.lr_scale = c.lr_scaling == "linear" ? kb : c.lr_scaling == "sqrt" ? std::sqrt(kb) : 1.0;
    q.learning_rate *= c.lr_scale;
    const auto fail = [&](const std::string& key, const std::string& value, const std::string& expected) {
      refuse_key(st, key, value, expected);
    };
    // Each ring holds an n-step transition with its bootstrap slot and the frames of its stack.
    const std::int64_t per_env = q.buffer_size / so.num_envs, need = q.n_step + c.frame_stack + 1;
    if (per_env < need)
      fail("dqn.buffer_size", std::to_string(q.buffer_size),
           "must give each of the sampler.num_envs = " + std::to_string(so.num_envs) + " envs at least dqn.n_step + " +
               (c.frame_stack > 1 ? "env.frame_stack + 1" : std::string("2")) + " = " + std::to_string(need) +
               " slots (>= " + std::to_string(need * so.num_envs) + ")");
    // Each batch is drawn from the replay buffer (as Stable-Baselines3 users expect): a batch
    // larger than the buffer would repeat its transitions and run slowly for nothing.
    if (q.batch_size > q.buffer_size) {
      const bool batch_set = !st.is_default("dqn.batch_size");
      if (batch_set)
        fail("dqn.batch_size", std::to_string(q.batch_size),
             "must be <= dqn.buffer_size = " + std::to_string(q.buffer_size) +
                 " (each batch is drawn from the replay buffer): lower dqn.batch_size or raise dqn.buffer_size");
      fail("dqn.buffer_size", std::to_string(q.buffer_size),
           "must be >= dqn.batch_size = " + std::to_string(q.batch_size) +
               " (each batch is drawn from the replay buffer): raise dqn.buffer_size or lower dqn.batch_size");
    }
    // Data-parallel DQN on GPUs averages its gradients over NCCL (as PPO's).
    if (const std::string why = multi_gpu_refusal(c.agent.device, ranks); user_input && !why.empty())
      fail("device", "\"" + c.device + "\"", "with " + std::to_string(ranks) + " ranks " + why);
    if (c.sampler == "alternating")
      fail("sampler.kind", "\"alternating\"", "DQN steps its envs with the \"serial\" or \"parallel\" sampler");
    if (so.normalize_obs || so.normalize_reward)
      fail(so.normalize_obs ? "normalize.obs" : "normalize.reward", "true",
           "DQN does not normalise observations or rewards (its replay stores raw ones): set it to false");
    if (auto probe = make_env(c.env); !probe->action_space().is_discrete())
      fail("algorithm", "\"dqn\"",
           "DQN needs a discrete action space, and env \"" + c.env + "\" has " + probe->action_space().to_string() +
               " (use \"ppo\" or \"a2c\")");
  }
  if (c.algorithm == "ppo" && p.minibatch_size > c.steps_per_iteration())
    refuse_key(st, "algo.minibatch_size", std::to_string(p.minibatch_size),
               std::string("must be <= sampler.num_envs * sampler.num_steps") + (ranks > 1 ? " * ranks" : "") + " = " +
                   std::to_string(c.steps_per_iteration()));
  if (c.algorithm == "ppo" && p.minibatch_size % ranks != 0)
    refuse_key(st, "algo.minibatch_size", std::to_string(p.minibatch_size),
               "with " + std::to_string(ranks) + " ranks it must be divisible by " + std::to_string(ranks) +
                   " (each rank takes an equal share)");
  // A minibatch size that does not divide the rollout leaves a shorter last minibatch in
  // every epoch, which gets a whole optimizer step: run, with Stable-Baselines3's warning.
  if (c.algorithm == "ppo" && p.minibatch_size > 0 && c.steps_per_iteration() % p.minibatch_size != 0)
    c.warnings.push_back(std::string("algo.minibatch_size is ") + std::to_string(p.minibatch_size) +
                         ", which does not divide sampler.num_envs * sampler.num_steps" +
                         (ranks > 1 ? " * ranks" : "") + " = " + std::to_string(c.steps_per_iteration()) +
                         ": every epoch ends with a minibatch of " +
                         std::to_string(c.steps_per_iteration() % p.minibatch_size) +
                         " samples that takes a whole optimizer step (as Stable-Baselines3 does); choose a divisor, or "
                         "set algo.num_minibatches");
  if (c.sampler == "alternating" && c.sampler_options.num_envs % 2 != 0)
    refuse_key(st, "sampler.num_envs", std::to_string(c.sampler_options.num_envs),
               "the alternating sampler needs an even number (two groups of num_envs / 2)");
  c.max_memory = st.get_memory_size("max_memory");
  if (st.is_set("max_memory")) c.max_memory_origin = st.origin("max_memory");
  // Configurations that learn little or nothing run, with a warning on the terminal.
  const bool one_sample = c.algorithm == "ppo" ? p.minibatch_size == 1 : c.steps_per_iteration() == 1;
  if (one_sample && p.normalize_advantage && c.algorithm != "dqn")
    c.warnings.push_back(std::string(c.algorithm == "ppo" ? "algo.minibatch_size is 1" : "one env step per iteration") +
                         ": the advantage of a single sample cannot be normalised and is used as it is (as "
                         "Stable-Baselines3 does); each update follows one noisy sample, so the policy learns slowly "
                         "if at all; use minibatches of at least 32 samples");
  // An evaluation period beyond the run's length evaluates nothing: run, and say so.
  if (const std::int64_t steps = c.num_iterations() * c.steps_per_iteration();
      c.eval_every_steps > 0 && c.eval_every_steps > steps)
    c.warnings.push_back("eval.every_steps is " + std::to_string(c.eval_every_steps) + ", more than the run's " +
                         std::to_string(steps) + " env steps (total_steps in whole iterations): no evaluation " +
                         "during training will run; lower eval.every_steps or raise total_steps");
  // The resolved configuration marks the keys the algorithm does not read (their defaults,
  // since a key set for another algorithm is refused above), commented out: read again as
  // an input file (or on resume), the text leaves them at their defaults instead of
  // setting keys that the algorithm refuses.
  // So are the keys that other settings make unread: algo.minibatch_size beside
  // algo.num_minibatches, env.symbol without env.library, the serial sampler's threads,
  // the evaluation's settings without eval.every_steps.
  if (text) {
    const bool by_num_minibatches = st.get_int("algo.num_minibatches") > 0;
    *text = st.describe([&c, by_num_minibatches](const std::string& key) {
      if (!algorithm_reads(c.algorithm, key)) return "not read by algorithm = \"" + c.algorithm + "\"";
      if (key == "algo.minibatch_size" && by_num_minibatches)
        return std::string("not read: algo.num_minibatches sets the minibatch size");
      if (key == "env.symbol" && c.env_library.empty()) return std::string("not read without env.library");
      if (key == "sampler.num_threads" && c.sampler == "serial")
        return std::string("not read by sampler.kind = \"serial\"");
      if (c.eval_every_steps == 0 &&
          (key == "eval.episodes" || key == "eval.stochastic" || key == "eval.save_best" || key == "eval.stop_return"))
        return std::string("not read without eval.every_steps");
      return std::string();
    });
  }
  return c;
}

namespace {
/// Whether the TOML file `path` gives the environment both as `env = "<id>"` and as a table
/// (`[env]` or a dotted `env.<key>`), which TOML cannot hold: its parser reports a redefined
/// key, and the message then says how to write it.
bool env_given_both_ways(const std::string& path) {
  std::ifstream in(path);
  bool as_string = false, as_table = false;
  for (std::string line; std::getline(in, line);) {
    std::size_t i = line.find_first_not_of(" \t");
    if (i == std::string::npos) continue;
    if (line[i] == '[') {
      i = line.find_first_not_of(" \t", i + 1);
      if (i != std::string::npos && line.compare(i, 3, "env") == 0) {
        const std::size_t j = line.find_first_not_of(" \t", i + 3);
        if (j != std::string::npos && (line[j] == ']' || line[j] == '.')) as_table = true;
      }
      continue;
    }
    if (line.compare(i, 3, "env") != 0) continue;
    const std::size_t j = line.find_first_not_of(" \t", i + 3);
    if (j == std::string::npos) continue;
    if (line[j] == '=') as_string = true;
    if (line[j] == '.') as_table = true;
  }
  return as_string && as_table;
}
}  // namespace

TrainConfig load_train_config(const std::string& path, const std::vector<std::string>& overrides, std::string* text,
                              int ranks) {
  if (path.empty()) return resolve_train_config(io::Config("<defaults>"), overrides, text, ranks);
  io::Config config;
  try {
    config = io::read_config(path);
  } catch (const InputError& e) {
    const std::string what = e.what();
    if (what.find("cannot redefine existing") != std::string::npos && what.find("'env'") != std::string::npos &&
        env_given_both_ways(path))
      throw InputError(what +
                       " (env = \"...\" and [env] cannot both be used: write the id inside [env], as id = "
                       "\"...\")");
    throw;
  }
  return resolve_train_config(config, overrides, text, ranks);
}

TrainConfig parse_train_config(const std::string& text, std::string* resolved, int ranks) {
  return resolve_train_config(io::parse_toml(text, "<checkpoint config>"), {}, resolved, ranks, false);
}

Device data_parallel_device(const Device& configured, const std::string& device_text, int ranks, int rank,
                            int local_rank, int device_count, const std::string& who) {
  if (!configured.is_cuda() || ranks <= 1 || device_text != "cuda") return configured;
  if (device_count < 1)
    throw InputError(who + ": device is \"cuda\", but no CUDA device is usable on rank " + std::to_string(rank) + " (" +
                     describe_devices() + ")");
  return Device::cuda(local_rank % device_count);
}

std::string multi_gpu_refusal(const Device& device, int ranks, bool have_nccl) {
  if (!device.is_cuda() || ranks <= 1 || have_nccl) return "";
  return "this build of herd has no NCCL (gradients of GPU agents are averaged over NCCL); run one rank, or device = "
         "\"cpu\"";
}

}  // namespace herd::rl

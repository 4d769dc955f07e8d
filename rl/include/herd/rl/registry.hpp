#pragma once
/// @file registry.hpp
/// Environments by id, as Gymnasium's `gymnasium.make` (built-ins: CartPole-v1, Acrobot-v1,
/// MountainCar-v0, MountainCarContinuous-v0, Pendulum-v1, with Gymnasium's registered time
/// limits 500, 500, 200, 999, 200 steps; MinAtar/Breakout and MinAtar/Freeway, see
/// minatar.hpp: -v0 with the full 6-action set, -v1 with the minimal one).

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "herd/rl/env.hpp"

namespace herd::rl {

/// Creates a fresh environment instance.
using EnvFactory = std::function<std::unique_ptr<Env>()>;

/// Creates the environment registered as `id`. Thread-safe.
/// @throws herd::InputError naming the id and the registered ids when `id` is unknown.
std::unique_ptr<Env> make_env(const std::string& id);

/// Registers (or replaces) a user environment under `id`; the factory may be called from
/// any thread. Thread-safe. @throws herd::InputError when `id` is empty or `factory` null.
void register_env(const std::string& id, EnvFactory factory);

/// Whether `id` is registered. Thread-safe.
bool is_registered(const std::string& id);

/// Registered ids, sorted. Thread-safe.
std::vector<std::string> registered_env_ids();

}  // namespace herd::rl

#pragma once
/// @file c_env.hpp
/// User environments written against the C interface `c_env.h`, wrapped as `Env`.

#include <memory>
#include <string>

#include "herd/rl/c_env.h"
#include "herd/rl/env.hpp"

namespace herd::rl {

/// Makes an `Env` from a C spec. The user instance is created at the first reset or
/// `set_state`, with `create(user, s)` where s is the first 64-bit draw of
/// `RngStream(seed, global_id, kEnvReset)` at index 2^47 (disjoint from episode indices), so
/// it is distinct per environment of a pool; each `reset` passes the first 64-bit draw of
/// the episode's reset stream. Box actions are clipped to the spec's bounds before the
/// callback sees them. `observe` returns the last observation of reset/step. `get_state` /
/// `set_state` need the spec's optional callbacks (`state_dim` 0 otherwise). A nonzero
/// callback status throws `herd::Error` naming the env id, global id and callback.
/// @param id name used in messages and by `id()`
/// @throws herd::InputError when the spec is invalid (sizes, bounds, missing callbacks).
std::unique_ptr<Env> make_c_env(const herd_env_spec& spec, const std::string& id);

/// Registers a C spec under `id`, so `make_env(id)` and EnvPool make instances from it.
/// The spec is copied; the instances' `create` seed is derived from seed 0 and global id 0
/// (EnvPool passes distinct per-episode reset seeds). Thread-safe.
/// @throws herd::InputError when the spec is invalid.
void register_c_env(const std::string& id, const herd_env_spec& spec);

}  // namespace herd::rl

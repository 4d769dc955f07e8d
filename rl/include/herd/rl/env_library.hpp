#pragma once
#include "herd/core/cxx20.hpp"  // C++20 or one clear error
/// @file env_library.hpp
/// User environments from shared libraries: a library exporting a `herd_env_spec_fn`
/// (c_env.h) is opened (`herd::SharedLibrary`), its function fills a `herd_env_spec`, and
/// the spec is registered under an id, so `make_env`, the EnvPool, the samplers, the
/// trainer and `evaluate_checkpoint` use it as any built-in environment. herd-rl's
/// `[env] library` / `symbol` keys call this (docs/rl.md, "Your own environment").

#include <string>

namespace herd::rl {

/// Opens `path`, looks up `symbol` (a `herd_env_spec_fn`), calls it on a zero-initialised
/// spec and registers the spec under `id` (`register_c_env`). The library stays loaded for
/// the rest of the process (the registered environments call into it). Loading the same
/// (path, symbol) again registers the spec it gave the first time under `id`, without
/// calling the function again. Thread-safe.
/// @throws herd::InputError "cannot load '<path>': ...", "'<path>' has no symbol
///         '<symbol>': ...", "<symbol> returned status <s> ...", "<symbol> ... wrote at byte offset <b> of the
///         spec, past the <n> bytes of this herd's herd_env_spec ..." (a library built against
///         a newer c_env.h that set fields this herd does not know) or the spec's problem (as
///         `register_c_env`: "obs_dim is 0, but must be >= 1", ...); nothing is registered then.
void load_env_library(const std::string& path, const std::string& symbol, const std::string& id);

/// Whether `id` was registered by `load_env_library` (so a later load may replace it,
/// whereas a built-in id may not be taken). Thread-safe.
bool is_library_env(const std::string& id);

}  // namespace herd::rl

#pragma once
/// @file model_targets.hpp
/// The posteriordb models as entries of the sampler's target registry
/// (herd/mcmc/run/target_registry.hpp): `target.model = "<name>"` (short or posteriordb
/// name), with the model's embedded data or `data.file` (JSON, or the numeric datasets of
/// the HDF5 group `data.group`).

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "herd/mcmc/run/target_registry.hpp"

namespace herd::examples {

/// Adds every model of `model_names()` to `registry` (family `target.model`, its
/// posteriordb name as an alias). Thread-safe as `TargetRegistry::add`.
void register_models(mcmc::TargetRegistry& registry);

/// Model data from a JSON file, or from the numeric datasets of the HDF5 group `group`, as
/// the JSON object the posteriordb models take (arrays nested in their own shape, integers
/// kept integers). `origin` names the input key's place in messages. `non_numeric`, when
/// given, receives the names of the HDF5 group's datasets that are not numbers (skipped).
/// @throws herd::InputError naming the origin and the file.
nlohmann::json load_model_data(const std::string& path, const std::string& group, const std::string& origin,
                               std::vector<std::string>* non_numeric = nullptr);

}  // namespace herd::examples

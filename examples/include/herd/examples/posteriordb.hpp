#pragma once
#include "herd/core/cxx20.hpp"  // C++20 or one clear error
/// @file posteriordb.hpp
/// Six posteriors of posteriordb (stan-dev/posteriordb, commit 28f8d3d) written in C++ as log
/// densities on their unconstrained vectors, with their data embedded (examples/models/data)
/// or loaded from a JSON file. `herd-sample` selects them with `[target] model = "<name>"`.
///
/// Each log density includes every normalising constant of the proper density terms and the
/// log-Jacobian of the transforms (flat priors contribute 0), so it equals the reference
/// `logp_checks` of the validation data to rounding.

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace herd::examples {

/// A posterior on an unconstrained vector `u` of `dim()` coordinates.
/// Thread-safety: `log_density` and `quantities` are const and reentrant (no shared scratch),
/// so many chains may call them concurrently.
class PosteriorModel {
 public:
  virtual ~PosteriorModel() = default;
  /// Short name, e.g. "kidscore_interaction".
  virtual std::string name() const = 0;
  /// posteriordb's full name, e.g. "kidiq-kidscore_interaction".
  virtual std::string posteriordb_name() const = 0;
  /// Number of unconstrained coordinates.
  virtual int dim() const = 0;
  /// Names of the unconstrained coordinates, e.g. "beta[1]", "log_sigma" (`[dim()]`).
  virtual std::vector<std::string> coordinate_names() const = 0;
  /// Names of the reference quantities (constrained or derived), e.g. "sigma", "theta[1]".
  virtual std::vector<std::string> quantity_names() const = 0;
  /// Log density at `u` (`[dim()]`); -inf where the density is 0; NaN never for finite `u`
  /// unless the model's arithmetic overflows.
  virtual double log_density(const double* u) const = 0;
  /// Reference quantities at `u`: writes `q[quantity_names().size()]`.
  virtual void quantities(const double* u, double* q) const = 0;
};

/// Short names of the available models, in a fixed order.
std::vector<std::string> model_names();

/// The model `name` (short or posteriordb name) with its embedded data.
/// @throws herd::InputError naming the value and the valid names when `name` is unknown.
std::unique_ptr<PosteriorModel> make_model(const std::string& name);

/// The model `name` with the given data (posteriordb's JSON data object).
/// @throws herd::InputError naming the missing or malformed data field.
std::unique_ptr<PosteriorModel> make_model(const std::string& name, const nlohmann::json& data);

/// The embedded data of model `name` as JSON text. @throws herd::InputError if unknown.
std::string embedded_data(const std::string& name);

}  // namespace herd::examples

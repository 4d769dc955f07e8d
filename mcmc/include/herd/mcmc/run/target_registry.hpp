#pragma once
/// @file target_registry.hpp
/// One registry of the targets a run can sample by name, used by herd-sample, the C/Fortran
/// API (`herd_run_dram` with a NULL log function and a `[target]` table in the input) and the
/// batched devices: the built-in analytic targets (`target.builtin`: normal, banana,
/// rosenbrock, mixture, funnel; all but the mixture with their device-callable form for
/// `device = "cuda"`), the posteriordb models (`target.model`, registered by the program
/// that links them: `herd::examples::register_models`) and plugins (`target.library`, a
/// shared library with a ParaMonte-signature log density). Each entry makes, from the
/// resolved input keys `target.*` (and `data.*` for a model's data), the point log density
/// for the serial kernel and, where there is one, the device-callable form.

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "herd/io/schema.hpp"
#include "herd/mcmc/batched_run.hpp"
#include "herd/mcmc/paradram_run.hpp"

namespace herd::mcmc {

/// A target made from the input.
struct MadeTarget {
  SampleTarget target;                           ///< the point log density and its names
  std::shared_ptr<const BatchedTarget> batched;  ///< the device-callable form, or null
  /// Loads code the target needs (a plugin library) once the outputs are checked; may be
  /// empty (`SamplerProgramInput::load_target`).
  std::function<void()> load;
  /// What chose it, as the input reads: `target.builtin = "normal"`, `target.model =
  /// "arK"`, `target.library = "libf.so"` (set by `TargetRegistry::make`).
  std::string chosen_by;
  /// The target keys (`target.*`, `data.*`) this target does not read, each with why (e.g.
  /// "not read by target.builtin = \"normal\""), all at their defaults (`TargetRegistry::make`
  /// and the makers refuse them when set): the resolved input comments them out.
  std::vector<std::pair<std::string, std::string>> unread_keys;
};

/// The registry (see the file comment). Thread-safe: `add` and the lookups lock.
class TargetRegistry {
 public:
  /// The input key that chooses an entry: `target.builtin`, `target.model` or `target.library`.
  enum class Family { kBuiltin, kModel, kPlugin };
  /// Makes the target from the resolved settings (the keys `declare_keys` declares).
  /// @throws herd::InputError naming the input file, key, value and what was expected.
  using Maker = std::function<MadeTarget(const io::Settings&)>;
  /// One registered target.
  struct Entry {
    std::string name;                  ///< the value of the family's key, e.g. "normal"
    Family family = Family::kBuiltin;  ///< the key that chooses it
    std::string summary;               ///< one line describing it
    std::vector<std::string> aliases;  ///< other accepted values (posteriordb's full names)
    Maker make;                        ///< makes it from the settings (called on every rank)
    /// The target keys it reads besides the family key (e.g. the banana's `target.ndim`,
    /// `target.b`); `make` refuses every other target key that is set, in one line naming
    /// them all. Left unset (an entry a program adds without saying): every key counts as
    /// read, none is refused.
    std::optional<std::vector<std::string>> reads = std::nullopt;
  };

  /// The process's registry, holding the built-in targets and the plugin loader
  /// (`register_builtin_targets`); programs add their models to it.
  static TargetRegistry& global();

  /// Adds `e`, replacing an entry of the same family and name.
  void add(Entry e);
  /// Names of the entries of `family` in the order added (aliases when `with_aliases`, after them).
  std::vector<std::string> names(Family family, bool with_aliases = false) const;
  /// The entry of `family` named `name` (or one of its aliases). @throws herd::InputError
  /// in one line naming the value and every known name of the family.
  Entry find(Family family, const std::string& name) const;

  /// Declares the target keys (`target.builtin|model|library|symbol|thread_safe|ndim|mean|
  /// cov|rho|b|weights|means|sigmas`, `data.file`, `data.group`) in `schema`, the registered
  /// names as the choices of `target.builtin` and `target.model`.
  void declare_keys(io::Schema& schema) const;
  /// True when `settings` choose a target (any of target.builtin, target.model, target.library).
  static bool chooses_target(const io::Settings& settings);
  /// The target the settings choose: exactly one of target.builtin, target.model and
  /// target.library, else the model `default_model` when not empty.
  /// The target keys the entry does not read (Entry::reads) must be at their defaults.
  /// @throws herd::InputError (more than one given; none given and no default; an unknown
  /// name, in one line listing the known ones; a target key set that the chosen target
  /// does not read, in one line naming every such key; the entry's own checks).
  MadeTarget make(const io::Settings& settings, const std::string& default_model = "") const;

 private:
  mutable std::mutex mu_;
  std::vector<Entry> entries_;
};

/// Adds the built-in analytic targets (normal, banana, rosenbrock, mixture, funnel) and the
/// plugin loader to `registry` (`TargetRegistry::global` holds them already).
void register_builtin_targets(TargetRegistry& registry);

}  // namespace herd::mcmc

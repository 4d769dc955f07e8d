// The target registry (herd/mcmc/run/target_registry.hpp): built-in analytic targets,
// plugins, and the models programs register.
#include "herd/mcmc/run/target_registry.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <utility>

#include <fmt/format.h>

#include "herd/core/error.hpp"
#include "herd/core/memory.hpp"
#include "herd/mcmc/plugin.hpp"
#include "herd/mcmc/sampler_specs.hpp"
#include "herd/mcmc/targets.hpp"

namespace herd::mcmc {

namespace {

const char* family_key(TargetRegistry::Family f) {
  switch (f) {
    case TargetRegistry::Family::kBuiltin:
      return "target.builtin";
    case TargetRegistry::Family::kModel:
      return "target.model";
    case TargetRegistry::Family::kPlugin:
      break;
  }
  return "target.library";
}

std::string quoted(const std::vector<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "\"" : ", \"") + n + "\"";
  return s;
}

/// The plugin library's path, absolute: a relative path written in an input file is relative
/// to that file's folder (as a path in a Makefile or CMakeLists.txt is), so that a run does not
/// depend on the working directory; one given with --set (or in input text) is relative to the
/// working directory. Never a bare name, which dlopen would look up in the system's library
/// folders instead (a `library = "liblogf.so"` beside the input would not be found, and one
/// named like a system library would load that).
std::string plugin_path(const io::Settings& st) {
  const std::string lib = st.get_path("target.library");
  return std::filesystem::absolute(lib).lexically_normal().string();
}

/// A plugin (target.library): not loaded here; `load` loads it, which `run_sampler_program`
/// calls once the output prefix is locked and its outputs are checked (loading a library
/// runs its code).
MadeTarget make_plugin(const io::Settings& st) {
  if (!st.has("target.ndim"))
    throw InputError(fmt::format("{}: target.library is given, but target.ndim is not", st.origin("target.library")));
  MadeTarget made;
  auto plugin = std::make_shared<std::shared_ptr<PluginLogDensity>>();
  const std::string library = plugin_path(st);
  // A library that does not load is named at target.library's origin, a symbol it lacks at
  // target.symbol's (when the input set it; the default's problem is the library's).
  made.load = [plugin, library, symbol = st.get_string("target.symbol"), origin = st.origin("target.library"),
               symbol_origin =
                   st.is_default("target.symbol") ? st.origin("target.library") : st.origin("target.symbol"),
               written = st.get_string("target.library")] {
    std::optional<SharedLibrary> lib;
    try {
      lib.emplace(library);
    } catch (const InputError& e) {
      throw InputError(fmt::format("{}: target.library \"{}\": dram plugin: {}", origin, written, e.what()));
    }
    try {
      *plugin = std::make_shared<PluginLogDensity>(std::move(*lib), symbol);
    } catch (const InputError& e) {
      throw InputError(fmt::format("{}: target.symbol \"{}\" (target.library \"{}\"): {}", symbol_origin, symbol,
                                   written, e.what()));
    }
  };
  SampleTarget& t = made.target;
  t.ndim = static_cast<int>(st.get_int("target.ndim"));
  t.log_density = [plugin](const double* x, int n) { return (**plugin)(x, n); };
  t.thread_safe = st.get_bool("target.thread_safe");
  t.description = fmt::format("plugin {} ({})", st.get_string("target.symbol"), library);
  return made;
}

/// target.ndim of a built-in target (required but for the normal, whose mean may give it).
int builtin_ndim(const io::Settings& st, const std::string& kind) {
  if (!st.has("target.ndim") && kind != "normal")
    throw InputError(fmt::format("{}: target.builtin is \"{}\", but target.ndim is not given (an integer >= 1)",
                                 st.origin("target.builtin"), kind));
  return st.has("target.ndim") ? static_cast<int>(st.get_int("target.ndim")) : 0;
}

/// The normal target's covariance [d, d]: target.cov, else AR(1) with target.rho.
Eigen::MatrixXd normal_covariance(const io::Settings& st, int d) {
  Eigen::MatrixXd cov(d, d);
  if (st.has("target.cov")) {
    const auto c = st.get_float_list("target.cov");
    // Its length (ndim x ndim values), symmetric and positive definite: the factorisation reads one triangle only, so a
    // typo in the other would change the target silently.
    check_matrix_key(st, "target.cov", c, static_cast<std::size_t>(d), false);
    for (int i = 0; i < d; ++i)
      for (int j = 0; j < d; ++j)
        cov(i, j) = c[static_cast<std::size_t>(i) * static_cast<std::size_t>(d) + static_cast<std::size_t>(j)];
  } else {
    const double rho = st.get_float("target.rho");
    for (int i = 0; i < d; ++i)
      for (int j = 0; j < d; ++j) cov(i, j) = std::pow(rho, std::abs(i - j));
  }
  return cov;
}

/// The dimension and mean of the normal target; the covariance's memory checked first.
std::vector<double> normal_mean(const io::Settings& st, int& d) {
  std::vector<double> mean = st.has("target.mean") ? st.get_float_list("target.mean") : std::vector<double>{};
  if (d == 0) d = static_cast<int>(mean.size());
  if (d == 0)
    throw InputError(fmt::format("{}: target.builtin is \"normal\", but neither target.ndim nor target.mean is given",
                                 st.origin("target.builtin")));
  // The covariance and its factors are ndim x ndim: checked before they are allocated.
  std::uint64_t max_memory = 0;
  try {
    max_memory = parse_memory_size(st.get_string("max_memory"));
  } catch (const InputError&) {
    // reported, naming the key, when the sampler's specifications are resolved
  }
  check_memory_need(4.0 * d * d * 8.0, max_memory,
                    fmt::format("the normal target's covariance (target.ndim {} x {})", d, d), "lower target.ndim");
  if (mean.empty()) mean.assign(static_cast<std::size_t>(d), 0.0);
  if (static_cast<int>(mean.size()) != d)
    throw InputError(fmt::format("{}: key \"target.mean\" has {} value{}, but must have target.ndim = {}",
                                 st.origin("target.mean"), mean.size(), mean.size() == 1 ? "" : "s", d));
  return mean;
}

// A built-in target made of its serial form `t` (shared by the returned log density) and,
// when it has one, its device-callable form `bt` (nullptr: no batched path).
template <class Serial>
MadeTarget analytic_target(std::shared_ptr<Serial> t, int d, std::shared_ptr<BatchedTarget> bt,
                           std::string description) {
  MadeTarget made;
  made.target.log_density = [t](const double* x, int n) { return (*t)(x, n); };
  made.batched = std::move(bt);
  made.target.description = std::move(description);
  made.target.ndim = d;
  made.target.thread_safe = true;
  return made;
}

MadeTarget make_normal(const io::Settings& st) {
  // target.cov replaces the AR(1) covariance: a target.rho given beside it would be ignored.
  if (st.has("target.cov") && st.is_set("target.rho"))
    throw InputError(
        fmt::format("{}: key \"{}\" is set, but target.cov is given ({}), which replaces the AR(1) "
                    "covariance of target.rho; give one of them",
                    st.origin("target.rho"), st.written("target.rho"), st.origin("target.cov")));
  int d = builtin_ndim(st, "normal");
  std::vector<double> mean = normal_mean(st, d);
  const Eigen::MatrixXd cov = normal_covariance(st, d);
  std::shared_ptr<MultivariateNormal> mvn;
  try {
    mvn = std::make_shared<MultivariateNormal>(Eigen::Map<Eigen::VectorXd>(mean.data(), d), cov);
  } catch (const Error& e) {
    const char* key = st.has("target.cov") ? "target.cov" : "target.rho";
    throw InputError(fmt::format("{}: {}: {}", st.origin(key), key, e.what()));
  }
  std::vector<double> cv(static_cast<std::size_t>(d) * static_cast<std::size_t>(d));
  for (int i = 0; i < d; ++i)
    for (int j = 0; j < d; ++j)
      cv[static_cast<std::size_t>(i) * static_cast<std::size_t>(d) + static_cast<std::size_t>(j)] = cov(i, j);
  auto bt = std::make_shared<BatchedTarget>(BatchedTarget::gaussian_target(std::make_shared<GaussianTarget>(mean, cv)));
  MadeTarget made = analytic_target(mvn, d, std::move(bt), fmt::format("built-in multivariate normal, ndim {}", d));
  if (st.has("target.cov")) made.unread_keys.emplace_back("target.rho", "target.cov is given and replaces it");
  return made;
}

MadeTarget make_banana(const io::Settings& st) {
  const int d = builtin_ndim(st, "banana");
  auto bt = std::make_shared<BatchedTarget>();
  bt->kind = BatchedTarget::Kind::kBanana;
  bt->banana = BananaLogDensity{d, st.get_float("target.b")};
  return analytic_target(std::make_shared<Banana>(d, st.get_float("target.b")), d, std::move(bt),
                         fmt::format("built-in banana (Haario et al. 1999), ndim {}", d));
}

MadeTarget make_rosenbrock(const io::Settings& st) {
  const int d = builtin_ndim(st, "rosenbrock");
  auto bt = std::make_shared<BatchedTarget>();
  bt->kind = BatchedTarget::Kind::kRosenbrock;
  bt->rosenbrock = RosenbrockLogDensity{d};
  return analytic_target(std::make_shared<Rosenbrock>(d), d, std::move(bt),
                         fmt::format("built-in Rosenbrock density, ndim {}", d));
}

MadeTarget make_funnel(const io::Settings& st) {
  const int d = builtin_ndim(st, "funnel");
  auto bt = std::make_shared<BatchedTarget>();
  bt->kind = BatchedTarget::Kind::kFunnel;
  bt->funnel = FunnelLogDensity{d};
  return analytic_target(std::make_shared<NealFunnel>(d), d, std::move(bt),
                         fmt::format("built-in Neal's funnel, ndim {}", d));
}

MadeTarget make_mixture(const io::Settings& st) {
  const int d = builtin_ndim(st, "mixture");
  if (!st.has("target.weights") || !st.has("target.means") || !st.has("target.sigmas"))
    throw InputError(
        fmt::format("{}: target.builtin is \"mixture\", but target.weights, target.means and "
                    "target.sigmas are not all given",
                    st.origin("target.builtin")));
  std::shared_ptr<GaussianMixture> g;
  try {
    g = std::make_shared<GaussianMixture>(st.get_float_list("target.weights"), st.get_float_list("target.means"),
                                          st.get_float_list("target.sigmas"), d);
  } catch (const Error& e) {
    throw InputError(fmt::format("{}: target.weights/means/sigmas: {}", st.origin("target.means"), e.what()));
  }
  return analytic_target(g, d, nullptr, fmt::format("built-in Gaussian mixture, ndim {}", d));
}

/// The target keys an entry may read (Entry::reads), besides the family keys, in
/// declare_keys' order.
const std::vector<std::string> kReadableKeys = {"target.symbol", "target.thread_safe", "target.ndim", "target.mean",
                                                "target.cov",    "target.rho",         "target.b",    "target.weights",
                                                "target.means",  "target.sigmas",      "data.file",   "data.group"};

/// Refuses the keys of `unread` that the input sets, in one line naming them all: a key that
/// the chosen target (`chosen`, which reads `reads`) does not read would otherwise be ignored.
void refuse_unread_keys(const io::Settings& st, const std::vector<std::string>& unread, const std::string& chosen,
                        const std::vector<std::string>& reads) {
  std::vector<std::string> set;
  for (const std::string& k : unread)
    if (st.is_set(k)) set.push_back(k);
  std::string read_list;
  for (const std::string& k : reads) read_list += (read_list.empty() ? "" : ", ") + k;
  st.refuse_unread(set, fmt::format("{} does not read it ({})", chosen,
                                    read_list.empty() ? "it reads no other target key" : "it reads " + read_list));
}

}  // namespace

TargetRegistry& TargetRegistry::global() {
  static TargetRegistry* r = [] {
    auto* g = new TargetRegistry();  // never destroyed: used until exit
    register_builtin_targets(*g);
    return g;
  }();
  return *r;
}

void TargetRegistry::add(Entry e) {
  const std::lock_guard<std::mutex> lock(mu_);
  for (auto& x : entries_)
    if (x.family == e.family && x.name == e.name) {
      x = std::move(e);
      return;
    }
  entries_.push_back(std::move(e));
}

std::vector<std::string> TargetRegistry::names(Family family, bool with_aliases) const {
  const std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> v;
  for (const auto& e : entries_)
    if (e.family == family) v.push_back(e.name);
  if (with_aliases)
    for (const auto& e : entries_)
      if (e.family == family) v.insert(v.end(), e.aliases.begin(), e.aliases.end());
  return v;
}

TargetRegistry::Entry TargetRegistry::find(Family family, const std::string& name) const {
  {
    const std::lock_guard<std::mutex> lock(mu_);
    for (const auto& e : entries_)
      if (e.family == family &&
          (e.name == name || std::find(e.aliases.begin(), e.aliases.end(), name) != e.aliases.end()))
        return e;
  }
  const std::vector<std::string> known = names(family, true);
  throw InputError(fmt::format("key \"{}\" is \"{}\", but {}", family_key(family), name,
                               known.empty() ? std::string("this program registers no such targets (herd-sample has "
                                                           "the posteriordb models)")
                                             : "must be one of " + quoted(known)));
}

void TargetRegistry::declare_keys(io::Schema& s) const {
  using std::nullopt;
  std::string models;
  for (const auto& n : names(Family::kModel)) models += (models.empty() ? "" : ", ") + n;
  s.add_string("target.model", nullopt, "posteriordb example model: " + (models.empty() ? "none registered" : models))
      .choices(names(Family::kModel, true));
  s.add_string("target.library", nullopt,
               "shared library (plugin) with a ParaMonte C log density double f(int32_t ndim, double point[]); a "
               "relative path is relative to the input file's folder (to the working directory under --set)");
  s.add_string("target.symbol", "getLogFunc", "symbol of the plugin's log density");
  s.add_bool("target.thread_safe", false, "the plugin's log density may be called from several threads at once");
  s.add_string("target.builtin", nullopt, "built-in analytic target").choices(names(Family::kBuiltin));
  s.add_int("target.ndim", nullopt, "dimension of a built-in target or a plugin's log density").range(1, 2147483647);
  s.add_float_list("target.mean", nullopt, "mean of the normal target [ndim] (default 0)").finite();
  s.add_float_list("target.cov", nullopt, "covariance of the normal target [ndim, ndim] row-major").finite();
  s.add_float("target.rho", 0.0, "AR(1) correlation rho^|i-j| of the normal target when no cov is given")
      .range(-0.999999, 0.999999);
  s.add_float("target.b", 0.03, "curvature of the banana target").finite();
  s.add_float_list("target.weights", nullopt, "mixture weights [K]").finite();
  s.add_float_list("target.means", nullopt, "mixture means [K, ndim] row-major").finite();
  s.add_float_list("target.sigmas", nullopt, "mixture standard deviations [K]").finite();
  s.add_string("data.file", nullopt,
               "JSON or HDF5 file with the model's data (replaces the embedded data); a relative path is relative to "
               "the input file's folder (to the working directory under --set)");
  s.add_string("data.group", "/", "HDF5 group whose numeric datasets are the data (HDF5 data files)");
}

bool TargetRegistry::chooses_target(const io::Settings& st) {
  return st.has("target.model") || st.has("target.builtin") || st.has("target.library");
}

MadeTarget TargetRegistry::make(const io::Settings& st, const std::string& default_model) const {
  const bool has_model = st.has("target.model"), has_builtin = st.has("target.builtin"),
             has_library = st.has("target.library");
  if (int(has_model) + int(has_builtin) + int(has_library) > 1) {
    std::string given;
    for (const char* k : {"target.model", "target.builtin", "target.library"})
      if (st.has(k)) given += (given.empty() ? "" : ", ") + std::string(k);
    throw InputError(
        fmt::format("{}: target.model, target.builtin and target.library are exclusive, but more than one "
                    "is given ({})",
                    st.origin(has_library ? "target.library" : "target.builtin"), given));
  }
  Entry e;
  std::string chosen;
  if (has_library) {
    e = find(Family::kPlugin, "plugin");
    chosen = fmt::format("target.library = \"{}\"", st.get_string("target.library"));
  } else if (has_builtin) {
    e = find(Family::kBuiltin, st.get_string("target.builtin"));
    chosen = fmt::format("target.builtin = \"{}\"", st.get_string("target.builtin"));
  } else {
    if (!has_model && default_model.empty())
      throw InputError(
          "no target is given: set target.builtin, target.model or target.library (or pass a log function)");
    const std::string name = has_model ? st.get_string("target.model") : default_model;
    try {
      e = find(Family::kModel, name);
    } catch (const InputError& err) {
      if (!has_model) throw;
      const std::string m = err.what();
      throw InputError(m.rfind("key ", 0) == 0 ? fmt::format("{}: {}", st.origin("target.model"), m) : m);
    }
    chosen = fmt::format("target.model = \"{}\"{}", name, has_model ? "" : " (the default target)");
  }
  std::vector<std::string> unread;
  if (e.reads)
    for (const std::string& k : kReadableKeys)
      if (std::find(e.reads->begin(), e.reads->end(), k) == e.reads->end()) unread.push_back(k);
  if (e.reads) refuse_unread_keys(st, unread, chosen, *e.reads);
  MadeTarget made = e.make(st);
  made.chosen_by = chosen;
  for (auto it = unread.rbegin(); it != unread.rend(); ++it)
    made.unread_keys.emplace(made.unread_keys.begin(), *it, "not read by " + chosen);
  return made;
}

void register_builtin_targets(TargetRegistry& r) {
  using F = TargetRegistry::Family;
  using Keys = std::vector<std::string>;
  r.add({"normal",
         F::kBuiltin,
         "multivariate normal (target.mean, target.cov or target.rho)",
         {},
         make_normal,
         Keys{"target.ndim", "target.mean", "target.cov", "target.rho"}});
  r.add({"banana",
         F::kBuiltin,
         "banana (Haario et al. 1999; target.b)",
         {},
         make_banana,
         Keys{"target.ndim", "target.b"}});
  r.add({"rosenbrock", F::kBuiltin, "Rosenbrock density", {}, make_rosenbrock, Keys{"target.ndim"}});
  r.add({"mixture",
         F::kBuiltin,
         "Gaussian mixture (target.weights, target.means, target.sigmas)",
         {},
         make_mixture,
         Keys{"target.ndim", "target.weights", "target.means", "target.sigmas"}});
  r.add({"funnel", F::kBuiltin, "Neal's funnel", {}, make_funnel, Keys{"target.ndim"}});
  r.add({"plugin",
         F::kPlugin,
         "shared library with a ParaMonte-signature log density",
         {},
         make_plugin,
         Keys{"target.ndim", "target.symbol", "target.thread_safe"}});
}

}  // namespace herd::mcmc

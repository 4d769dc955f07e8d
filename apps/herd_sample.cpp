// herd-sample: ParaDRAM-style DRAM sampling from a TOML or ParaMonte namelist input file.
//
//   herd-sample [FILE] [--set key=value]... [--output PREFIX] [--seed N] [--quiet]
//
// Without FILE it runs its embedded default input (a posteriordb model). Exit codes: 0 on
// success (or when the run recorded in <prefix>_restart/ is already complete), 2 for bad
// input (nothing is written), 1 when the run fails. Under `mpiexec -n N` (MPICH) it runs
// the parallelization_model over N processes; rerunning an interrupted run resumes it
// from its last checkpoint (docs/parallel.md).
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "herd/core/config.hpp"
#include "herd/core/error.hpp"
#include "herd/core/log.hpp"
#include "herd/core/memory.hpp"
#include "herd/core/mpi_communicator.hpp"
#include "herd/examples/posteriordb.hpp"
#include "herd/io/config.hpp"
#include "herd/io/data_set.hpp"
#include "herd/io/hdf5.hpp"
#include "herd/io/schema.hpp"
#include "herd/io/toml_reader.hpp"
#include "herd/mcmc/parallel.hpp"
#include "herd/mcmc/paradram_run.hpp"
#include "herd/mcmc/plugin.hpp"
#include "herd/mcmc/sampler_specs.hpp"
#include "herd/mcmc/targets.hpp"
#include "herd/mcmc/run/batched_sample.hpp"

namespace {

/// The embedded default input: the README's first quick-start command runs exactly this.
constexpr const char* kDefaultInput = R"toml(# herd-sample's embedded default input.
description = "posteriordb kidiq-kidscore_interaction: linear regression with an interaction term"
chain_size = 20000
random_seed = 20261129
output_prefix = "out/kidscore_interaction"
overwrite = true
)toml";

/// The embedded default's target, left out when `--set target.*` chooses another.
constexpr const char* kDefaultTarget = R"toml(# Start at the least-squares fit (beta[1..4], log sigma),
# with proposal scales of the order of the posterior's; the proposal covariance then adapts.
start_point = [-11.48, 51.27, 0.969, -0.484, 2.884]
proposal_std = [1.0, 1.0, 0.01, 0.01, 0.01]

[target]
model = "kidscore_interaction"
)toml";

void declare_target_keys(herd::io::Schema& s) {
  using std::nullopt;
  s.add_string("target.model", nullopt, "posteriordb example model: " + [] {
    std::string v;
    for (const auto& n : herd::examples::model_names()) v += (v.empty() ? "" : ", ") + n;
    return v;
  }()).choices([] {
    auto v = herd::examples::model_names();
    for (const auto& n : herd::examples::model_names()) v.push_back(herd::examples::make_model(n)->posteriordb_name());
    return v;
  }());
  s.add_string("target.library", nullopt,
               "shared library (plugin) with a ParaMonte C log density double f(int32_t ndim, double point[]); a "
               "relative path is relative to the input file's folder (to the working directory under --set)");
  s.add_string("target.symbol", "getLogFunc", "symbol of the plugin's log density");
  s.add_bool("target.thread_safe", false, "the plugin's log density may be called from several threads at once");
  s.add_string("target.builtin", nullopt, "built-in analytic target").choices({"normal", "banana", "rosenbrock", "mixture", "funnel"});
  s.add_int("target.ndim", nullopt, "dimension of a built-in target").range(1, 2147483647);
  s.add_float_list("target.mean", nullopt, "mean of the normal target [ndim] (default 0)").finite();
  s.add_float_list("target.cov", nullopt, "covariance of the normal target [ndim, ndim] row-major").finite();
  s.add_float("target.rho", 0.0, "AR(1) correlation rho^|i-j| of the normal target when no cov is given").range(-0.999999, 0.999999);
  s.add_float("target.b", 0.03, "curvature of the banana target").finite();
  s.add_float_list("target.weights", nullopt, "mixture weights [K]").finite();
  s.add_float_list("target.means", nullopt, "mixture means [K, ndim] row-major").finite();
  s.add_float_list("target.sigmas", nullopt, "mixture standard deviations [K]").finite();
  s.add_string("data.file", nullopt, "JSON or HDF5 file with the model's data (replaces the embedded data)");
  s.add_string("data.group", "/", "HDF5 group whose numeric datasets are the data (HDF5 data files)");
}

/// Model data from a JSON file, or from the numeric datasets of an HDF5 group, as the JSON
/// object the posteriordb models take. @throws herd::InputError naming the file.
nlohmann::json load_model_data(const std::string& path, const std::string& group, const std::string& origin) {
  using herd::InputError;
  try {
    const herd::io::DataSet ds = herd::io::H5File::is_hdf5(path) ? herd::io::read_h5_data(path, group)
                                                                 : herd::io::read_json_data(path);
    nlohmann::json j = nlohmann::json::object();
    for (const auto& name : ds.names()) {
      const herd::io::DataArray& a = ds.at(name);
      if (a.shape.empty()) {
        if (a.integer) j[name] = static_cast<std::int64_t>(a.values[0]);
        else j[name] = a.values[0];
      } else {
        // Nested arrays of the array's own shape (row-major), so that a model rejects a
        // [3, 1] matrix where it needs a vector instead of reading it flattened.
        std::size_t next = 0;
        auto nest = [&](auto&& self, std::size_t depth) -> nlohmann::json {
          nlohmann::json v = nlohmann::json::array();
          for (std::size_t i = 0; i < a.shape[depth]; ++i) {
            if (depth + 1 < a.shape.size()) {
              v.push_back(self(self, depth + 1));
            } else {
              const double x = a.values[next++];
              if (a.integer) v.push_back(static_cast<std::int64_t>(x));
              else v.push_back(x);
            }
          }
          return v;
        };
        j[name] = nest(nest, 0);
      }
    }
    return j;
  } catch (const herd::Error& e) {
    throw InputError(fmt::format("{}: data.file \"{}\": {}", origin, path, e.what()));
  }
}

/// The plugin library's path: a relative path written in an input file is relative to that
/// file's folder (as a path in a Makefile or CMakeLists.txt is), so that a run does not
/// depend on the working directory; one given with --set (or absolute) is used as is.
std::string plugin_path(const herd::io::Settings& st) {
  namespace fs = std::filesystem;
  const std::string lib = st.get_string("target.library");
  const std::string& from = st.value("target.library").where.file;
  if (lib.empty() || fs::path(lib).is_absolute() || from.empty() || from.rfind("--set", 0) == 0 || from.front() == '(')
    return lib;
  return (fs::path(from).parent_path() / lib).lexically_normal().string();
}

/// Builds the target from resolved settings; `batched` receives the device-callable form of
/// a built-in target (all but the mixture), else stays null. @throws herd::InputError
/// A plugin (target.library) is not loaded here: `load` receives the function that loads it,
/// which `run_sampler_program` calls once the output prefix is locked and its outputs are
/// checked (loading a library runs its code).
herd::mcmc::SampleTarget make_target(const herd::io::Settings& st, std::shared_ptr<const herd::mcmc::BatchedTarget>& batched,
                                     std::function<void()>& load) {
  using herd::InputError;
  herd::mcmc::SampleTarget t;
  const bool has_model = st.has("target.model"), has_builtin = st.has("target.builtin"),
             has_library = st.has("target.library");
  if (int(has_model) + int(has_builtin) + int(has_library) > 1)
    throw InputError(fmt::format("{}: target.model, target.builtin and target.library are exclusive, but more than one "
                                 "is given ({})",
                                 st.origin(has_library ? "target.library" : "target.builtin"), [&] {
                                   std::string given;
                                   for (const char* k : {"target.model", "target.builtin", "target.library"})
                                     if (st.has(k)) given += (given.empty() ? "" : ", ") + std::string(k);
                                   return given;
                                 }()));
  if (has_library) {
    if (!st.has("target.ndim"))
      throw InputError(fmt::format("{}: target.library is given, but target.ndim is not", st.origin("target.library")));
    auto plugin = std::make_shared<std::shared_ptr<herd::mcmc::PluginLogDensity>>();
    const std::string library = plugin_path(st);
    load = [plugin, library, symbol = st.get_string("target.symbol"), origin = st.origin("target.library"),
            written = st.get_string("target.library")] {
      try {
        *plugin = std::make_shared<herd::mcmc::PluginLogDensity>(library, symbol);
      } catch (const herd::InputError& e) {
        throw InputError(fmt::format("{}: target.library \"{}\" (target.symbol \"{}\"): {}", origin, written, symbol,
                                     e.what()));
      }
    };
    t.ndim = static_cast<int>(st.get_int("target.ndim"));
    t.log_density = [plugin](const double* x, int n) { return (**plugin)(x, n); };
    t.thread_safe = st.get_bool("target.thread_safe");
    t.description = fmt::format("plugin {} ({})", st.get_string("target.symbol"), library);
    return t;
  }
  if (!has_builtin) {
    const std::string name = has_model ? st.get_string("target.model") : std::string("kidscore_interaction");
    std::shared_ptr<herd::examples::PosteriorModel> m;
    if (st.has("data.file")) {
      const std::string path = st.get_string("data.file");
      const nlohmann::json data = load_model_data(path, st.get_string("data.group"), st.origin("data.file"));
      try {
        m = herd::examples::make_model(name, data);
      } catch (const herd::InputError& e) {
        throw InputError(fmt::format("{}: data.file \"{}\": {}", st.origin("data.file"), path, e.what()));
      }
    } else {
      m = herd::examples::make_model(name);
    }
    t.ndim = m->dim();
    t.log_density = [m](const double* x, int) { return m->log_density(x); };
    t.thread_safe = true;
    t.names = m->coordinate_names();
    t.quantity_names = m->quantity_names();
    t.quantities = [m](const double* x, double* q) { m->quantities(x, q); };
    t.description = fmt::format("posteriordb model {} ({})", m->name(), m->posteriordb_name());
    return t;
  }
  const std::string kind = st.get_string("target.builtin");
  if (!st.has("target.ndim") && kind != "normal")
    throw InputError(fmt::format("{}: target.builtin is \"{}\", but target.ndim is not given (an integer >= 1)",
                                 st.origin("target.builtin"), kind));
  int d = st.has("target.ndim") ? static_cast<int>(st.get_int("target.ndim")) : 0;
  if (kind == "normal") {
    std::vector<double> mean = st.has("target.mean") ? st.get_float_list("target.mean") : std::vector<double>{};
    if (d == 0) d = static_cast<int>(mean.size());
    if (d == 0)
      throw InputError(fmt::format("{}: target.builtin is \"normal\", but neither target.ndim nor target.mean is given",
                                   st.origin("target.builtin")));
    // The covariance and its factors are ndim x ndim: checked before they are allocated.
    std::uint64_t max_memory = 0;
    try {
      max_memory = herd::parse_memory_size(st.get_string("max_memory"));
    } catch (const herd::InputError&) {
      // reported, naming the key, when the sampler's specifications are resolved
    }
    herd::check_memory_need(4.0 * d * d * 8.0, max_memory,
                            fmt::format("the normal target's covariance (target.ndim {} x {})", d, d),
                            "lower target.ndim");
    if (mean.empty()) mean.assign(static_cast<std::size_t>(d), 0.0);
    if (static_cast<int>(mean.size()) != d)
      throw InputError(fmt::format("{}: target.mean has {} values, but target.ndim is {}", st.origin("target.mean"), mean.size(), d));
    Eigen::MatrixXd cov(d, d);
    if (st.has("target.cov")) {
      const auto c = st.get_float_list("target.cov");
      const std::size_t dd = static_cast<std::size_t>(d) * static_cast<std::size_t>(d);
      if (c.size() != dd)
        throw InputError(fmt::format("{}: target.cov has {} values, but must have {} (ndim x ndim)", st.origin("target.cov"), c.size(), dd));
      for (int i = 0; i < d; ++i)
        for (int j = 0; j < d; ++j) cov(i, j) = c[static_cast<std::size_t>(i) * static_cast<std::size_t>(d) + static_cast<std::size_t>(j)];
    } else {
      const double rho = st.get_float("target.rho");
      for (int i = 0; i < d; ++i)
        for (int j = 0; j < d; ++j) cov(i, j) = std::pow(rho, std::abs(i - j));
    }
    std::shared_ptr<herd::mcmc::MultivariateNormal> mvn;
    try {
      mvn = std::make_shared<herd::mcmc::MultivariateNormal>(Eigen::Map<Eigen::VectorXd>(mean.data(), d), cov);
    } catch (const herd::Error& e) {
      const char* key = st.has("target.cov") ? "target.cov" : "target.rho";
      throw InputError(fmt::format("{}: {}: {}", st.origin(key), key, e.what()));
    }
    t.log_density = [mvn](const double* x, int n) { return (*mvn)(x, n); };
    std::vector<double> cv(static_cast<std::size_t>(d) * static_cast<std::size_t>(d));
    for (int i = 0; i < d; ++i)
      for (int j = 0; j < d; ++j) cv[static_cast<std::size_t>(i) * static_cast<std::size_t>(d) + static_cast<std::size_t>(j)] = cov(i, j);
    batched = std::make_shared<herd::mcmc::BatchedTarget>(
        herd::mcmc::BatchedTarget::gaussian_target(std::make_shared<herd::mcmc::GaussianTarget>(mean, cv)));
    t.description = fmt::format("built-in multivariate normal, ndim {}", d);
  } else if (kind == "banana") {
    auto b = std::make_shared<herd::mcmc::Banana>(d, st.get_float("target.b"));
    t.log_density = [b](const double* x, int n) { return (*b)(x, n); };
    auto bt = std::make_shared<herd::mcmc::BatchedTarget>();
    bt->kind = herd::mcmc::BatchedTarget::Kind::kBanana;
    bt->banana = herd::mcmc::BananaLogDensity{d, st.get_float("target.b")};
    batched = bt;
    t.description = fmt::format("built-in banana (Haario et al. 1999), ndim {}", d);
  } else if (kind == "rosenbrock") {
    auto r = std::make_shared<herd::mcmc::Rosenbrock>(d);
    t.log_density = [r](const double* x, int n) { return (*r)(x, n); };
    auto bt = std::make_shared<herd::mcmc::BatchedTarget>();
    bt->kind = herd::mcmc::BatchedTarget::Kind::kRosenbrock;
    bt->rosenbrock = herd::mcmc::RosenbrockLogDensity{d};
    batched = bt;
    t.description = fmt::format("built-in Rosenbrock density, ndim {}", d);
  } else if (kind == "funnel") {
    auto f = std::make_shared<herd::mcmc::NealFunnel>(d);
    t.log_density = [f](const double* x, int n) { return (*f)(x, n); };
    auto bt = std::make_shared<herd::mcmc::BatchedTarget>();
    bt->kind = herd::mcmc::BatchedTarget::Kind::kFunnel;
    bt->funnel = herd::mcmc::FunnelLogDensity{d};
    batched = bt;
    t.description = fmt::format("built-in Neal's funnel, ndim {}", d);
  } else {  // mixture
    if (!st.has("target.weights") || !st.has("target.means") || !st.has("target.sigmas"))
      throw InputError(fmt::format("{}: target.builtin is \"mixture\", but target.weights, target.means and "
                                   "target.sigmas are not all given",
                                   st.origin("target.builtin")));
    std::shared_ptr<herd::mcmc::GaussianMixture> g;
    try {
      g = std::make_shared<herd::mcmc::GaussianMixture>(st.get_float_list("target.weights"), st.get_float_list("target.means"),
                                                        st.get_float_list("target.sigmas"), d);
    } catch (const herd::Error& e) {
      throw InputError(fmt::format("{}: target.weights/means/sigmas: {}", st.origin("target.means"), e.what()));
    }
    t.log_density = [g](const double* x, int n) { return (*g)(x, n); };
    t.description = fmt::format("built-in Gaussian mixture, ndim {}", d);
  }
  t.ndim = d;
  t.thread_safe = true;
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"herd-sample: delayed-rejection adaptive Metropolis (DRAM) sampling, ParaDRAM-compatible"};
  std::string file;
  std::vector<std::string> sets;
  std::string output;
  std::string seed;
  bool quiet = false;
  bool help_keys = false;
  app.set_version_flag("--version", std::string("herd-sample (herd) ") + HERD_VERSION_STRING);
  app.add_flag("--help-keys", help_keys,
               "list every input key (TOML name, ParaMonte aliases) with its type, default and meaning, and exit");
  app.add_option("file", file, "input file: TOML, or a ParaMonte &ParaDRAM namelist (default: the embedded default input)");
  app.add_option("--set", sets, "override a specification: key=value (repeatable)");
  app.add_option("--output", output, "output prefix (overrides output_prefix)");
  app.add_option("--seed", seed, "random seed (overrides random_seed): an integer in [0, 2^63 - 1] (9223372036854775807); larger values are refused");
  app.add_flag("--quiet", quiet, "print nothing but errors");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // One line in the herd form (CLI11's own text is two lines without the program name).
    std::fprintf(stderr, "herd-sample: error: %s (run herd-sample --help for the options)\n", e.what());
    return 2;
  }
  if (help_keys) {
    herd::io::Schema schema("herd-sample");
    herd::mcmc::declare_sampler_specs(schema);
    declare_target_keys(schema);
    std::fputs("herd-sample input keys (TOML; a ParaMonte namelist may use the names in \"also\", in any case):\n\n",
               stdout);
    std::fputs(schema.help().c_str(), stdout);
    return 0;
  }
  // Seeds are checked here rather than by CLI11 (whose range message prints the limits of a
  // double) or the schema (which reads 2^63 as a float): the range is TOML's integers,
  // [0, 2^63-1], for --seed, --set random_seed and the input file alike; nothing is clamped.
  auto seed_ok = [](const std::string& text) {
    long long v = -1;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    return ec == std::errc() && end == text.data() + text.size() && v >= 0;
  };
  if (!seed.empty() && !seed_ok(seed)) {
    std::fprintf(stderr, "herd-sample: error: --seed is \"%s\", but must be an integer in [0, 9223372036854775807]\n",
                 seed.c_str());
    return 2;
  }
  for (const auto& kv : sets) {
    const std::size_t eq = kv.find('=');
    if (eq == std::string::npos) continue;
    const std::string key = kv.substr(0, eq);
    std::string value = kv.substr(eq + 1);
    while (!value.empty() && value.back() == ' ') value.pop_back();
    while (!value.empty() && value.front() == ' ') value.erase(0, 1);
    if ((key == "random_seed" || key == "randomSeed" || key == "outputSeed") && !seed_ok(value)) {
      std::fprintf(stderr,
                   "herd-sample: error: --set %s: key \"%s\" is \"%s\", but must be an integer in [0, "
                   "9223372036854775807]\n",
                   kv.c_str(), key.c_str(), value.c_str());
      return 2;
    }
  }

  // Under `mpiexec -n N` (MPICH) the ranks run the model's parallel form (multi_chain, or
  // fork-join for single_chain); without a launcher, one process (no MPI initialisation).
  int rc = 0;
  {
    std::unique_ptr<herd::Communicator> comm;
    try {
      comm = herd::make_world_communicator();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "herd-sample: error: %s\n", e.what());
      return 1;
    }
    auto resolve = [&]() {
      herd::mcmc::SamplerProgramInput in;
      std::vector<std::string> all_sets = sets;
      bool sets_target = false;
      for (const auto& kv : all_sets) sets_target = sets_target || kv.rfind("target.", 0) == 0;
      herd::io::Config config =
          file.empty() ? herd::io::parse_toml(std::string(kDefaultInput) + (sets_target ? "" : kDefaultTarget),
                                              "(embedded default input)")
                       : herd::io::read_config(file, "ParaDRAM");
      if (!output.empty()) all_sets.push_back("output_prefix=" + output);
      if (!seed.empty()) all_sets.push_back("random_seed=" + seed);
      herd::io::Schema schema("herd-sample");
      herd::mcmc::declare_sampler_specs(schema);
      declare_target_keys(schema);
      const herd::io::Settings settings = schema.apply(config, all_sets);
      std::shared_ptr<const herd::mcmc::BatchedTarget> batched;
      in.target = make_target(settings, batched, in.load_target);
      in.specs = herd::mcmc::resolve_sampler_specs(settings, in.target.ndim, in.target.names);
      in.target.log_density = herd::mcmc::restrict_to_domain(in.specs, in.target.ndim, std::move(in.target.log_density));
      // Before anything is allocated: every size, and the memory the run holds.
      herd::mcmc::check_sampler_memory(in.specs, in.target.ndim, comm->size());
      // device = "cpu_batched" | "cuda": the batched run, with its own restart record.
      herd::mcmc::use_batched_run(in, batched, *comm);
      in.seed_given = settings.has("random_seed");
      // Validate the kernel options before anything is written.
      auto probe = [options = herd::mcmc::to_dram_options(in.specs, in.target.ndim),
                    origin = file.empty() ? std::string("(embedded default input)") : file](
                       const herd::mcmc::PointLogDensity& f) {
        try {
          herd::mcmc::DramSampler probe(options, f);
        } catch (const herd::InputError& e) {
          // What the specifications' checks leave to the kernel (e.g. a start point outside
          // the target's support): name the input.
          throw herd::InputError(fmt::format("{}: {}", origin, e.what()));
        }
      };
      if (in.load_target) {
        // A plugin is loaded later (after the output checks): the options now, with a flat
        // density; the start point against the plugin's density once it is loaded.
        probe([](const double*, int) { return 0.0; });
        in.load_target = [load = in.load_target, probe, f = in.target.log_density] {
          load();
          probe(f);
        };
      } else {
        probe(in.target.log_density);
      }
      in.options.quiet = quiet;
      in.options.resolved_input = settings.describe();
      in.options.input_source = file.empty() ? "(embedded default input)" : file;
      for (const auto& key : schema.keys()) {
        if (settings.has(key.name()))
          in.options.input_attributes.emplace_back(key.name(), settings.value(key.name()).to_string());
      }
      in.banner = in.specs.device != "cpu"
                      ? fmt::format("herd-sample: {}, {} variables, device {}, {} x {} chains, warmup {}, chain_size {}, "
                                    "thin {}, seed {}", in.target.description, in.target.ndim, in.specs.device,
                                    comm->size(), in.specs.chains_per_rank, in.specs.warmup, in.specs.chain_size,
                                    in.specs.thin, in.specs.random_seed)
                      : fmt::format("herd-sample: {}, {} variables, chain_size {}, seed {}{}", in.target.description,
                              in.target.ndim, in.specs.chain_size, in.specs.random_seed,
                              comm->size() > 1 ? fmt::format(", {} on {} processes", in.specs.parallelization_model,
                                                             comm->size())
                                               : std::string());
      return in;
    };
    // --output and --seed travel as --set overrides; a message about them names the option
    // the user typed.
    auto resolve_named = [&]() {
      try {
        return resolve();
      } catch (const herd::InputError& e) {
        std::string m = e.what();
        const std::string from = "--set output_prefix=" + output;
        if (!output.empty() && m.rfind(from, 0) == 0) m = "--output " + output + m.substr(from.size());
        const std::string seed_from = "--set random_seed=" + seed;
        if (!seed.empty() && m.rfind(seed_from, 0) == 0) m = "--seed " + seed + m.substr(seed_from.size());
        throw herd::InputError(m);
      }
    };
    rc = herd::mcmc::run_sampler_program(*comm, resolve_named, "herd-sample");
  }  // the communicator goes before MPI is finalised (at exit)
  return rc;
}

// The sampler's target registry (herd/mcmc/run/target_registry.hpp) with the posteriordb
// models registered: every registered name (built-in targets, models and their posteriordb
// names, the plugin loader) resolves through the registry, through the C API on the serial
// kernel, and through the C API on the batched device; an unknown name is one line listing
// the known ones. (herd-sample resolves its targets through the same `TargetRegistry::make`.)
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "herd/core/error.hpp"
#include "herd/examples/model_targets.hpp"
#include "herd/io/schema.hpp"
#include "herd/io/toml_reader.hpp"
#include "herd/mcmc/paradram.h"
#include "herd/mcmc/run/target_registry.hpp"
#include "herd/mcmc/sampler_specs.hpp"

namespace fs = std::filesystem;
using herd::mcmc::TargetRegistry;

namespace {

TargetRegistry& registry() {
  static const bool once = [] {
    herd::examples::register_models(TargetRegistry::global());
    return true;
  }();
  (void)once;
  return TargetRegistry::global();
}

/// The `[target]` table of the registered name `name` of `family` (with what it needs).
std::string target_table(TargetRegistry::Family family, const std::string& name) {
  using F = TargetRegistry::Family;
  if (family == F::kModel) return "[target]\nmodel = \"" + name + "\"\n";
  if (family == F::kPlugin) return std::string("[target]\nlibrary = \"") + HERD_TEST_PLUGIN_PATH + "\"\nndim = 2\n";
  std::string t = "[target]\nbuiltin = \"" + name + "\"\nndim = 2\n";
  if (name == "mixture") t += "weights = [0.5, 0.5]\nmeans = [-1.0, 0.0, 1.0, 0.0]\nsigmas = [1.0, 1.0]\n";
  return t;
}

/// Every registered (family, name), aliases included.
std::vector<std::pair<TargetRegistry::Family, std::string>> every_name() {
  std::vector<std::pair<TargetRegistry::Family, std::string>> v;
  for (auto f : {TargetRegistry::Family::kBuiltin, TargetRegistry::Family::kModel, TargetRegistry::Family::kPlugin})
    for (const auto& n : registry().names(f, true)) v.emplace_back(f, n);
  return v;
}

herd::io::Settings settings_of(const std::string& text) {
  herd::io::Schema schema("test");
  herd::mcmc::declare_sampler_specs(schema);
  registry().declare_keys(schema);
  return schema.apply(herd::io::parse_toml(text, "(test input)"));
}

}  // namespace

TEST_CASE("target registry: every registered name resolves to a target with a finite log density", "[mcmc]") {
  const auto names = every_name();
  REQUIRE(names.size() == 5 + 2 * 6 + 1);  // built-ins, models with their posteriordb names, plugin
  for (const auto& [family, name] : names) {
    INFO(name);
    herd::mcmc::MadeTarget made = registry().make(settings_of(target_table(family, name)));
    REQUIRE(made.target.ndim >= 1);
    if (made.load) made.load();  // the plugin
    std::vector<double> x(static_cast<std::size_t>(made.target.ndim), 0.1);
    CHECK(std::isfinite(made.target.log_density(x.data(), made.target.ndim)));
    // The analytic targets but the mixture have a device-callable form (device = "cuda").
    const bool device = family == TargetRegistry::Family::kBuiltin && name != "mixture";
    CHECK((made.batched != nullptr) == device);
  }
}

TEST_CASE("target registry: an unknown name is one line listing the known ones", "[mcmc]") {
  try {
    registry().find(TargetRegistry::Family::kBuiltin, "norml");
    FAIL("no error");
  } catch (const herd::InputError& e) {
    const std::string m = e.what();
    CHECK(m ==
          "key \"target.builtin\" is \"norml\", but must be one of \"normal\", \"banana\", \"rosenbrock\", "
          "\"mixture\", \"funnel\"");
  }
  try {
    registry().find(TargetRegistry::Family::kModel, "eight_school");
    FAIL("no error");
  } catch (const herd::InputError& e) {
    const std::string m = e.what();
    CHECK(m.find('\n') == std::string::npos);
    CHECK(m.find("\"eight_schools_noncentered\"") != std::string::npos);
    CHECK(m.find("\"kidiq-kidscore_interaction\"") != std::string::npos);
  }
  // A registry without models says so, in one line.
  TargetRegistry bare;
  herd::mcmc::register_builtin_targets(bare);
  CHECK_THROWS_WITH(bare.find(TargetRegistry::Family::kModel, "arK"),
                    Catch::Contains("key \"target.model\" is \"arK\", but this program registers no such targets"));
}

TEST_CASE("target registry: the keys a target does not read are named, and refused when set", "[mcmc]") {
  using Keys = std::vector<std::string>;
  // Built-ins and models: what chose them and every target key they leave unread.
  herd::mcmc::MadeTarget banana = registry().make(settings_of("[target]\nbuiltin = \"banana\"\nndim = 2\nb = 0.1\n"));
  CHECK(banana.chosen_by == "target.builtin = \"banana\"");
  const auto names = [](const herd::mcmc::MadeTarget& m) {
    Keys v;
    for (const auto& [k, why] : m.unread_keys) v.push_back(k);
    return v;
  };
  CHECK(names(banana) == Keys{"target.symbol", "target.thread_safe", "target.mean", "target.cov", "target.rho",
                              "target.weights", "target.means", "target.sigmas", "data.file", "data.group"});
  CHECK(banana.unread_keys[0].second == "not read by target.builtin = \"banana\"");
  herd::mcmc::MadeTarget model = registry().make(settings_of("[target]\nmodel = \"arK\"\n"));
  CHECK(model.chosen_by == "target.model = \"arK\"");
  CHECK(model.unread_keys.size() == 10);  // every target.* key but model's own
  CHECK(names(model) == Keys{"target.symbol", "target.thread_safe", "target.ndim", "target.mean", "target.cov",
                             "target.rho", "target.b", "target.weights", "target.means", "target.sigmas"});
  // herd-sample's default model says that it is the default.
  CHECK(registry().make(settings_of(""), "arK").chosen_by == "target.model = \"arK\" (the default target)");
  // The normal's covariance given: its AR(1) correlation is not read either.
  herd::mcmc::MadeTarget cov =
      registry().make(settings_of("[target]\nbuiltin = \"normal\"\ncov = [1.0, 0.0, 0.0, 1.0]\nndim = 2\n"));
  const Keys cov_unread = names(cov);
  REQUIRE(std::count(cov_unread.begin(), cov_unread.end(), "target.rho") == 1);
  CHECK(cov.unread_keys.back() ==
        std::pair<std::string, std::string>{"target.rho", "target.cov is given and replaces it"});
  // Set, an unread key is refused in one line naming the first and the others (declaration
  // order), each with its origin.
  CHECK_THROWS_WITH(
      registry().make(settings_of("[target]\nbuiltin = \"rosenbrock\"\nndim = 2\nb = 1.0\nsymbol = \"f\"\n")),
      "(test input):5: key \"target.symbol\" is set, but target.builtin = \"rosenbrock\" does not read it (it reads "
      "target.ndim); nor does it read \"target.b\" ((test input):4), also set");
  // An entry that does not declare what it reads refuses nothing and leaves nothing unread.
  TargetRegistry own;
  own.add({"mine", TargetRegistry::Family::kModel, "a program's own target", {}, [](const herd::io::Settings&) {
             herd::mcmc::MadeTarget m;
             m.target.ndim = 1;
             m.target.log_density = [](const double*, int) { return 0.0; };
             return m;
           }});
  herd::mcmc::MadeTarget mine2 = own.make(settings_of("[target]\nb = 1.0\n"), "mine");
  CHECK(mine2.unread_keys.empty());
  CHECK(mine2.chosen_by == "target.model = \"mine\" (the default target)");
}
TEST_CASE("target registry: every registered name runs through the C API, serial and batched", "[mcmc]") {
  const fs::path dir = fs::path(HERD_TEST_WORK_DIR) / "registry";
  fs::remove_all(dir);
  for (const auto& [family, name] : every_name()) {
    for (const char* device : {"cpu", "cpu_batched"}) {
      INFO(name << " on " << device);
      const std::string prefix = (dir / (name + "_" + device) / "run").string();
      const std::string input = std::string("device = \"") + device +
                                "\"\nchain_size = 200\nwarmup = 100\nchains_per_rank = 4\nrandom_seed = 1\n"
                                "silent_mode = true\ncheckpoint_period_seconds = 0\noutput_prefix = \"" +
                                prefix + "\"\n" + target_table(family, name);
      CHECK(herd_run_dram(0, nullptr, input.c_str()) == 0);
      CHECK(fs::exists(prefix + ".h5"));
    }
  }
}

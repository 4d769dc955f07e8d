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
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "herd/core/config.hpp"
#include "herd/core/error.hpp"
#include "herd/core/log.hpp"
#include "herd/core/mpi_communicator.hpp"
#include "herd/examples/model_targets.hpp"
#include "herd/io/config.hpp"
#include "herd/io/schema.hpp"
#include "herd/io/toml_reader.hpp"
#include "herd/mcmc/parallel.hpp"
#include "herd/mcmc/paradram_run.hpp"
#include "herd/mcmc/sampler_specs.hpp"
#include "herd/mcmc/run/program_input.hpp"
#include "herd/mcmc/run/target_registry.hpp"

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

}  // namespace

int main(int argc, char** argv) {
  // The posteriordb models join the built-in targets and plugins of the target registry.
  herd::examples::register_models(herd::mcmc::TargetRegistry::global());
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
    herd::mcmc::TargetRegistry::global().declare_keys(schema);
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
      herd::mcmc::TargetRegistry::global().declare_keys(schema);
      const herd::io::Settings settings = schema.apply(config, all_sets);
      // The target by name (built-in, posteriordb model, plugin); the default input's model
      // when none is given. Then the specifications, the device and the checks of the library.
      herd::mcmc::complete_program_input(in, herd::mcmc::TargetRegistry::global().make(settings, "kidscore_interaction"),
                                         schema, settings, *comm,
                                         file.empty() ? std::string("(embedded default input)") : file);
      in.options.quiet = quiet;
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

// A program's input completed for a run (herd/mcmc/run/program_input.hpp).
#include "herd/mcmc/run/program_input.hpp"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include "herd/core/error.hpp"
#include "herd/mcmc/diagnostics.hpp"
#include "herd/mcmc/dram.hpp"
#include "herd/mcmc/run/batched_sample.hpp"
#include "herd/mcmc/sampler_specs.hpp"

namespace herd::mcmc {

namespace {

/// Validates the kernel options before anything is written: a plugin (loaded later, after
/// the output checks) with a flat density now and with its own density once loaded. The
/// kernel's messages about the start point (`start_point`, `domain_ball_*`) name the keys as
/// the input names them (a namelist's `startPointVec`, `domainBall*`), after the start
/// point's own origin when the input sets it, else after `origin`.
void probe_kernel_options(SamplerProgramInput& in, const io::Settings& settings, const std::string& origin) {
  const bool start_set = settings.is_set("start_point");
  const std::string start_name = spec_name(settings, "start_point", "startPointVec") + (start_set ? "" : " (default)");
  const std::string where = start_set ? settings.origin("start_point") : origin;
  const bool namelist = settings.namelist();
  auto probe = [options = to_dram_options(in.specs, in.target.ndim), origin, start_name, where,
                namelist](const PointLogDensity& f) {
    try {
      DramSampler probe(options, f);
    } catch (const InputError& e) {
      // What the specifications' checks leave to the kernel (e.g. a start point outside
      // the target's support): name the input.
      std::string m = e.what();
      const auto replace_all = [&m](std::string_view from, const std::string& to) {
        for (std::size_t k = m.find(from); k != std::string::npos; k = m.find(from, k + to.size()))
          m.replace(k, from.size(), to);
      };
      const bool about_start = m.find("start_point") != std::string::npos;
      replace_all("start_point", start_name);
      if (namelist) replace_all("domain_ball_*", "domainBall*");
      throw InputError(fmt::format("{}: {}", about_start ? where : origin, m));
    }
  };
  if (!in.load_target) {
    probe(in.target.log_density);
    return;
  }
  probe([](const double*, int) { return 0.0; });
  in.load_target = [load = in.load_target, probe, f = in.target.log_density] {
    load();
    probe(f);
  };
}

}  // namespace

void complete_program_input(SamplerProgramInput& in, MadeTarget made, const io::Schema& schema,
                            const io::Settings& settings, const Communicator& comm, const std::string& origin) {
  // The resolved input comments out the keys the run does not read: the chosen target's
  // (made.unread_keys) and the sampler's (in.specs.unread).
  const auto unread = [&in, keys = made.unread_keys](const std::string& key) {
    for (const auto& [k, why] : keys)
      if (k == key) return why;
    for (const auto& [k, why] : in.specs.unread)
      if (k == key) return "not read: " + why;
    return std::string();
  };
  in.target = std::move(made.target);
  in.load_target = std::move(made.load);
  in.specs = resolve_sampler_specs(settings, in.target.ndim, in.target.names);
  // Before anything is allocated: every size, and the memory the run holds.
  check_sampler_memory(in.specs, in.target.ndim, comm.size(), in.options.diagnostics_threads);
  // The diagnostics' rank budget from the environment (HERD_DIAGNOSTICS_RANK_BUDGET), checked
  // with the input: a malformed value is bad input, refused before anything runs.
  static_cast<void>(diagnostics_rank_budget());
  // device = "cpu_batched" | "cuda": the batched run, with its own restart record.
  try {
    use_batched_run(in, std::move(made.batched), comm);
  } catch (const InputError& e) {
    // The device's own problems (no CUDA device, a target the device cannot run) name where
    // device was set, as the keys' own problems do; those of other keys name theirs.
    const std::string m = e.what();
    if (m.rfind("key \"device\"", 0) != 0 && m.rfind("device = \"", 0) != 0) throw;
    throw InputError(fmt::format("{}: {}", settings.origin("device"), m));
  }
  in.seed_given = settings.has("random_seed");
  probe_kernel_options(in, settings, origin);
  in.options.resolved_input = settings.describe(unread, [&in](const std::string& key) -> const std::vector<double>* {
    for (const auto& [k, v] : in.specs.partial_layouts)
      if (k == key) return &v;
    return nullptr;
  });
  in.options.input_source = origin;
  for (const auto& key : schema.keys())
    if (settings.has(key.name()))
      in.options.input_attributes.emplace_back(key.name(), settings.value(key.name()).to_string());
}

}  // namespace herd::mcmc

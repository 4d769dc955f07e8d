// The C interface (herd/mcmc/paradram.h): ParaMonte-compatible entry points over the
// herd-sample pipeline (specifications -> DRAM kernel -> ParaDRAM outputs).
#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>

#include "herd/core/error.hpp"
#include "herd/io/config.hpp"
#include "herd/io/namelist.hpp"
#include "herd/io/schema.hpp"
#include "herd/io/toml_reader.hpp"
#include "herd/mcmc/paradram.h"
#include "herd/mcmc/paradram_run.hpp"
#include "herd/mcmc/sampler_specs.hpp"

namespace {

int g_last_status = 0;

/// The input as a configuration: a file path, namelist text, TOML text, or nothing.
herd::io::Config input_config(std::string_view input) {
  const std::size_t first = input.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return herd::io::parse_toml("", "(no input)");
  const std::string s(input);
  if (input.find('\n') == std::string_view::npos && input.find('=') == std::string_view::npos) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(s, ec))
      throw herd::InputError(fmt::format("input file \"{}\" does not exist", s));
    return herd::io::read_config(s, "ParaDRAM");
  }
  if (input[first] == '&' || input[first] == '$') return herd::io::parse_namelist(input, "(input text)", "ParaDRAM");
  // A namelist may start with comments before its group.
  if (input.find("&ParaDRAM") != std::string_view::npos || input.find("&paradram") != std::string_view::npos)
    return herd::io::parse_namelist(input, "(input text)", "ParaDRAM");
  return herd::io::parse_toml(input, "(input text)");
}

int run(std::int32_t ndim, herd_log_func f, std::string_view input) {
  herd::mcmc::SampleTarget target;
  herd::mcmc::SamplerSpecs specs;
  herd::mcmc::SampleRunOptions opts;
  try {
    if (ndim < 1) throw herd::InputError(fmt::format("herd_run_dram: ndim is {}, but must be at least 1", ndim));
    if (f == nullptr) throw herd::InputError("herd_run_dram: the log function is NULL");
    const herd::io::Config config = input_config(input);
    herd::io::Schema schema("ParaDRAM");
    herd::mcmc::declare_sampler_specs(schema);
    const herd::io::Settings settings = schema.apply(config);
    target.ndim = ndim;
    target.log_density = [f](const double* x, int d) {
      double copy[64];
      if (d <= 64) {
        for (int i = 0; i < d; ++i) copy[i] = x[i];
        return f(d, copy);
      }
      std::vector<double> v(x, x + d);
      return f(d, v.data());
    };
    target.description = "C log function (ParaMonte signature)";
    specs = herd::mcmc::resolve_sampler_specs(settings, ndim);
    herd::mcmc::DramSampler probe(herd::mcmc::to_dram_options(specs, ndim), target.log_density);
    herd::mcmc::prepare_outputs(specs);
    opts.resolved_input = settings.describe();
    opts.input_source = config.source();
    for (const auto& key : schema.keys())
      if (settings.has(key.name())) opts.input_attributes.emplace_back(key.name(), settings.value(key.name()).to_string());
    opts.quiet = specs.silent_mode;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "herd: error: %s\n", e.what());
    return 2;
  }
  try {
    herd::mcmc::run_paradram(specs, target, opts);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "herd: error: %s\n", e.what());
    return 1;
  }
}

}  // namespace

extern "C" int herd_run_dram(int32_t ndim, herd_log_func logfunc, const char* input) {
  return run(ndim, logfunc, input ? std::string_view(input) : std::string_view());
}

extern "C" void runParaDRAM(int32_t ndim, double (*getLogFunc)(int32_t ndim, double Point[]), char* inputFile,
                            int32_t inputFileLen) {
  std::string_view input;
  if (inputFile != nullptr && inputFileLen > 0) input = std::string_view(inputFile, static_cast<std::size_t>(inputFileLen));
  // Fortran callers pass blank-padded strings.
  while (!input.empty() && (input.back() == ' ' || input.back() == '\0')) input.remove_suffix(1);
  g_last_status = run(ndim, getLogFunc, input);
}

extern "C" int herd_last_status(void) { return g_last_status; }

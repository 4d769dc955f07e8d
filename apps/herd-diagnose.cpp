// herd-diagnose FILE [--dataset NAME] [--json]: Stan-grade convergence diagnostics of draws in
// an HDF5 or CSV file (DESIGN.md §7). Exit codes: 0 success, 2 bad input or usage, 1 other.
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "diagnose_input.hpp"
#include "herd/core/error.hpp"
#include "herd/core/memory.hpp"
#include "herd/mcmc/diagnostics.hpp"

namespace {

struct Row {
  std::string name;
  herd::mcmc::DiagnosticSummary s;
};

std::vector<Row> diagnose(const std::vector<herd::apps::DrawsArray>& arrays) {
  std::vector<Row> rows;
  std::vector<double> slice;
  for (const auto& a : arrays) {
    slice.resize(a.chains * a.draws);
    for (std::size_t p = 0; p < a.params; ++p) {
      for (std::size_t i = 0; i < a.chains * a.draws; ++i) slice[i] = a.values[i * a.params + p];
      rows.push_back({a.names[p], herd::mcmc::summarize(herd::mcmc::DrawsView(slice, a.chains, a.draws))});
    }
  }
  return rows;
}

void print_table(const std::vector<Row>& rows) {
  std::size_t w = 9;
  for (const auto& r : rows) w = std::max(w, r.name.size());
  std::fputs(fmt::format("{:<{}} {:>12} {:>12} {:>12} {:>12} {:>12} {:>10} {:>10} {:>9} {:>9} {:>7}\n",
                         "parameter", w, "mean", "sd", "q5", "q50", "q95", "mcse_mean", "mcse_sd",
                         "ess_bulk", "ess_tail", "rhat").c_str(), stdout);
  for (const auto& r : rows) {
    const auto& s = r.s;
    std::fputs(fmt::format("{:<{}} {:>12.6g} {:>12.6g} {:>12.6g} {:>12.6g} {:>12.6g} {:>10.3g} "
                           "{:>10.3g} {:>9.0f} {:>9.0f} {:>7.4f}\n",
                           r.name, w, s.mean, s.sd, s.q5, s.q50, s.q95, s.mcse_mean, s.mcse_sd,
                           s.ess_bulk, s.ess_tail, s.rhat).c_str(), stdout);
  }
}

void print_json(const std::vector<Row>& rows) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (const auto& r : rows) {
    const auto& s = r.s;
    // NaN (undefined estimates, for example of constant draws) is written as null.
    j[r.name] = {{"mean", s.mean},         {"sd", s.sd},
                 {"q5", s.q5},             {"q50", s.q50},
                 {"q95", s.q95},           {"mcse_mean", s.mcse_mean},
                 {"mcse_sd", s.mcse_sd},   {"ess_bulk", s.ess_bulk},
                 {"ess_tail", s.ess_tail}, {"rhat", s.rhat}};
  }
  std::fputs((j.dump(2) + "\n").c_str(), stdout);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"herd-diagnose: R-hat, ESS and MCSE (Vehtari et al. 2021, as R posterior) of "
               "draws in an HDF5 file ([chains, draws] or [chains, draws, params] datasets, or "
               "every dataset of a 'posterior' group) or a CSV file (one column per chain, one "
               "row per draw)"};
  std::string file, dataset;
  bool json = false;
  app.add_option("FILE", file, "HDF5 (.h5) or CSV file of draws")->required();
  app.add_option("--dataset", dataset, "HDF5 dataset to read (default: the 'posterior' group)");
  app.add_flag("--json", json, "print one JSON object keyed by parameter");
  std::string max_memory;
  app.add_option("--max-memory", max_memory,
                 "memory the values of one dataset may use, e.g. 16GiB (default: the memory available)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  try {
    try {
      herd::apps::set_max_memory(herd::parse_memory_size(max_memory));
    } catch (const herd::InputError& e) {
      throw herd::InputError(fmt::format("--max-memory {}: {}", max_memory, e.what()));
    }
    std::vector<herd::apps::DrawsArray> arrays;
    if (herd::apps::is_hdf5(file)) {
      arrays = herd::apps::read_hdf5(file, dataset);
    } else {
      HERD_REQUIRE(dataset.empty(), "{}: --dataset is given, but the file is not HDF5", file);
      arrays.push_back(herd::apps::read_csv(file));
    }
    const auto rows = diagnose(arrays);
    if (json)
      print_json(rows);
    else
      print_table(rows);
    return 0;
  } catch (const herd::InputError& e) {
    std::fprintf(stderr, "herd-diagnose: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "herd-diagnose: error: %s\n", herd::error_text(e, "reading the draws of " + file).c_str());
    return 1;
  }
}

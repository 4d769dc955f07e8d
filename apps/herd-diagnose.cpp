// herd-diagnose FILE... [--dataset NAME] [--json | --json-diagnostics] [--html OUT.html]: Stan-grade convergence
// diagnostics of draws in an HDF5 file, a draws CSV, ParaDRAM chain/sample files or CmdStan CSV
// files (several files: one chain each; formats in diagnose_input.hpp), optionally as an HTML
// report with plots. Exit codes: 0 success, 2 bad input or usage, 1 other.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <sys/stat.h>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "app_main.hpp"
#include "diagnose_input.hpp"
#include "herd/core/config.hpp"
#include "herd/core/error.hpp"
#include "herd/core/memory.hpp"
#include "herd/core/thread_pool.hpp"
#include "herd/io/hdf5.hpp"
#include "herd/io/output_files.hpp"
#include "herd/mcmc/diagnostics.hpp"
#include "herd/mcmc/paradram_run.hpp"
#include "herd/mcmc/posterior_report.hpp"

namespace {

/// Where a quantity's draws are not all finite: how many verbose draws are NaN or infinite,
/// and the first of them (chain-major order, chain and draw counted from 0).
struct NonFinite {
  std::size_t count = 0;
  std::size_t chain = 0, draw = 0;
  double value = 0;
};

/// The NaN and infinite draws of one quantity's buffer `x` ([chains, draws] row-major, with
/// `weights` of the same layout or none: an entry of weight w is w verbose draws, and a
/// draw's index counts them). Stan's generated quantities can be NaN; such a quantity's
/// statistics are all NA (summarize), as ArviZ's are for a NaN draw, and this says why.
NonFinite find_non_finite(std::span<const double> x, std::span<const std::int64_t> weights, std::size_t draws) {
  NonFinite nf;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (std::isfinite(x[i])) continue;
    const std::size_t w = weights.empty() ? 1 : static_cast<std::size_t>(weights[i]);
    if (w == 0) continue;  // padding after a shorter chain
    if (nf.count == 0) {
      nf.chain = i / draws;
      nf.draw = i % draws;
      if (!weights.empty()) {
        nf.draw = 0;
        for (std::size_t j = nf.chain * draws; j < i; ++j) nf.draw += static_cast<std::size_t>(weights[j]);
      }
      nf.value = x[i];
    }
    nf.count += w;
  }
  return nf;
}

struct Row {
  std::string name;
  herd::mcmc::DiagnosticSummary s;
  NonFinite non_finite;
};

/// The order in which to summarize the parameters of `a` (a read array): longest first by a
/// cheap guess, so that on several threads the last ones to finish are short. The diagnostics
/// of one parameter cost one sort of its draws (the same for all) plus autocovariance lags,
/// of which it needs the more the more its draws are autocorrelated; the guess is the lag-1
/// autocorrelation of up to 8 of its chains. Unweighted arrays of several parameters; else
/// (and on ties) in order.
std::vector<std::size_t> longest_first(const herd::apps::DrawsArray& a) {
  std::vector<std::size_t> order(a.params);
  std::iota(order.begin(), order.end(), std::size_t{0});
  if (a.params < 2 || !a.weights.empty() || a.draws < 2) return order;
  std::vector<double> rho(a.params, 0.0);
  const std::size_t step = std::max<std::size_t>(1, a.chains / 8);
  for (std::size_t p = 0; p < a.params; ++p) {
    double num = 0, den = 0;
    for (std::size_t c = 0; c < a.chains; c += step) {
      const double* x = a.columns[p].data() + c * a.draws;
      double mu = 0;
      for (std::size_t t = 0; t < a.draws; ++t) mu += x[t];
      mu /= static_cast<double>(a.draws);
      for (std::size_t t = 0; t + 1 < a.draws; ++t) {
        num += (x[t] - mu) * (x[t + 1] - mu);
        den += (x[t] - mu) * (x[t] - mu);
      }
    }
    rho[p] = den > 0 && std::isfinite(num / den) ? num / den : 0.0;  // NaN would break the sort's ordering
  }
  std::stable_sort(order.begin(), order.end(), [&rho](std::size_t i, std::size_t j) { return rho[i] > rho[j]; });
  return order;
}

/// Diagnostics of every parameter of `arrays`, in order; parameters are spread over `threads`
/// threads, each summarizing one parameter at a time (about 20 bytes of scratch per draw,
/// herd::mcmc::summarize), straight from the parameter's buffer. `load(a)` makes array a's
/// buffers ready (Hdf5Draws::read: the first parameters of an array wait for, and help with,
/// its reading while the other threads compute); the arrays are taken in order, the
/// parameters of one longest first (longest_first); a parameter's buffer is released once
/// its diagnostics are done unless `keep`. The numbers do not depend on `threads`.
std::vector<Row> diagnose(std::vector<herd::apps::DrawsArray>& arrays, const std::function<void(std::size_t)>& load,
                          std::size_t threads, bool keep) {
  // Slot j is the j-th parameter to be claimed: array slot_array[j], whose parameters have the
  // slots [first[a], first[a + 1]), in the order that array's `order` gives once it is read.
  std::vector<std::size_t> first{0}, slot_array;
  for (std::size_t a = 0; a < arrays.size(); ++a) {
    first.push_back(first.back() + arrays[a].params);
    slot_array.insert(slot_array.end(), arrays[a].params, a);
  }
  struct Order {
    std::once_flag once;
    std::vector<std::size_t> params;
    /// The array's weights in 32 bits (the diagnostics' layout), converted and checked once
    /// for all its parameters instead of once per parameter (4 bytes per entry each time).
    std::vector<std::uint32_t> weights;
  };
  std::vector<Order> orders(arrays.size());
  std::vector<herd::mcmc::DiagnosticSummary> summaries(slot_array.size());
  std::vector<NonFinite> non_finite(slot_array.size());
  auto one = [&](std::size_t slot) {
    const std::size_t ai = slot_array[slot];
    load(ai);
    auto& a = arrays[ai];
    Order& o = orders[ai];
    std::call_once(o.once, [&] {
      o.params = longest_first(a);
      if (a.weights.empty()) return;
      // DrawsView's int64 constructor checks and narrows them (its errors, as per parameter
      // before); its copy is kept.
      const herd::mcmc::DrawsView checked(a.columns[o.params[0]].span(), a.weights, a.chains, a.draws);
      o.weights.assign(checked.weights().begin(), checked.weights().end());
    });
    const std::size_t p = o.params[slot - first[ai]];
    const std::span<const double> x = a.columns[p].span();
    non_finite[first[ai] + p] = find_non_finite(x, a.weights, a.draws);
    summaries[first[ai] + p] = a.weights.empty()
                                   ? herd::mcmc::summarize(herd::mcmc::DrawsView(x, a.chains, a.draws))
                                   : herd::mcmc::summarize(herd::mcmc::DrawsView(
                                         x, std::span<const std::uint32_t>(o.weights), a.chains, a.draws));
    if (!keep) a.columns[p].reset();
  };
  threads = std::min(threads, slot_array.size());
  if (threads <= 1) {
    for (std::size_t j = 0; j < slot_array.size(); ++j) one(j);
  } else {
    // Parameters are claimed one at a time, so a slow one does not hold up a fixed share;
    // the workers' scratch is freed with the pool.
    herd::ThreadPool pool(threads - 1);
    pool.parallel_for_each(0, slot_array.size(), one, 1);
  }
  std::vector<Row> rows;
  rows.reserve(summaries.size());
  for (std::size_t a = 0; a < arrays.size(); ++a)
    for (std::size_t p = 0; p < arrays[a].params; ++p)
      rows.push_back({arrays[a].names[p], summaries[first[a] + p], non_finite[first[a] + p]});
  return rows;
}

void print_table(const std::vector<Row>& rows) {
  std::size_t w = 9;
  for (const auto& r : rows) w = std::max(w, r.name.size());
  std::fputs(fmt::format("{:<{}} {:>12} {:>12} {:>12} {:>12} {:>12} {:>10} {:>10} {:>9} {:>9} {:>7}\n", "parameter", w,
                         "mean", "sd", "q5", "q50", "q95", "mcse_mean", "mcse_sd", "ess_bulk", "ess_tail", "rhat")
                 .c_str(),
             stdout);
  for (const auto& r : rows) {
    const auto& s = r.s;
    std::fputs(
        fmt::format("{:<{}} {:>12.6g} {:>12.6g} {:>12.6g} {:>12.6g} {:>12.6g} {:>10.3g} "
                    "{:>10.3g} {:>9.0f} {:>9.0f} {:>7.4f}\n",
                    r.name, w, s.mean, s.sd, s.q5, s.q50, s.q95, s.mcse_mean, s.mcse_sd, s.ess_bulk, s.ess_tail, s.rhat)
            .c_str(),
        stdout);
  }
}

/// The statistics of `rows` as --json gives them: one object keyed by quantity.
nlohmann::ordered_json rows_json(const std::vector<Row>& rows) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (const auto& r : rows) {
    const auto& s = r.s;
    // NaN (undefined estimates, for example of constant draws) is written as null.
    j[r.name] = {{"mean", s.mean},
                 {"sd", s.sd},
                 {"q5", s.q5},
                 {"q50", s.q50},
                 {"q95", s.q95},
                 {"mcse_mean", s.mcse_mean},
                 {"mcse_sd", s.mcse_sd},
                 {"ess_bulk", s.ess_bulk},
                 {"ess_tail", s.ess_tail},
                 {"rhat", s.rhat}};
  }
  return j;
}

void print_json(const std::vector<Row>& rows) { std::fputs((rows_json(rows).dump(2) + "\n").c_str(), stdout); }

/// A number for JSON: null where it is NaN or infinite (nlohmann writes those as null too,
/// but says so here).
nlohmann::ordered_json number_or_null(double x) {
  return std::isfinite(x) ? nlohmann::ordered_json(x) : nlohmann::ordered_json(nullptr);
}

/// One kind of transition flags for --json-diagnostics (null when the input has none).
nlohmann::ordered_json flags_json(const std::optional<herd::apps::TransitionFlags>& f, bool depth) {
  if (!f) return nullptr;
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  j["source"] = f->source;
  j["count"] = f->count;
  j["transitions"] = f->transitions;
  j["percent"] =
      f->transitions == 0
          ? nlohmann::ordered_json(nullptr)
          : nlohmann::ordered_json(100.0 * static_cast<double>(f->count) / static_cast<double>(f->transitions));
  nlohmann::ordered_json per = nlohmann::ordered_json::array();
  for (const std::int64_t k : f->per_chain)
    per.push_back(k < 0 ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(k));
  j["per_chain"] = per;
  if (depth) {
    if (f->max_depth.empty()) {
      j["max_depth"] = nullptr;
    } else {
      nlohmann::ordered_json md = nlohmann::ordered_json::array();
      for (const std::uint64_t d : f->max_depth)
        md.push_back(d == 0 ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(d));
      j["max_depth"] = md;
    }
  }
  j["cut_off"] = f->cut_off;
  j["message"] = f->message.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(f->message);
  return j;
}

/// --json-diagnostics: the quantities' statistics (--json's object) and, beside them, the
/// sampler diagnostics and what reading the input found (`input`, `non_finite`: every
/// quantity with NaN or infinite draws, chain and draw counted from 0, the value as "nan",
/// "inf" or "-inf") as numbers, and every warning and note that stderr gives (`warnings`,
/// `notes`: the lines without their "WARNING: " / "herd-diagnose: note: " prefix).
void print_json_diagnostics(const std::vector<Row>& rows, const herd::apps::SamplerDiagnostics& sampler,
                            std::size_t draws, const std::vector<std::string>& warnings,
                            const std::vector<std::string>& notes) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  j["quantities"] = rows_json(rows);
  j["chains"] = sampler.chains;
  j["draws_per_chain"] = draws;
  nlohmann::ordered_json s = nlohmann::ordered_json::object();
  s["divergent"] = flags_json(sampler.divergent, false);
  s["max_treedepth"] = flags_json(sampler.max_treedepth, true);
  if (sampler.ebfmi) {
    const auto& e = *sampler.ebfmi;
    nlohmann::ordered_json per = nlohmann::ordered_json::array();
    for (const double v : e.per_chain) per.push_back(number_or_null(v));
    s["ebfmi"] = {{"source", e.source},
                  {"threshold", e.threshold},
                  {"per_chain", per},
                  {"low_chains", e.low},
                  {"message", e.message.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(e.message)}};
  } else {
    s["ebfmi"] = nullptr;
  }
  j["sampler"] = s;
  const auto& in = sampler.input;
  const auto list_or_null = [](const std::vector<std::size_t>& v) {
    return v.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(v);
  };
  j["input"] = {{"format", in.format},
                {"method", in.method.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(in.method)},
                {"approximation", in.approximation},
                {"warmup_left_out", list_or_null(in.warmup_left_out)},
                {"draws_read", list_or_null(in.draws_read)},
                {"cut_to", in.cut_to == 0 ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(in.cut_to)}};
  nlohmann::ordered_json nf = nlohmann::ordered_json::array();
  for (const auto& r : rows)
    if (r.non_finite.count > 0)
      nf.push_back({{"quantity", r.name},
                    {"count", r.non_finite.count},
                    {"first_chain", r.non_finite.chain},
                    {"first_draw", r.non_finite.draw},
                    {"first_value", fmt::format("{}", r.non_finite.value)}});
  j["non_finite"] = nf;
  j["warnings"] = warnings;
  j["notes"] = notes;
  std::fputs((j.dump(2) + "\n").c_str(), stdout);
}

/// One note per quantity with NaN or infinite draws (the first kNotesShown; then one line for
/// the rest; without "note: "): how many, where the first is (with its chain's file when the
/// chains are the files `chain_files`, else empty), and that its statistics are NA.
std::vector<std::string> non_finite_notes(const std::vector<Row>& rows, const std::vector<std::string>& chain_files) {
  std::vector<std::string> out;
  constexpr std::size_t kNotesShown = 10;
  std::size_t shown = 0, more = 0;
  for (const auto& r : rows) {
    const NonFinite& nf = r.non_finite;
    if (nf.count == 0) continue;
    if (shown == kNotesShown) {
      ++more;
      continue;
    }
    ++shown;
    const std::string file =
        nf.chain < chain_files.size() ? fmt::format(" ({})", chain_files[nf.chain]) : std::string();
    out.push_back(
        fmt::format("{}: {} draw{} NaN or infinite (the first: {} at chain {}{}, draw {}, "
                    "counted from 0), so its statistics are NA",
                    r.name, nf.count, nf.count == 1 ? " is" : "s are", nf.value, nf.chain, file, nf.draw));
  }
  if (more > 0)
    out.push_back(
        fmt::format("{} more quantit{} NaN or infinite draws (statistics NA)", more, more == 1 ? "y has" : "ies have"));
  return out;
}

/// The draws per chain of `a`: a weighted array's verbose draws (its weights of one chain
/// summed; every chain's sum to the same), else its `draws`.
std::size_t verbose_draws(const herd::apps::DrawsArray& a) {
  if (a.weights.empty()) return a.draws;
  std::size_t n = 0;
  for (std::size_t t = 0; t < a.draws; ++t) n += static_cast<std::size_t>(a.weights[t]);
  return n;
}

/// `a` with its weights expanded: every entry repeated `weights` times (padding dropped), the
/// verbose draws of each parameter; `a` itself (moved) when it has no weights.
herd::apps::DrawsArray expanded(herd::apps::DrawsArray& a) {
  if (a.weights.empty()) return std::move(a);
  herd::apps::DrawsArray v;
  v.names = a.names;
  v.chains = a.chains;
  v.params = a.params;
  for (std::size_t t = 0; t < a.draws; ++t) v.draws += static_cast<std::size_t>(a.weights[t]);
  for (const auto& col : a.columns) {
    herd::apps::DrawsBuffer out(v.chains * v.draws);
    double* o = out.data();
    for (std::size_t i = 0; i < a.chains * a.draws; ++i) o = std::fill_n(o, a.weights[i], col[i]);
    v.columns.push_back(std::move(out));
  }
  return v;
}

/// Refuses an --html report of weighted `arrays` (an .h5's compact chain, read in compact form)
/// whose expanded copies (`expanded`, all held together by write_html) need more memory than
/// `max_memory` (0: the memory available) allows; checked before the diagnostics run.
/// @throws herd::InputError naming `file`, the shapes and the limit.
void check_report_memory(const std::string& file, const std::vector<herd::apps::DrawsArray>& arrays,
                         std::uint64_t max_memory) {
  double values = 0;
  std::size_t verbose = 0, chains = 0, quantities = 0;
  for (const auto& a : arrays) {
    if (a.weights.empty()) continue;
    std::size_t n = 0;  // verbose draws per chain (every chain has as many)
    for (std::size_t t = 0; t < a.draws; ++t) n += static_cast<std::size_t>(a.weights[t]);
    values += static_cast<double>(a.chains) * static_cast<double>(n) * static_cast<double>(a.params);
    verbose = n;
    chains = a.chains;
    quantities += a.params;
  }
  if (quantities == 0) return;
  herd::check_memory_need(values * 8.0, max_memory,
                          fmt::format("{}: the --html report of its weighted draws, expanded ({} chain{} x {} draws "
                                      "x {} quantities)",
                                      file, chains, chains == 1 ? "" : "s", verbose, quantities),
                          "diagnose it without --html", "--max-memory");
}

/// herd-sample's nested R-hat of a batched or multi-chain run with superchains, as its .h5
/// keeps it (`diagnostics/nested_rhat` [variable] with the attribute `superchains`, names in
/// `diagnostics/variable`): by variable name, with the number of superchains; empty when the
/// file holds none (not herd's, no superchains, unreadable: the classic verdicts then apply).
/// With it, the warnings judge convergence as herd-sample's report did (many short chains:
/// nested R-hat, Margossian et al. 2024). Never throws.
struct NestedRhat {
  std::vector<std::string> names;
  std::vector<double> values;
  std::size_t superchains = 0;
  /// The run's resolved input (`input` attributes) says random_start_point = false: every
  /// chain started from the same point, as the HTML report's note says.
  bool shared_start = false;
};
NestedRhat stored_nested_rhat(const std::string& path) {
  NestedRhat n;
  try {
    const herd::io::H5File f = herd::io::H5File::open(path);
    if (!f.root().is_group("diagnostics")) return {};
    const herd::io::H5Group g = f.open_group("diagnostics");
    if (!g.is_dataset("nested_rhat") || !g.is_dataset("variable")) return {};
    const herd::io::H5Dataset ds = g.open_dataset("nested_rhat");
    n.values = ds.read<double>();
    n.superchains = static_cast<std::size_t>(ds.attribute<std::int64_t>("superchains"));
    n.names = g.open_dataset("variable").read_strings();
    if (n.names.size() != n.values.size() || n.superchains < 2) return {};
    if (f.root().is_group("input")) {
      const herd::io::H5Group in = f.open_group("input");
      n.shared_start = in.has_attribute("random_start_point") && in.attribute_string("random_start_point") == "false";
    }
  } catch (const std::exception&) {
    return {};
  }
  return n;
}

/// The stored nested R-hat of the quantity `name` (NaN: none stored for it).
double nested_of(const NestedRhat& n, const std::string& name) {
  const auto it = std::find(n.names.begin(), n.names.end(), name);
  return it == n.names.end() ? std::nan("") : n.values[static_cast<std::size_t>(it - n.names.begin())];
}

/// How the verdicts of herd-diagnose say to run longer: the draws may come from any sampler,
/// so the advice names no herd-sample setting.
constexpr const char* kRunLonger = "more draws per chain";

/// The report's title for the input `files` (at least one): the file name of one or two
/// files, `first ... last (N files)` of more (CmdStan's or multi_chain's one file per chain).
std::string report_title(const std::vector<std::string>& files) {
  const auto name = [](const std::string& f) { return std::filesystem::path(f).filename().string(); };
  std::string t = "herd-diagnose report: " + name(files.front());
  if (files.size() == 2) t += ", " + name(files.back());
  if (files.size() > 2) t += fmt::format(" ... {} ({} files)", name(files.back()), files.size());
  return t;
}

/// The HTML report (posterior_report.hpp) of the arrays that share the first one's
/// [chains, draws] shape (compact arrays expanded first); the others are named in a note.
/// Its verdicts are the terminal's: judged on the `stored` nested R-hat where the file holds
/// one, with advice that names no herd-sample setting (kRunLonger); the sampler's own
/// `warnings` (divergences, tree depth, E-BFMI) follow them, and the `notes` of reading the
/// input ("note: ..."; the terminal's: warm-up left out, an approximation's draws, ...).
void write_html(const std::vector<std::string>& files, std::vector<herd::apps::DrawsArray>& compact_or_verbose,
                const std::vector<Row>& rows, const NestedRhat& stored, const std::vector<std::string>& warnings,
                const std::vector<std::string>& notes, const std::string& out) {
  std::vector<herd::apps::DrawsArray> arrays;
  arrays.reserve(compact_or_verbose.size());
  for (auto& a : compact_or_verbose) arrays.push_back(expanded(a));
  herd::mcmc::PosteriorReportData h;
  h.warnings = warnings;
  for (const auto& n : notes) h.notes.push_back(n.starts_with("note: ") ? n.substr(6) : n);
  const std::string file = fmt::format("{}", fmt::join(files, ", "));
  h.title = report_title(files);
  h.subtitle = "Convergence diagnostics of the draws in " + file;
  const std::size_t chains = arrays.at(0).chains, draws = arrays.at(0).draws;
  std::vector<std::pair<const herd::apps::DrawsArray*, std::size_t>> shown;  // (array, parameter) per quantity
  std::vector<std::string> skipped, non_finite;
  std::size_t row = 0;
  for (const auto& a : arrays) {
    const bool same = a.chains == chains && a.draws == draws;
    for (std::size_t p = 0; p < a.params; ++p, ++row) {
      if (!same) {
        skipped.push_back(a.names[p]);
        continue;
      }
      if (rows[row].non_finite.count > 0) {  // nothing to plot: every statistic is NA
        non_finite.push_back(a.names[p]);
        continue;
      }
      shown.emplace_back(&a, p);
      h.names.push_back(a.names[p]);
      h.summary.push_back(rows[row].s);
      h.nested_rhat.push_back(nested_of(stored, rows[row].name));
    }
  }
  h.chains = chains;
  h.draws = draws;
  h.run_longer = kRunLonger;
  h.superchains = stored.superchains;
  h.superchains_share_start = stored.shared_start;
  if (stored.superchains < 2) h.nested_rhat.clear();
  // One parameter's [chains, draws] slice at a time (the report holds at most two).
  h.fill_values = [&shown](std::size_t q, std::vector<double>& v) {
    const auto& [a, p] = shown[q];
    const auto x = a->columns[p].span();
    v.assign(x.begin(), x.end());
  };
  h.facts = {{"input", file},
             {"chains", std::to_string(chains)},
             {"draws per chain", std::to_string(draws)},
             {"quantities", std::to_string(h.names.size())}};
  if (!skipped.empty())
    h.notes.push_back(
        fmt::format("Left out of this report (their [chains, draws] shape differs from {} x {}): {}; "
                    "the terminal table has them.",
                    chains, draws, fmt::join(skipped, ", ")));
  if (!non_finite.empty())
    h.notes.push_back(fmt::format(
        "Left out of this report (NaN or infinite draws, so every statistic is NA): {}; the terminal names the first "
        "such draw of each.",
        fmt::join(non_finite, ", ")));
  h.history_note =
      "herd-diagnose reads the draws only: the sampler's acceptance rate and adaptation over the run are not "
      "shown here (herd-sample's own report shows them for its runs; CmdStan's accept_stat__ and stepsize__ "
      "columns are not plotted).";
  h.covariance_note = "herd-diagnose reads the draws only: a proposal covariance is not shown here.";
  herd::mcmc::write_posterior_report(out, h);
}

/// Whether everything printed to stdout was written: flushes it and, when a write failed (a
/// full disk, a file system error), says so on stderr in one line naming `what` was printed
/// and why. Its output was lost silently, with exit status 0: a CI step's JSON file empty.
bool stdout_written(const char* what) {
  errno = 0;
  const bool flushed = std::fflush(stdout) == 0;
  const int err = errno;
  if (flushed && std::ferror(stdout) == 0) return true;
  std::fprintf(stderr, "herd-diagnose: error: cannot write %s to standard output (%s)\n", what,
               err != 0 ? std::strerror(err) : "a write failed");
  return false;
}

/// Whether `a` and `b` name the same file: the same inode when both exist
/// (std::filesystem::equivalent: hard links, symbolic links and `dir/../x` spellings alike),
/// else the same absolute path once `.`, `..` and links of its existing folders are resolved.
bool same_file(const std::filesystem::path& a, const std::filesystem::path& b) {
  namespace fs = std::filesystem;
  std::error_code ea, eb;
  if (fs::exists(a, ea) && fs::exists(b, eb)) {
    std::error_code ec;
    return fs::equivalent(a, b, ec);
  }
  const auto normal = [](const fs::path& p) {
    std::error_code ec;
    fs::path n = fs::weakly_canonical(p, ec);
    if (ec) n = fs::absolute(p, ec).lexically_normal();
    return n;
  };
  return normal(a) == normal(b);
}

/// Refuses, before any work, an --html path that the report could not be written to, or
/// should not be: one of the input files `files` (the report is renamed over its path, which
/// would replace the draws it was made from), a folder or other non-file, or a path whose
/// folder is missing or not writable (these failed only the final rename, after all the
/// diagnostics ran). @throws herd::InputError naming --html, the path and what is wrong.
void check_html_path(const std::string& html, const std::vector<std::string>& files) {
  namespace fs = std::filesystem;
  for (const auto& f : files)
    if (same_file(html, f))
      throw herd::InputError(
          fmt::format("--html {}: is the input file {}, which the report would replace; give --html the path of a "
                      "new or report file, not one of the inputs",
                      html, f));
  std::error_code ec;
  const auto st = fs::symlink_status(html, ec);
  if (!ec && fs::exists(st) && !fs::is_regular_file(st) && !fs::is_symlink(st))
    throw herd::InputError(fmt::format("--html {}: is {}, but must be the path of the report file to write", html,
                                       fs::is_directory(st) ? "a folder" : "not a regular file"));
  const fs::path parent = fs::path(html).parent_path();
  const fs::path folder = parent.empty() ? fs::path(".") : parent;
  const auto fst = fs::status(folder, ec);
  if (!fs::exists(fst))
    throw herd::InputError(fmt::format(
        "--html {}: the folder \"{}\" does not exist; create it first or give another path", html, folder.string()));
  if (!fs::is_directory(fst))
    throw herd::InputError(
        fmt::format("--html {}: \"{}\" is not a folder, but must be the folder of the report", html, folder.string()));
  herd::io::check_folder_writable(folder.string(), "--html " + html);
}

/// Refuses, before any work, a file named twice among `files` (however spelled: `x.csv` and
/// `./x.csv`, a hard or symbolic link; same device and inode), which would be read as two
/// identical chains: their agreement makes R-hat look converged. Files that cannot be
/// examined are left to the reader's error. @throws herd::InputError naming both spellings.
void check_distinct_files(const std::vector<std::string>& files) {
  std::map<std::pair<dev_t, ino_t>, std::size_t> seen;
  for (std::size_t i = 0; i < files.size(); ++i) {
    struct stat st {};
    if (::stat(files[i].c_str(), &st) != 0) continue;
    const auto [it, fresh] = seen.try_emplace({st.st_dev, st.st_ino}, i);
    if (!fresh)
      throw herd::InputError(fmt::format(
          "{}: is the same file as {}, given twice, but each file is one chain: a chain read twice makes R-hat "
          "look converged",
          files[i], files[it->second]));
  }
}

/// The program: main's body, run by main, which turns an exception that escapes it into an
/// error line.
int run_main(int argc, char** argv) {
  CLI::App app{
      "herd-diagnose: R-hat, ESS and MCSE (Vehtari et al. 2021, as R posterior) of "
      "draws in an HDF5 file ([chains, draws] or [chains, draws, ...] datasets, the dimensions after the draws "
      "flattened into parameters as ArviZ labels them, L[0, 1], or "
      "every dataset of a 'posterior' group, or herd-sample's weighted 'chain_compact' group when the file has "
      "no 'posterior'), a CSV file (one column per chain, one "
      "row per draw), ParaDRAM chain or sample files (herd's or ParaMonte's; one file "
      "per chain), or CmdStan CSV files (one file per chain)"};
  std::vector<std::string> files;
  std::string dataset, html;
  bool json = false, json_diagnostics = false;
  app.set_version_flag("--version", std::string("herd-diagnose (herd) ") + HERD_VERSION_STRING);
  app.add_option("FILE", files,
                 "HDF5 (.h5) file, draws CSV, or ParaDRAM _chain.txt/_sample.txt or CmdStan CSV files (one per chain)")
      ->required();
  app.add_option("--dataset", dataset,
                 "HDF5 dataset to read (default: the 'posterior' group, else herd-sample's 'chain_compact')");
  app.add_flag("--json", json, "print one JSON object keyed by parameter");
  app.add_flag("--json-diagnostics", json_diagnostics,
               "print one JSON object: --json's under \"quantities\", beside the chains' labels, the sampler's "
               "diagnostics (divergences, maximum tree depth, E-BFMI) as numbers, and every warning and note");
  app.add_option("--html", html, "also write a self-contained HTML report with plots to this file");
  long long threads_given = 0;
  app.add_option("--threads", threads_given,
                 "threads that read and compute parameters' diagnostics in parallel (0: one per core; each holds "
                 "about 20 bytes of scratch per draw, besides the draws and one shared table of 4.5 bytes per draw)");
  std::string max_memory;
  app.add_option("--max-memory", max_memory,
                 "memory the values of one dataset may use, e.g. 16GiB (default: the memory available)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    // One line in the herd form (CLI11's own text is two lines without the program name).
    std::string m = e.what();
    std::replace(m.begin(), m.end(), '\n', ' ');
    std::fprintf(stderr, "herd-diagnose: error: %s (run herd-diagnose --help for the options)\n", m.c_str());
    return 2;
  }
  if (threads_given < 0 || threads_given > 4096) {
    std::fprintf(stderr,
                 "herd-diagnose: error: --threads is %lld, but must be 0 (one per core) or a number of threads from 1 "
                 "to 4096\n",
                 threads_given);
    return 2;
  }
  auto threads = static_cast<std::size_t>(threads_given);
  try {
    if (!html.empty()) check_html_path(html, files);
    std::uint64_t max_memory_bytes = 0;
    try {
      max_memory_bytes = herd::parse_memory_size(max_memory);
      herd::apps::set_max_memory(max_memory_bytes);
    } catch (const herd::InputError& e) {
      throw herd::InputError(fmt::format("--max-memory {}: {}", max_memory, e.what()));
    }
    if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
    herd::apps::set_diagnostics_threads(threads);
    std::vector<herd::apps::DrawsArray> text_arrays;
    std::vector<std::string> sampler_warnings;  // divergences, saturated trees, E-BFMI: terminal and HTML
    std::vector<std::string> input_notes;       // what reading the input found ("note: ..."): terminal and HTML
    herd::apps::SamplerDiagnostics sampler;     // the same sampler diagnostics as numbers (--json-diagnostics)
    std::unique_ptr<herd::apps::Hdf5Draws> h5;
    bool any_h5 = false;
    for (const auto& f : files) any_h5 = any_h5 || herd::apps::is_hdf5(f);
    if (any_h5) {
      HERD_REQUIRE(files.size() == 1,
                   "{}: several files are given, but an HDF5 file holds all chains itself: give it alone", files[0]);
      h5 = std::make_unique<herd::apps::Hdf5Draws>(files[0], dataset);
      // An ArviZ file's sampler diagnostics (PyMC's, NumPyro's), as CmdStan's are warned of,
      // judged against the first array's [chain, draw] shape (the posterior's).
      if (!h5->arrays().empty())
        sampler_warnings = herd::apps::hdf5_sampler_warnings(files[0], h5->arrays()[0].chains, h5->arrays()[0].draws,
                                                             input_notes, &sampler);
    } else {
      HERD_REQUIRE(dataset.empty(), "{}: --dataset is given, but the file is not HDF5", files[0]);
      check_distinct_files(files);
      text_arrays = herd::apps::read_text(files, &input_notes, &sampler_warnings, &sampler);
    }
    for (const auto& note : input_notes) std::fprintf(stderr, "herd-diagnose: %s\n", note.c_str());
    // The sampler's own warnings (divergences, saturated trees, low E-BFMI) stand beside the
    // verdicts' and go to the HTML report too.
    for (const auto& w : sampler_warnings) std::fprintf(stderr, "WARNING: %s\n", w.c_str());
    auto& arrays = h5 ? h5->arrays() : text_arrays;
    if (!html.empty()) check_report_memory(files[0], arrays, max_memory_bytes);
    std::vector<Row> rows;
    try {
      // HDF5 draws are read as the threads come to them, each parameter's buffer released
      // after its diagnostics unless the report needs them again.
      rows = diagnose(
          arrays,
          [&h5](std::size_t a) {
            if (h5) h5->read(a);
          },
          threads, !html.empty());
    } catch (...) {
      if (h5) h5->check_in_order();  // an earlier dataset's error comes first
      throw;
    }
    // What was read, and herd-sample's convergence verdicts (R-hat, ESS) on stderr so that
    // the table and the JSON stay as they are: the warnings, and the notes (diagnostics
    // that are undefined, NA in the table, and why) that the HTML report shows too. The
    // verdicts come once for all quantities of one chain count (the ESS threshold depends on
    // it), as the HTML report gives them, not once per dataset: an ArviZ file's ten scalars
    // repeated the same paragraph ten times. They are put together first, so that
    // --json-diagnostics holds them too, and printed after the table.
    const NestedRhat stored = h5 ? stored_nested_rhat(files[0]) : NestedRhat{};
    struct Verdicts {
      std::size_t chains = 0;
      std::vector<std::string> names;
      std::vector<herd::mcmc::DiagnosticSummary> summary;
      std::vector<double> nested;
    };
    std::vector<Verdicts> groups;         // by chain count, in the order first read
    std::vector<std::string> read_lines;  // what was read, a line per dataset or file set
    std::size_t at = 0;
    for (const auto& a : arrays) {
      auto g = std::find_if(groups.begin(), groups.end(), [&a](const Verdicts& v) { return v.chains == a.chains; });
      if (g == groups.end()) g = groups.insert(groups.end(), Verdicts{a.chains, {}, {}, {}});
      for (std::size_t p = 0; p < a.params; ++p, ++at) {
        g->names.push_back(rows[at].name);
        g->summary.push_back(rows[at].s);
        g->nested.push_back(nested_of(stored, rows[at].name));
      }
      std::string names = a.names.front();
      if (a.params > 1) names += fmt::format(" ... {} ({} parameters)", a.names.back(), a.params);
      const std::size_t draws = verbose_draws(a);
      read_lines.push_back(fmt::format(
          "herd-diagnose: {}: {} chain{} x {} draw{}{}\n", names, a.chains, a.chains == 1 ? "" : "s", draws,
          draws == 1 ? "" : "s",
          a.weights.empty() ? "" : fmt::format(" (from up to {} weighted compact rows per chain)", a.draws)));
    }
    // Several text files are the chains, in order: the note names the first bad draw's file.
    const std::vector<std::string> nan_notes =
        non_finite_notes(rows, !h5 && files.size() > 1 ? files : std::vector<std::string>{});
    std::vector<herd::mcmc::ReportVerdict> verdicts;
    for (const Verdicts& g : groups)
      for (auto& v : herd::mcmc::convergence_verdicts(g.names, g.summary, g.chains, std::nan(""), kRunLonger, g.nested,
                                                      stored.superchains))
        verdicts.push_back(std::move(v));
    if (json_diagnostics) {
      if (h5) sampler.input.format = "hdf5";
      // Every line stderr gives, in its order, without its prefix.
      std::vector<std::string> warnings = sampler_warnings, notes;
      for (const auto& n : input_notes) notes.push_back(n.starts_with("note: ") ? n.substr(6) : n);
      notes.insert(notes.end(), nan_notes.begin(), nan_notes.end());
      for (const auto& v : verdicts) {
        if (v.level >= 2) warnings.push_back(v.text);
        else if (v.level == 1) notes.push_back(v.text);
      }
      print_json_diagnostics(rows, sampler, arrays.empty() ? 0 : verbose_draws(arrays.front()), warnings, notes);
    } else if (json) {
      print_json(rows);
    } else {
      print_table(rows);
    }
    for (const auto& l : read_lines) std::fputs(l.c_str(), stderr);
    for (const auto& n : nan_notes) std::fprintf(stderr, "herd-diagnose: note: %s\n", n.c_str());
    for (const auto& v : verdicts) {
      if (v.level >= 2) std::fprintf(stderr, "WARNING: %s\n", v.text.c_str());
      else if (v.level == 1) std::fprintf(stderr, "herd-diagnose: note: %s\n", v.text.c_str());
    }
    if (!html.empty()) {
      write_html(files, arrays, rows, stored, sampler_warnings, input_notes, html);
      if (!json && !json_diagnostics) std::printf("wrote %s\n", html.c_str());
    }
    return stdout_written(json_diagnostics || json ? "the JSON" : "the table") ? 0 : 1;
  } catch (const herd::InputError& e) {
    std::fprintf(stderr, "herd-diagnose: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(
        stderr, "herd-diagnose: error: %s\n",
        herd::error_text(e, "reading the draws of " + (files.empty() ? std::string("the input") : files[0])).c_str());
    return 1;
  }
}

}  // namespace

int main(int argc, char** argv) { return herd::apps::guarded_main("herd-diagnose", run_main, argc, argv); }

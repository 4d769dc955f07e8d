// The HTML report of MCMC draws: the sampler's course from a compact chain, the convergence
// verdicts, and the report's plots (posterior_report.hpp).
#include <fmt/format.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <array>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "herd/core/error.hpp"
#include "herd/core/rng.hpp"
#include "herd/mcmc/paradram_run.hpp"
#include "herd/mcmc/posterior_report.hpp"
#include "posterior_report_detail.hpp"

using namespace herd::mcmc;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

namespace {

std::string fmt_quantity(std::size_t q) { return "cannot read quantity " + std::to_string(q); }

/// The report's refusal of a chain's weights.
std::string fmt_chain_sum(std::size_t c, std::size_t sum, std::size_t draws) {
  return "the state weights of chain " + std::to_string(c) + " sum to " + std::to_string(sum) + ", not " +
         std::to_string(draws) + " draws";
}

/// Writes a compact record (step, weight, adaptation measure) into `c`.
void add(MemoryChainSink& c, std::uint64_t step, std::int64_t weight, double adapt) {
  const double p[1] = {0.0};
  ChainRecord r;
  r.step = step;
  r.weight = weight;
  r.adapt_measure = adapt;
  r.point = p;
  r.ndim = 1;
  c.write(r);
}

/// Figures of a report: data-name -> (series, points) from the embedded Vega specs.
std::map<std::string, std::pair<int, int>> figures(const std::string& html) {
  std::map<std::string, std::pair<int, int>> out;
  const std::string open = "<figure id=\"fig";
  for (std::size_t p = html.find(open); p != std::string::npos; p = html.find(open, p + 1)) {
    const std::size_t n = html.find("data-name=\"", p) + 11;
    const std::string name = html.substr(n, html.find('"', n) - n);
    const std::size_t s = html.find("class=\"herd-vega\"", p);
    const std::size_t b = html.find('>', s) + 1;
    std::string json = html.substr(b, html.find("</script>", b) - b);
    for (std::size_t k = json.find("<\\/"); k != std::string::npos; k = json.find("<\\/", k)) json.replace(k, 3, "</");
    const auto spec = nlohmann::json::parse(json);
    int series = 0, points = 0;
    for (const auto& d : spec["data"])
      if (d.contains("herd_series")) ++series, points += d["herd_points"].get<int>();
    out[name] = {series, points};
  }
  return out;
}

}  // namespace

TEST_CASE("chain_history counts acceptances and the largest adaptation measure per window of proposals", "[mcmc]") {
  MemoryChainSink c;
  c.begin(3, 1);
  add(c, 0, 2, 0.5);                           // start state: stays for proposals 1, 2 (not an acceptance)
  add(c, 2, 3, 0.25);                          // accepted at proposal 2 (window 0)
  add(c, 5, 1, 0.125);                         // accepted at proposal 5 (window 1)
  add(c, 6, 4, 0.0);                           // accepted at proposal 6 (window 1); the chain ends after proposal 9
  const ChainHistory h = chain_history(c, 3);  // 9 proposals: windows of 3
  CHECK(h.chain_id == 3);
  REQUIRE(h.proposals == std::vector<double>{3, 6, 9});
  CHECK(h.acceptance == std::vector<double>{1.0 / 3, 2.0 / 3, 0.0});
  CHECK(h.adaptation[0] == 0.25);
  CHECK(h.adaptation[1] == 0.125);
  CHECK(std::isnan(h.adaptation[2]));
}

TEST_CASE("convergence verdicts name R-hat, ESS and acceptance problems with what to try", "[mcmc]") {
  // Two chains of 200 iid normals, the second shifted by `shift`; fixed seed.
  const herd::RngStream rng(20240601, 0);
  std::vector<double> good(400), apart(400);
  for (std::size_t i = 0; i < 400; ++i) {
    const double z = rng.normal(i);
    good[i] = z;
    apart[i] = z + (i >= 200 ? 3.0 : 0.0);
  }
  PosteriorReportData d;
  d.names = {"mu"};
  d.chains = 2;
  d.draws = 200;
  d.values = {good};
  d.acceptance_rate = 0.3;
  std::vector<DiagnosticSummary> s{summarize(DrawsView(good, 2, 200))};
  auto v = convergence_verdicts(d, s);
  REQUIRE(v.size() == 1);
  CHECK(v[0].level == 0);
  CHECK_THAT(v[0].text, Contains("at least 200"));  // 100 per chain for 2 chains

  s = {summarize(DrawsView(apart, 2, 200))};
  d.acceptance_rate = 0.01;
  v = convergence_verdicts(d, s);
  REQUIRE(v.size() == 3);
  CHECK(v[0].level == 3);
  CHECK_THAT(v[0].text, Contains("R-hat is above 1.01 for mu") && Contains("chain_size"));
  CHECK(v[1].level == 2);
  CHECK_THAT(v[1].text, Contains("ESS is below 200 (100 per chain for 2 chains) for mu"));
  CHECK(v[2].level == 2);
  CHECK_THAT(v[2].text,
             Contains("0.01, below 0.05") && Contains("scale_factor") && Contains("delayed_rejection_count"));

  s = {summarize(DrawsView(good, 2, 200))};
  d.acceptance_rate = 0.93;
  v = convergence_verdicts(d, s);
  REQUIRE(v.size() == 1);
  CHECK(v[0].level == 2);
  CHECK_THAT(v[0].text, Contains("above 0.8"));

  // With superchains, nested R-hat is judged instead of R-hat (many short chains): R-hat's
  // excess alone is a note; nested R-hat above the limit is the problem.
  s = {summarize(DrawsView(apart, 2, 200))};
  d.acceptance_rate = 0.3;
  const std::vector<double> nested_ok{1.004}, nested_bad{1.05};
  v = convergence_verdicts(d.names, s, d.chains, d.acceptance_rate, "raise chain_size", nested_ok, 2);
  REQUIRE(v.size() == 2);
  CHECK(v[0].level == 2);  // the ESS
  CHECK(v[1].level == 1);
  CHECK_THAT(v[1].text,
             Contains("R-hat is above 1.01 for mu (") && Contains("but nested R-hat over 2 superchains is not"));
  const std::vector<DiagnosticSummary> fine{summarize(DrawsView(good, 2, 200))};
  v = convergence_verdicts(d.names, fine, d.chains, d.acceptance_rate, "raise chain_size", nested_ok, 2);
  REQUIRE(v.size() == 1);
  CHECK(v[0].level == 0);
  CHECK_THAT(v[0].text, StartsWith("Nested R-hat over 2 superchains is at most 1.01"));
  v = convergence_verdicts(d.names, s, d.chains, d.acceptance_rate, "raise chain_size", nested_bad, 2);
  REQUIRE(v.size() == 2);
  CHECK(v[0].level == 3);
  CHECK_THAT(v[0].text, Contains("Nested R-hat over 2 superchains of 1 chains") &&
                            Contains("is above 1.01 for mu (1.050)") && Contains("raise chain_size"));
  CHECK_THAT(v[0].text, !Contains("R-hat is above 1.01 for mu"));
  // A NaN nested R-hat (not computed for the quantity) falls back to R-hat.
  const std::vector<double> nested_nan{std::numeric_limits<double>::quiet_NaN()};
  v = convergence_verdicts(d.names, s, d.chains, d.acceptance_rate, "raise chain_size", nested_nan, 2);
  REQUIRE(!v.empty());
  CHECK(v[0].level == 3);
  CHECK_THAT(v[0].text, StartsWith("R-hat is above 1.01 for mu"));
}

// 4 chains of 1 draw each: every R-hat and ESS is NA. The report said "OK: R-hat is at most
// 1.01 and bulk- and tail-ESS at least 400 for every quantity with defined diagnostics" (in
// green, there being none) and the terminal warned of nothing.
TEST_CASE("no verdict of OK when no quantity has defined diagnostics", "[mcmc]") {
  DiagnosticSummary na;  // too few draws: NaN R-hat and ESS
  na.rhat = na.ess_bulk = na.ess_tail = std::numeric_limits<double>::quiet_NaN();
  DiagnosticSummary fine;
  fine.rhat = 1.0;
  fine.ess_bulk = fine.ess_tail = 1000.0;
  const std::vector<std::string> names{"x1", "x2"};
  auto v = convergence_verdicts(names, {na, na}, 4, 0.3, "raise chain_size", {}, 0);
  REQUIRE(v.size() == 1);
  CHECK(v[0].level == 2);
  CHECK_THAT(v[0].text, StartsWith("R-hat and ESS are undefined (NA) for every quantity (x1, x2)") &&
                            Contains("cannot be judged") && Contains("raise chain_size"));
  // The terminal and _report.txt get it as a WARNING.
  std::vector<QuantitySummary> rows(2);
  rows[0].name = "x1";
  rows[1].name = "x2";
  rows[0].stats = rows[1].stats = na;
  CHECK_THAT(convergence_warnings(rows, 4, 0.3), StartsWith("WARNING: R-hat and ESS are undefined (NA) for every"));
  // One quantity judged (the other constant, say): OK for it, a note for the other.
  v = convergence_verdicts(names, {fine, na}, 4, 0.3, "raise chain_size", {}, 0);
  REQUIRE(v.size() == 2);
  CHECK(v[0].level == 0);
  CHECK(v[1].level == 1);
  CHECK_THAT(v[1].text, StartsWith("R-hat or ESS is undefined (NA) for x2:"));
}

// R-hat 1.0102 read "R-hat is above 1.01 for x1 (1.010)" and "1.01" in the table's red row
// ("Rows in red have R-hat > 1.01"); an ESS of 399.6 read "below 400 ... (400)".
TEST_CASE("numbers beside a limit show on which side of it they are", "[mcmc]") {
  DiagnosticSummary close;
  close.mean = close.sd = close.q5 = close.q50 = close.q95 = close.mcse_mean = close.mcse_sd = 1.0;
  close.rhat = 1.0102;
  close.ess_bulk = 399.6;
  close.ess_tail = 5000.0;
  DiagnosticSummary fine = close;
  fine.rhat = 1.0003;
  fine.ess_bulk = 1234.4;
  const std::vector<std::string> names{"x1", "x2"};
  const auto v = convergence_verdicts(names, {close, fine}, 4, 0.3, "raise chain_size", {}, 0);
  REQUIRE(v.size() == 2);
  CHECK_THAT(v[0].text, StartsWith("R-hat is above 1.01 for x1 (1.0102):"));
  CHECK_THAT(v[1].text, Contains("below 400 (100 per chain for 4 chains) for x1 (399.6)"));
  // Far from the limit the usual digits: 3 decimals in the verdict, as before.
  DiagnosticSummary far = close;
  far.rhat = 1.05;
  CHECK_THAT(convergence_verdicts({"x1"}, {far}, 4, 0.3, "raise chain_size", {}, 0)[0].text,
             Contains("for x1 (1.050):"));
  // The table: R-hat with 4 decimals (the terminal's), more beside the limit.
  PosteriorReportData d;
  d.names = names;
  d.chains = 4;
  d.draws = 10;
  d.acceptance_rate = 0.3;
  d.summary = {close, fine};
  std::vector<double> draws(40);
  for (std::size_t i = 0; i < 40; ++i) draws[i] = static_cast<double>(i % 7);
  d.values = {draws, draws};
  const std::string html = posterior_report_html(d);
  CHECK_THAT(html, Contains("<td>399.6</td><td>5000</td><td>1.0102</td></tr>"));
  CHECK_THAT(html, Contains("<td>1234</td><td>5000</td><td>1.0003</td></tr>"));
}

// Many short chains are judged on nested R-hat: the table had no such column (a note sent the
// reader to _report.txt) and coloured a row red for R-hat > 1.01 beside a verdict of OK.
TEST_CASE("with superchains the summary table shows nested R-hat and colours rows by it", "[mcmc]") {
  DiagnosticSummary s;
  s.mean = s.sd = s.q5 = s.q50 = s.q95 = s.mcse_mean = s.mcse_sd = 1.0;
  s.rhat = 1.05;  // each short chain's halves disagree
  s.ess_bulk = s.ess_tail = 5000.0;
  PosteriorReportData d;
  d.names = {"x1", "x2"};
  d.chains = 16;
  d.draws = 10;
  d.acceptance_rate = 0.3;
  d.summary = {s, s};
  d.superchains = 4;
  d.nested_rhat = {1.004, 1.03};
  std::vector<double> draws(160);
  for (std::size_t i = 0; i < 160; ++i) draws[i] = static_cast<double>(i % 7);
  d.values = {draws, draws};
  const std::string html = posterior_report_html(d);
  CHECK_THAT(html, Contains("<th>rhat</th><th>nested_rhat</th></tr>"));
  CHECK_THAT(html, Contains("<tr><td>x1</td>") && Contains("<td>1.0500</td><td>1.0040</td></tr>"));
  CHECK_THAT(html, Contains("<tr class=\"problem\"><td>x2</td>") && Contains("<td>1.0500</td><td>1.0300</td></tr>"));
  CHECK_THAT(html, Contains("Rows in red have nested R-hat &gt; 1.01") &&
                       Contains("nested R-hat over 4 superchains of 4 chains"));
  // Without superchains: no such column, rows coloured by R-hat.
  d.superchains = 0;
  d.nested_rhat.clear();
  const std::string plain = posterior_report_html(d);
  CHECK_THAT(plain, !Contains("nested_rhat") && Contains("<tr class=\"problem\"><td>x1</td>"));
}

// The rank plot's caption wrote the draws per bin with {:.4g}: "1.488e+04" for long chains.
TEST_CASE("the rank plot's caption gives the draws per bin in whole draws", "[mcmc]") {
  PosteriorReportData d;
  d.names = {"x1"};
  d.chains = 2;
  d.draws = 300000;
  std::vector<double> many(2 * 300000);
  for (std::size_t i = 0; i < many.size(); ++i) many[i] = static_cast<double>(i % 101);
  d.values = {many};
  CHECK_THAT(posterior_report_html(d), Contains("(15000 draws per bin)"));
  d.draws = 1224;  // below 100 per bin: as before
  many.resize(2 * 1224);
  d.values = {many};
  CHECK_THAT(posterior_report_html(d), Contains("(61.2 draws per bin)"));
}

// 4 chains of 1 draw each (chain_size = 3): the trace panels were empty, a line through
// one point drawing nothing.
TEST_CASE("a trace of one draw per chain draws points", "[mcmc]") {
  const auto trace_marks = [](std::size_t draws) {
    PosteriorReportData d;
    d.names = {"x1"};
    d.chains = 4;
    d.draws = draws;
    std::vector<double> v(4 * draws);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i);
    d.values = {v};
    const std::string html = posterior_report_html(d);
    const std::size_t f = html.find("data-name=\"trace\"");
    REQUIRE(f != std::string::npos);
    const std::size_t b = html.find('>', html.find("class=\"herd-vega\"", f)) + 1;
    std::string json = html.substr(b, html.find("</script>", b) - b);
    for (std::size_t i = json.find("<\\/"); i != std::string::npos; i = json.find("<\\/", i)) json.replace(i, 3, "</");
    std::set<std::string> types;
    const auto spec = nlohmann::json::parse(json);
    for (const auto& m : spec["marks"][0]["marks"]) types.insert(m["type"].get<std::string>());
    return types;
  };
  CHECK(trace_marks(1).count("symbol") == 1);
  CHECK(trace_marks(1).count("line") == 0);
  CHECK(trace_marks(50).count("line") == 1);
  CHECK(trace_marks(50).count("symbol") == 0);
}

// The corner plot's cells were 900 / k px (90 for 10 coordinates): with each column's axes
// and padding (about 81 px more) the 6- and 10-coordinate grids were 1380 and 1690 px wide,
// past the page's 1200 px, their last columns scrolled out of view.
TEST_CASE("the corner plot fits the page's width for up to 8 coordinates", "[mcmc]") {
  const auto corner_cell = [](std::size_t k) {
    PosteriorReportData d;
    d.chains = 1;
    d.draws = 200;
    std::vector<std::vector<double>> cols(k, std::vector<double>(200));
    for (std::size_t q = 0; q < k; ++q) {
      d.names.push_back(fmt::format("x{}", q + 1));
      for (std::size_t i = 0; i < 200; ++i) cols[q][i] = std::sin(static_cast<double>(i * (q + 1)));
    }
    for (const auto& c : cols) d.values.emplace_back(c);
    const std::string html = posterior_report_html(d);
    const std::size_t f = html.find("data-name=\"corner\"");
    REQUIRE(f != std::string::npos);
    const std::size_t b = html.find('>', html.find("class=\"herd-vega\"", f)) + 1;
    std::string json = html.substr(b, html.find("</script>", b) - b);
    for (std::size_t i = json.find("<\\/"); i != std::string::npos; i = json.find("<\\/", i)) json.replace(i, 3, "</");
    const auto spec = nlohmann::json::parse(json);
    REQUIRE(spec["marks"].size() == k * k);
    return spec["marks"][0]["encode"]["update"]["width"]["value"].get<int>();
  };
  CHECK(corner_cell(2) == 170);
  CHECK(corner_cell(4) == 170);
  for (std::size_t k : {5, 6, 8}) {
    INFO(k);
    CHECK(static_cast<int>(k) * (corner_cell(k) + 81) <= 1160);
  }
  CHECK(corner_cell(10) == 60);
}

// With 8 to 64 chains the warning said "below 400 (100 per chain for 4 chains)": the run had
// more chains than it named. The threshold is 100 per chain up to 4 chains, 400 with more.
TEST_CASE("the ESS warning states the threshold applied and the run's chain count", "[mcmc]") {
  DiagnosticSummary low;
  low.rhat = 1.0;
  low.ess_bulk = 50.0;
  low.ess_tail = 60.0;
  const std::vector<std::string> names{"mu"};
  const std::vector<DiagnosticSummary> s{low};
  const auto ess_text = [&](std::size_t chains) {
    for (const auto& v : convergence_verdicts(names, s, chains, 0.3, "raise chain_size", {}, 0))
      if (v.text.rfind("Bulk- or tail-ESS", 0) == 0) return v.text;
    return std::string();
  };
  CHECK_THAT(ess_text(1), StartsWith("Bulk- or tail-ESS is below 100 (100 per chain for 1 chain) for mu (50)"));
  CHECK_THAT(ess_text(3), StartsWith("Bulk- or tail-ESS is below 300 (100 per chain for 3 chains) for mu (50)"));
  CHECK_THAT(ess_text(4), StartsWith("Bulk- or tail-ESS is below 400 (100 per chain for 4 chains) for mu (50)"));
  for (const std::size_t chains : {5, 8, 64}) {
    INFO(chains << " chains");
    CHECK_THAT(ess_text(chains), StartsWith(fmt::format("Bulk- or tail-ESS is below 400 (for {} chains: 100 per "
                                                        "chain up to 4 chains, 400 in all with more) for mu (50)",
                                                        chains)));
    CHECK_THAT(ess_text(chains), !Contains("for 4 chains"));
  }
  // An ESS of 400 or more passes with any number of chains from 4 on.
  DiagnosticSummary ok = low;
  ok.ess_bulk = ok.ess_tail = 400.0;
  CHECK(convergence_verdicts(names, {ok}, 64, 0.3, "raise chain_size", {}, 0).front().level == 0);
}

TEST_CASE("write_posterior_report: every plot with its series and points; bad sizes refused", "[mcmc]") {
  const herd::RngStream rng(7, 1);
  const std::size_t chains = 3, draws = 5000;  // thinned to at most 1000 per trace
  std::vector<double> a(chains * draws), b(chains * draws);
  for (std::size_t i = 0; i < a.size(); ++i) {
    a[i] = rng.normal(2 * i);
    b[i] = 0.5 * a[i] + rng.normal(2 * i + 1);
  }
  PosteriorReportData d;
  d.title = "t";
  d.names = {"a", "b"};
  d.chains = chains;
  d.draws = draws;
  d.values = {a, b};
  MemoryChainSink c;
  c.begin(0, 1);
  for (std::uint64_t k = 0; k < 100; ++k) add(c, 3 * k, 3, 1.0 / (k + 1));
  for (std::size_t k = 0; k < chains; ++k) d.history.push_back(chain_history(c, 50));
  d.start_covariance = {1, 0, 0, 1};
  d.final_covariances = {{"final", {1, 0.5, 0.5, 1.25}}};
  const auto path = (std::filesystem::temp_directory_path() / "herd_test_posterior_report.html").string();
  write_posterior_report(path, d);
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  const auto f = figures(ss.str());
  std::filesystem::remove(path);
  CHECK(f.at("trace").first == 6);
  // thin_indices(5000, 1000): every 6th draw (834) and the last one, per chain and quantity.
  CHECK(f.at("trace").second == 6 * 835);
  CHECK(f.at("density").first == 8);  // 3 chains + pooled, 2 quantities
  CHECK(f.at("density").second == 8 * 128);
  CHECK(f.at("corner").first == 3);
  CHECK(f.at("rank").first == 6);
  CHECK(f.at("rank").second == 6 * 21);
  CHECK(f.at("autocorrelation").first == 6);
  // Its caption names the method used (it said FFT; the panels are direct sums).
  CHECK_THAT(ss.str(), Contains("by lag (direct sums about the chain&#39;s mean)") && !Contains("(FFT)"));
  CHECK(f.at("acceptance") == std::pair<int, int>{3, 3 * 50});
  CHECK(f.at("covariance").first == 4);  // draws, posterior, start, final
  // At most 1000 thinned draws and three 97-point ellipses.
  CHECK(f.at("covariance").second > 900 + 3 * 97);
  CHECK(f.at("covariance").second <= 1000 + 3 * 97);

  d.values = {a};
  CHECK_THROWS_AS(write_posterior_report(path, d), herd::InputError);
  CHECK_FALSE(std::filesystem::exists(path));
}

namespace {

/// The text of a file.
std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

TEST_CASE("write_posterior_report: draws through fill_values give the values' file byte for byte, two at a time",
          "[mcmc]") {
  // 18 quantities (more than the 16 plotted), 7 sampled coordinates (a 7 x 7 corner plot and
  // 3 covariance slices), correlated normals; 3 chains (rank plots) or 1.
  const std::size_t chains = GENERATE(std::size_t{3}, std::size_t{1});
  const bool given_summary = GENERATE(true, false);
  const std::size_t nq = 18, draws = 2000;
  const herd::RngStream rng(11, 2);
  std::vector<std::vector<double>> cols(nq, std::vector<double>(chains * draws));
  for (std::size_t i = 0; i < chains * draws; ++i)
    for (std::size_t q = 0; q < nq; ++q)
      cols[q][i] = (q > 0 ? 0.6 * cols[q - 1][i] : 0.0) + rng.normal(i * nq + q) + static_cast<double>(q);
  PosteriorReportData d;
  d.title = "fill_values";
  d.chains = chains;
  d.draws = draws;
  d.sampled = 7;
  for (std::size_t q = 0; q < nq; ++q) {
    d.names.push_back(std::to_string(q));  // (not "q" + ...: GCC 12 warns falsely of an overlapping memcpy)
    if (given_summary) d.summary.push_back(summarize(DrawsView(cols[q], chains, draws)));
  }
  d.start_covariance.assign(49, 0.0);
  for (std::size_t j = 0; j < 7; ++j) d.start_covariance[j * 8] = 1.0;
  d.final_covariances = {{"final", d.start_covariance}};
  const auto dir = std::filesystem::temp_directory_path();
  const auto by_values = (dir / "herd_test_report_values.html").string();
  const auto by_fill = (dir / "herd_test_report_fill.html").string();

  for (const auto& c : cols) d.values.emplace_back(c);
  write_posterior_report(by_values, d);
  d.values.clear();

  // The filler counts its calls per quantity and the buffers it is handed: the report may
  // hold at most two quantities' draws, so it must hand over at most two distinct buffers,
  // each empty or holding an earlier quantity's draws, and ask for each quantity once, in order.
  std::vector<int> calls(nq, 0);
  std::map<const std::vector<double>*, std::size_t> buffers;  // buffer -> the quantity it holds
  std::size_t last = 0;
  bool in_order = true, reused_clean = true;
  d.fill_values = [&](std::size_t q, std::vector<double>& out) {
    in_order = in_order && (q == 0 || q > last);
    last = q;
    ++calls.at(q);
    const auto it = buffers.find(&out);
    if (it == buffers.end()) reused_clean = reused_clean && out.empty();
    else reused_clean = reused_clean && out == cols[it->second];
    buffers[&out] = q;
    out = cols[q];
  };
  write_posterior_report(by_fill, d);
  const std::string a = slurp(by_values), b = slurp(by_fill);
  std::filesystem::remove(by_values);
  std::filesystem::remove(by_fill);
  REQUIRE(a.size() > 100000);
  CHECK(a == b);
  CHECK(buffers.size() == 2);
  CHECK(in_order);
  CHECK(reused_clean);
  // Every quantity once when the summary is computed here; else the 16 plotted ones only.
  for (std::size_t q = 0; q < nq; ++q) CHECK(calls[q] == (given_summary && q >= kPlotQuantities ? 0 : 1));
  // The document built without writing it is the file's bytes (herd-sample builds it while
  // the .h5 is written and stores it afterwards).
  CHECK(posterior_report_html(d) == b);
  // On several threads (pairs of quantities in turn): the same bytes, each quantity asked for
  // once, each thread's calls in increasing order, at most 2 buffers per thread.
  for (const std::size_t threads : {2, 3, 40}) {
    INFO("threads " << threads);
    std::mutex mu;
    std::vector<int> asked(nq, 0);
    std::map<std::thread::id, std::pair<std::size_t, std::set<const std::vector<double>*>>> per_thread;
    bool ordered = true;
    d.threads = threads;
    d.fill_values = [&](std::size_t q, std::vector<double>& out) {
      {
        const std::lock_guard<std::mutex> lock(mu);
        auto& [previous, bufs] = per_thread[std::this_thread::get_id()];
        ordered = ordered && (bufs.empty() || q > previous);
        previous = q;
        bufs.insert(&out);
        ++asked.at(q);
      }
      out = cols[q];
    };
    CHECK(posterior_report_html(d) == b);
    CHECK(ordered);
    CHECK(per_thread.size() <= threads);
    for (const auto& [id, pb] : per_thread) CHECK(pb.second.size() <= 2);
    for (std::size_t q = 0; q < nq; ++q) CHECK(asked[q] == (given_summary && q >= kPlotQuantities ? 0 : 1));
  }
  // The error of the lowest failing quantity propagates, whichever thread meets it first.
  d.threads = 4;
  d.fill_values = [&](std::size_t q, std::vector<double>& out) {
    if (q == 5 || q == 9) throw herd::IoError(fmt_quantity(q));
    out = cols[q];
  };
  CHECK_THROWS_WITH(posterior_report_html(d), Contains("quantity 5"));
}

TEST_CASE("write_posterior_report: fill_values errors refused, no file written", "[mcmc]") {
  const std::size_t chains = 2, draws = 50;
  std::vector<double> x(chains * draws);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(static_cast<double>(i));
  PosteriorReportData d;
  d.names = {"x", "y"};
  d.chains = chains;
  d.draws = draws;
  const auto path = (std::filesystem::temp_directory_path() / "herd_test_report_fill_errors.html").string();
  std::filesystem::remove(path);
  // Neither values nor fill_values.
  CHECK_THROWS_WITH(write_posterior_report(path, d), Contains("0 quantities but 2 names"));
  // Both.
  d.values = {x, x};
  d.fill_values = [&](std::size_t, std::vector<double>& out) { out = x; };
  CHECK_THROWS_WITH(write_posterior_report(path, d), Contains("both values and fill_values"));
  d.values.clear();
  // A short quantity.
  d.fill_values = [&](std::size_t q, std::vector<double>& out) {
    out = x;
    if (q == 1) out.pop_back();
  };
  CHECK_THROWS_WITH(write_posterior_report(path, d), Contains("quantity y has 99 draws, not 2 x 50"));
  // The filler's own error propagates.
  d.fill_values = [](std::size_t, std::vector<double>&) { throw herd::IoError("cannot read the chain"); };
  CHECK_THROWS_AS(write_posterior_report(path, d), herd::IoError);
  CHECK_FALSE(std::filesystem::exists(path));
}

TEST_CASE("binned_quantiles: the numbers of quantiles(), with ties, odd and even sizes, bunched draws", "[mcmc]") {
  using herd::mcmc::detail::binned_quantiles;
  using herd::mcmc::detail::kBinnedQuantilesMin;
  const herd::RngStream rng(20261205, 7);
  // The report's probabilities (quartiles, rank cuts), the ends, and uneven ones.
  std::vector<double> probs{0.25, 0.75, 0.0, 1.0, 0.5, 1e-9, 1.0 - 1e-9, 0.3333333333, 0.05, 0.95};
  for (std::size_t b = 1; b < 20; ++b) probs.push_back(static_cast<double>(b) / 20);
  for (std::size_t k = 0; k < 12; ++k) probs.push_back(rng.uniform(1000000 + k));
  const double inf = std::numeric_limits<double>::infinity();
  int compared = 0;
  for (const std::size_t n : {std::size_t{100}, kBinnedQuantilesMin - 1, kBinnedQuantilesMin, std::size_t{10001},
                              std::size_t{65536}, std::size_t{250001}})
    for (std::size_t kind = 0; kind < 6; ++kind) {
      std::vector<double> x(n);
      for (std::size_t i = 0; i < n; ++i) {
        const double z = rng.normal(kind * 10000000 + i);
        // Distinct values; many ties; bunched near 0 with long tails; one far outlier per 1000;
        // a third tied, the rest within 1e-15 of each other; 7 values in long runs.
        const std::array<double, 6> v{z,
                                      std::round(4.0 * z) / 4.0,
                                      z * z * z * z * z * z,
                                      i % 1000 == 0 ? 1e12 : z,
                                      i % 3 == 0 ? 2.0 : 1.0 + 1e-15 * z,
                                      static_cast<double>(i % 7)};
        x[i] = v.at(kind);
      }
      const auto want = quantiles(x, probs), got = binned_quantiles(x, probs);
      REQUIRE(got.size() == want.size());
      for (std::size_t k = 0; k < probs.size(); ++k) {
        INFO("n " << n << " kind " << kind << " prob " << probs[k]);
        // Bit for bit, but for the sign of a zero: -0 and +0 are a tie, and which of them an
        // order statistic is depends on the order of selection in quantiles() itself.
        CHECK((std::bit_cast<std::uint64_t>(got[k]) == std::bit_cast<std::uint64_t>(want[k]) ||
               (got[k] == 0.0 && want[k] == 0.0)));
        ++compared;
      }
    }
  CHECK(compared == 6 * 6 * static_cast<int>(probs.size()));
  // sample_range: min, max and whether all are finite, NaNs skipped.
  using herd::mcmc::detail::sample_range;
  std::vector<double> r{3.0, -1.0, 7.0, 2.0, 5.0, -4.0, 0.5};
  auto sr = sample_range(r);
  CHECK((sr.min == -4.0 && sr.max == 7.0 && sr.finite));
  r[2] = std::numeric_limits<double>::quiet_NaN();
  sr = sample_range(r);
  CHECK((sr.min == -4.0 && sr.max == 5.0 && !sr.finite));
  r[2] = -inf;
  sr = sample_range(r);
  CHECK((sr.min == -inf && sr.max == 5.0 && !sr.finite));
  CHECK_FALSE(sample_range(std::vector<double>{}).finite);
  // The fallbacks: constant, a NaN (NaN results), an infinity, and the errors of quantiles().
  std::vector<double> c(kBinnedQuantilesMin + 1, 3.5);
  CHECK(binned_quantiles(c, probs) == std::vector<double>(probs.size(), 3.5));
  c[17] = 4.0;
  CHECK(binned_quantiles(c, std::vector<double>{0.0, 1.0}) == std::vector<double>{3.5, 4.0});
  c[18] = inf;
  CHECK(binned_quantiles(c, std::vector<double>{0.5, 1.0}) == std::vector<double>{3.5, inf});
  c[19] = std::numeric_limits<double>::quiet_NaN();
  for (double q : binned_quantiles(c, std::vector<double>{0.5})) CHECK(std::isnan(q));
  CHECK(binned_quantiles(c, std::vector<double>{}).empty());
  CHECK_THROWS_AS(binned_quantiles(c, std::vector<double>{0.5, 1.5}), herd::InputError);
  CHECK_THROWS_AS(binned_quantiles(std::vector<double>{}, std::vector<double>{0.5}), herd::InputError);
}

TEST_CASE("RepeatedCovariance: the expanded draws' covariance bit for bit, from weighted states", "[mcmc]") {
  // Weighted states (weights 1..9 and some large ones), their expansion into draws, and the
  // full-matrix sums over every draw in order, as the report summed them before: the packed
  // lower triangle mirrored gives the same doubles, every element.
  const std::size_t d = GENERATE(std::size_t{1}, std::size_t{3}, std::size_t{10});
  const std::size_t states = 3000;
  const herd::RngStream rng(20261205, 31);
  std::vector<double> points(states * d);
  std::vector<std::int64_t> weights(states);
  for (std::size_t s = 0; s < states; ++s) {
    for (std::size_t j = 0; j < d; ++j)
      points[s * d + j] = rng.normal(s * d + j) * static_cast<double>(j + 1) + 0.3 * static_cast<double>(j);
    weights[s] = s % 97 == 0 ? 40 + static_cast<std::int64_t>(s % 13) : 1 + static_cast<std::int64_t>(s * 7 % 9);
  }
  std::vector<double> mean(d, 0.0);
  std::int64_t n = 0;
  for (std::size_t s = 0; s < states; ++s) {
    for (std::size_t j = 0; j < d; ++j) mean[j] += static_cast<double>(weights[s]) * points[s * d + j];
    n += weights[s];
  }
  for (auto& m : mean) m /= static_cast<double>(n);
  std::vector<double> expanded(d * d, 0.0);
  for (std::size_t s = 0; s < states; ++s)
    for (std::int64_t rep = 0; rep < weights[s]; ++rep)
      for (std::size_t i = 0; i < d; ++i)
        for (std::size_t j = 0; j < d; ++j)
          expanded[i * d + j] += (points[s * d + i] - mean[i]) * (points[s * d + j] - mean[j]);
  const double div = static_cast<double>(n) - 1.0;
  for (auto& e : expanded) e /= div;
  herd::mcmc::detail::RepeatedCovariance sums(mean);
  for (std::size_t s = 0; s < states; ++s) sums.add(points.data() + s * d, weights[s]);
  sums.add(points.data(), 0);  // weight 0 adds nothing
  const std::vector<double> cov = sums.matrix(div);
  REQUIRE(cov.size() == d * d);
  for (std::size_t e = 0; e < d * d; ++e) {
    INFO("element " << e);
    CHECK(std::bit_cast<std::uint64_t>(cov[e]) == std::bit_cast<std::uint64_t>(expanded[e]));
  }
  // A known answer too: the diagonal near the variances (j + 1)^2 of the states' draws.
  for (std::size_t j = 0; j < d; ++j)
    CHECK(cov[j * d + j] == Approx(static_cast<double>((j + 1) * (j + 1))).epsilon(0.1));
}

namespace {

/// Weighted states' draws expanded: values[i] weights[i] times.
std::vector<double> expand(const std::vector<double>& values, const std::vector<std::uint32_t>& weights) {
  std::vector<double> out;
  for (std::size_t i = 0; i < values.size(); ++i)
    out.insert(out.end(), static_cast<std::size_t>(weights[i]), values[i]);
  return out;
}

/// Bit for bit, but for the sign of a zero (a tie of -0 and +0).
bool same_bits(double a, double b) {
  return std::bit_cast<std::uint64_t>(a) == std::bit_cast<std::uint64_t>(b) || (a == 0.0 && b == 0.0);
}

}  // namespace

TEST_CASE("binned_quantiles and sample_range of weighted states: the expanded draws' numbers bit for bit", "[mcmc]") {
  using herd::mcmc::detail::binned_quantiles;
  using herd::mcmc::detail::kBinnedQuantilesMin;
  using herd::mcmc::detail::sample_range;
  const herd::RngStream rng(20261205, 41);
  std::vector<double> probs{0.25, 0.75, 0.0, 1.0, 0.5, 1e-9, 1.0 - 1e-9, 0.05, 0.95};
  for (std::size_t b = 1; b < 20; ++b) probs.push_back(static_cast<double>(b) / 20);
  for (std::size_t k = 0; k < 8; ++k) probs.push_back(rng.uniform(2000000 + k));
  int compared = 0;
  // Compact-chain-like weights (mostly 1 to 4, some long runs, zeros as padding), state
  // counts below and above kBinnedQuantilesMin draws, and the value kinds of the test above.
  for (const std::size_t states : {std::size_t{50}, std::size_t{1500}, std::size_t{9000}, std::size_t{120001}})
    for (std::size_t kind = 0; kind < 6; ++kind) {
      std::vector<double> v(states);
      std::vector<std::uint32_t> w(states);
      for (std::size_t i = 0; i < states; ++i) {
        const double z = rng.normal(kind * 10000000 + i);
        const std::array<double, 6> x{z,
                                      std::round(4.0 * z) / 4.0,
                                      z * z * z * z * z * z,
                                      i % 1000 == 0 ? 1e12 : z,
                                      i % 3 == 0 ? 2.0 : 1.0 + 1e-15 * z,
                                      static_cast<double>(i % 7)};
        v[i] = x.at(kind);
        const double u = rng.uniform(50000000 + kind * 1000000 + i);
        w[i] = u < 0.05   ? 0
               : u < 0.08 ? 20 + static_cast<std::uint32_t>(u * 1000) % 30
                          : 1 + static_cast<std::uint32_t>(u * 40) % 4;
        if (w[i] == 0) v[i] = i % 2 == 0 ? 1e300 : std::numeric_limits<double>::quiet_NaN();  // never read
      }
      const std::vector<double> x = expand(v, w);
      const auto range = sample_range(v, w);
      const auto xr = sample_range(x);
      CHECK((range.min == xr.min && range.max == xr.max && range.finite == xr.finite));
      const auto want = quantiles(x, probs), got = binned_quantiles(v, w, probs, range);
      REQUIRE(got.size() == want.size());
      for (std::size_t k = 0; k < probs.size(); ++k) {
        INFO("states " << states << " draws " << x.size() << " kind " << kind << " prob " << probs[k]);
        CHECK(same_bits(got[k], want[k]));
        ++compared;
      }
    }
  CHECK(compared == 4 * 6 * static_cast<int>(probs.size()));
  // Fallbacks on the expanded draws: a constant sample, an infinity, a NaN; errors as quantiles().
  std::vector<double> c(kBinnedQuantilesMin, 3.5);
  std::vector<std::uint32_t> cw(c.size(), 2);
  CHECK(binned_quantiles(c, cw, probs, sample_range(c, cw)) == std::vector<double>(probs.size(), 3.5));
  c[17] = std::numeric_limits<double>::infinity();
  CHECK(binned_quantiles(c, cw, std::vector<double>{0.5, 1.0}, sample_range(c, cw)) == std::vector<double>{3.5, c[17]});
  CHECK_FALSE(sample_range(c, cw).finite);
  c[18] = std::numeric_limits<double>::quiet_NaN();
  cw[18] = 0;                               // a NaN under weight 0 is not a draw
  CHECK_FALSE(sample_range(c, cw).finite);  // (the infinity still is)
  c[17] = 1.0;
  CHECK(sample_range(c, cw).finite);
  CHECK(binned_quantiles(c, cw, std::vector<double>{0.0, 1.0}, sample_range(c, cw)) == std::vector<double>{1.0, 3.5});
  cw[18] = 1;
  for (double q : binned_quantiles(c, cw, std::vector<double>{0.5}, sample_range(c, cw))) CHECK(std::isnan(q));
  CHECK_THROWS_AS(binned_quantiles(c, cw, std::vector<double>{1.5}, sample_range(c, cw)), herd::InputError);
  const std::vector<double> none;
  const std::vector<std::uint32_t> no_weights;
  CHECK_FALSE(sample_range(none, no_weights).finite);
  CHECK_THROWS_AS(binned_quantiles(none, no_weights, std::vector<double>{0.5}, sample_range(none, no_weights)),
                  herd::InputError);
}

namespace {

/// Random state weights of `chains` chains of `draws` draws each (1 to 5, now and then 40),
/// drawn from `rng`'s uniforms at c * 10^7 + i, padded with weight 0 to the longest chain's
/// state count: `weights` [chains, states], `used` the states of each chain.
struct PaddedWeights {
  std::vector<std::uint32_t> weights;
  std::size_t states = 0;
  std::vector<std::size_t> used;
};
PaddedWeights padded_weights(const herd::RngStream& rng, std::size_t chains, std::size_t draws) {
  std::vector<std::vector<std::uint32_t>> chain_w(chains);
  PaddedWeights p;
  for (std::size_t c = 0; c < chains; ++c) {
    std::size_t left = draws;
    for (std::size_t i = 0; left > 0; ++i) {
      const double u = rng.uniform(c * 10000000 + i);
      const auto w = std::min<std::size_t>(left, u < 0.02 ? 40 : 1 + static_cast<std::size_t>(u * 50) % 5);
      chain_w[c].push_back(static_cast<std::uint32_t>(w));
      left -= w;
    }
    p.states = std::max(p.states, chain_w[c].size());
  }
  p.weights.assign(chains * p.states, 0);
  for (std::size_t c = 0; c < chains; ++c) {
    std::copy(chain_w[c].begin(), chain_w[c].end(), p.weights.begin() + c * p.states);
    p.used.push_back(chain_w[c].size());
  }
  return p;
}

}  // namespace

TEST_CASE("write_posterior_report: weighted states through fill_states give the expanded draws' file byte for byte",
          "[mcmc]") {
  // 18 quantities (16 plotted), 7 sampled coordinates; compact chains: each state repeated
  // by a weight (1 to 5, some long runs), chains of different state counts padded with
  // weight 0 to a common length, every chain `draws` draws; 3 chains (rank plots) or 1.
  const std::size_t chains = GENERATE(std::size_t{3}, std::size_t{1});
  const std::size_t draws = GENERATE(std::size_t{2000}, std::size_t{70000});  // (past the 65536 autocorrelation draws)
  const std::size_t nq = 18;
  const herd::RngStream rng(20261205, 43);
  const PaddedWeights pw = padded_weights(rng, chains, draws);
  const std::size_t states = pw.states;
  const std::vector<std::uint32_t>& weights = pw.weights;
  std::vector<std::vector<double>> compact(nq, std::vector<double>(chains * states, 0.0)), cols(nq);
  for (std::size_t i = 0; i < chains * states; ++i)
    for (std::size_t q = 0; q < nq; ++q)
      compact[q][i] = weights[i] == 0 ? -7.0  // padding: never a draw
                                      : (q > 0 ? 0.6 * compact[q - 1][i] : 0.0) + rng.normal(900000000 + i * nq + q) +
                                            static_cast<double>(q) + (q == 3 ? std::round(compact[0][i]) : 0.0);
  for (std::size_t q = 0; q < nq; ++q) cols[q] = expand(compact[q], weights);
  PosteriorReportData d;
  d.title = "fill_states";
  d.chains = chains;
  d.draws = draws;
  d.sampled = 7;
  for (std::size_t q = 0; q < nq; ++q) {
    d.names.push_back(std::to_string(q));
    d.summary.push_back(summarize(DrawsView(cols[q], chains, draws)));
  }
  d.start_covariance.assign(49, 0.0);
  for (std::size_t j = 0; j < 7; ++j) d.start_covariance[j * 8] = 1.0;
  d.final_covariances = {{"final", d.start_covariance}};
  for (const auto& c : cols) d.values.emplace_back(c);
  const std::string want = posterior_report_html(d);
  REQUIRE(want.size() > 100000);
  d.values.clear();
  std::vector<int> calls(nq, 0);
  d.states = states;
  d.state_weights = weights;
  d.fill_states = [&](std::size_t q, std::vector<double>& out) {
    ++calls.at(q);
    out = compact[q];
  };
  CHECK(posterior_report_html(d) == want);
  for (std::size_t q = 0; q < nq; ++q) CHECK(calls[q] == (q >= kPlotQuantities ? 0 : 1));
  d.threads = 3;
  CHECK(posterior_report_html(d) == want);
  // Caller-kept buffers (herd-sample hands over the diagnostics' values buffers): thread t
  // fills buffers 2t and 2t + 1 as they were left (here: sized and filled by the caller), so
  // every fill writes into one of the caller's blocks, where it was; the same file.
  for (const std::size_t threads : {std::size_t{1}, std::size_t{3}}) {
    INFO("threads " << threads);
    std::vector<std::vector<double>> buffers(2 * threads, std::vector<double>(chains * states, 1.5));
    std::vector<const double*> blocks;
    blocks.reserve(buffers.size());
    for (const auto& b : buffers) blocks.push_back(b.data());
    std::mutex mu;
    std::size_t in_blocks = 0, sized = 0, fills = 0;
    d.threads = threads;
    d.buffers = &buffers;
    d.fill_states = [&](std::size_t q, std::vector<double>& out) {
      {
        const std::lock_guard<std::mutex> lock(mu);
        ++fills;
        in_blocks += std::find(blocks.begin(), blocks.end(), out.data()) != blocks.end() ? 1 : 0;
        sized += out.size() == chains * states ? 1 : 0;
      }
      out.resize(chains * states);
      std::copy(compact[q].begin(), compact[q].end(), out.begin());
    };
    CHECK(posterior_report_html(d) == want);
    CHECK(fills == std::min(nq, kPlotQuantities));
    CHECK(in_blocks == fills);
    CHECK(sized == fills);
    CHECK(buffers.size() == 2 * threads);
    for (std::size_t i = 0; i < buffers.size(); ++i) CHECK(buffers[i].data() == blocks[i]);
  }
  d.buffers = nullptr;
  d.threads = 3;
  d.fill_states = [&](std::size_t q, std::vector<double>& out) { out = compact[q]; };
  // Refused: weights that do not sum to the draws, a negative weight, a wrong size, no
  // summary, fill_states beside fill_values.
  std::vector<std::uint32_t> bad = weights;
  bad[0] += 1;
  d.state_weights = bad;
  CHECK_THROWS_WITH(posterior_report_html(d), Contains("sum to"));
  d.state_weights = std::span<const std::uint32_t>(weights).first(weights.size() - 1);
  CHECK_THROWS_WITH(posterior_report_html(d), Contains("state weights"));
  d.state_weights = weights;
  d.fill_states = [&](std::size_t q, std::vector<double>& out) { out.assign(compact[q].size() + 1, 0.0); };
  CHECK_THROWS_WITH(posterior_report_html(d), Contains("states, not"));
  d.fill_states = [&](std::size_t q, std::vector<double>& out) { out = compact[q]; };
  d.fill_values = [&](std::size_t q, std::vector<double>& out) { out = cols[q]; };
  CHECK_THROWS_WITH(posterior_report_html(d), Contains("fill_states given with"));
  d.fill_values = nullptr;
  d.summary.clear();
  CHECK_THROWS_WITH(posterior_report_html(d), Contains("needs the summary"));
}

namespace {

/// One quantity's states of one chain from `values` and `weights` ([chains, states]), read in
/// order; counts the states it read into `read`.
class VectorStates final : public PosteriorStateSource {
 public:
  VectorStates(const std::vector<double>& values, const std::vector<std::uint32_t>& weights, std::size_t first,
               std::size_t end, std::atomic<std::size_t>& read)
      : v_(values), w_(weights), i_(first), end_(end), read_(read) {}
  void read(std::span<double> values, std::span<std::uint32_t> weights) override {
    if (!(weights.empty() || weights.size() == values.size()) || i_ + values.size() > end_)
      throw std::logic_error("read: weights of another size, or past the chain's states");
    for (std::size_t j = 0; j < values.size(); ++j, ++i_) {
      values[j] = v_[i_];
      if (!weights.empty()) weights[j] = w_[i_];
    }
    read_ += values.size();
  }

 private:
  const std::vector<double>& v_;
  const std::vector<std::uint32_t>& w_;
  std::size_t i_, end_;
  std::atomic<std::size_t>& read_;
};

}  // namespace

TEST_CASE(
    "write_posterior_report: weighted states read block by block (open_states) give fill_states' file byte "
    "for byte",
    "[mcmc]") {
  // 11 quantities (all plotted), 6 sampled coordinates (corner plot, three covariance pairs):
  // AR-like draws, one with ties, one with a NaN, one with an infinity, one constant, one of
  // zeros of both signs; compact chains of weights 1 to 5 (some 40), padded with weight 0;
  // 1, 2 or 9 chains (9: more than the 8 plotted), 3000 draws per chain (fewer than the
  // binned quantiles' 4096 with one chain: the whole states) or 70000 (past the 65536
  // autocorrelation draws). Blocks of 1, 7 and 8192 states, 1 and 3 threads, the order
  // statistics given or found by the report: the same file as fill_states gives.
  const std::size_t chains = GENERATE(std::size_t{1}, std::size_t{2}, std::size_t{9});
  const std::size_t draws = GENERATE(std::size_t{3000}, std::size_t{70000});
  INFO("chains " << chains << ", draws " << draws);
  const std::size_t nq = 11;
  const herd::RngStream rng(20261206, 7);
  const PaddedWeights pw = padded_weights(rng, chains, draws);
  const std::size_t states = pw.states;
  const std::vector<std::uint32_t>& weights = pw.weights;
  const std::vector<std::size_t>& used = pw.used;
  std::vector<std::vector<double>> compact(nq, std::vector<double>(chains * states, 0.0)), cols(nq);
  for (std::size_t i = 0; i < chains * states; ++i)
    for (std::size_t q = 0; q < nq; ++q) {
      double x = (q > 0 ? 0.6 * compact[q - 1][i] : 0.0) + rng.normal(900000000 + i * nq + q) + static_cast<double>(q);
      if (q == 3) x = std::round(x);  // ties
      if (q == 6) x = 2.5;            // constant
      if (q == 8) x = rng.uniform(800000000 + i) < 0.5 ? 0.0 : -0.0;
      compact[q][i] = weights[i] == 0 ? -7.0 : x;  // padding: never a draw
    }
  compact[4][states / 2] = std::numeric_limits<double>::quiet_NaN();  // (chain 0: weight > 0)
  compact[5][states / 3] = std::numeric_limits<double>::infinity();
  for (std::size_t q = 0; q < nq; ++q) cols[q] = expand(compact[q], weights);
  PosteriorReportData d;
  d.title = "open_states";
  d.chains = chains;
  d.draws = draws;
  d.sampled = 6;
  for (std::size_t q = 0; q < nq; ++q) {
    d.names.push_back("q" + std::to_string(q));
    d.summary.push_back(summarize(DrawsView(cols[q], chains, draws)));
  }
  d.start_covariance.assign(36, 0.0);
  for (std::size_t j = 0; j < 6; ++j) d.start_covariance[j * 7] = 1.0;
  d.final_covariances = {{"final", d.start_covariance}};
  d.states = states;
  d.state_weights = weights;
  d.fill_states = [&](std::size_t q, std::vector<double>& out) { out = compact[q]; };
  const std::string want = posterior_report_html(d);
  REQUIRE(want.size() > 50000);
  d.state_weights = {};
  d.fill_states = nullptr;
  std::vector<ReportOrderStats> stats;
  for (std::size_t q = 0; q < nq; ++q) stats.push_back(report_order_stats(compact[q], weights, chains));
  std::atomic<std::size_t> read{0};
  d.open_states = [&](std::size_t q, std::size_t c, bool) -> std::unique_ptr<PosteriorStateSource> {
    return std::make_unique<VectorStates>(compact.at(q), weights, c * states, (c + 1) * states, read);
  };
  for (const std::size_t block : {std::size_t{1}, std::size_t{7}, std::size_t{0}})
    for (const std::size_t threads : {std::size_t{1}, std::size_t{3}})
      for (const bool given : {false, true}) {
        INFO("block " << block << ", threads " << threads << ", order statistics given " << given);
        d.block_states = block;
        d.threads = threads;
        d.order_stats = given ? stats : std::vector<ReportOrderStats>();
        read = 0;
        CHECK(posterior_report_html(d) == want);
        // Given the order statistics, each plotted quantity's states are read once.
        if (given) CHECK(read == nq * chains * states);
        else CHECK(read > nq * chains * states);
      }
  // Refused: weights that do not sum to the draws, open_states beside fill_states, no
  // summary, order statistics of too few quantities; what a source throws propagates.
  d.block_states = 0;
  d.order_stats.clear();
  std::vector<std::uint32_t> bad = weights;
  bad[chains * states - 1 - (states - used[chains - 1])] += 1;  // the last chain's last state
  d.open_states = [&](std::size_t q, std::size_t c, bool) -> std::unique_ptr<PosteriorStateSource> {
    return std::make_unique<VectorStates>(compact.at(q), bad, c * states, (c + 1) * states, read);
  };
  CHECK_THROWS_WITH(posterior_report_html(d), Contains(fmt_chain_sum(chains - 1, draws + 1, draws)));
  d.open_states = [&](std::size_t q, std::size_t c, bool) -> std::unique_ptr<PosteriorStateSource> {
    if (q == 5 && c + 1 == chains) throw herd::IoError("cannot read quantity 5");
    return std::make_unique<VectorStates>(compact.at(q), weights, c * states, (c + 1) * states, read);
  };
  d.threads = 3;
  CHECK_THROWS_WITH(posterior_report_html(d), Contains("cannot read quantity 5"));
  d.order_stats = stats;
  d.order_stats.resize(9);
  CHECK_THROWS_WITH(posterior_report_html(d), Contains("order_stats of 9 quantities"));
  d.order_stats.clear();
  d.fill_states = [&](std::size_t q, std::vector<double>& out) { out = compact[q]; };
  CHECK_THROWS_WITH(posterior_report_html(d), Contains("open_states given with"));
  d.fill_states = nullptr;
  d.summary.clear();
  CHECK_THROWS_WITH(posterior_report_html(d), Contains("open_states needs the summary"));
}

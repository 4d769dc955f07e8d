// Memory of the HTML report's block-by-block path (posterior_report.hpp, open_states): what
// the report holds through operator new while it reads weighted states block by block does
// not grow with the chains' length (with the order statistics given, as herd-sample gives
// them), or by the wanted quantile bins' states only (found by the report). Counted exactly
// through operator new (heap_counter.hpp, in test_chain_store.cpp), never the resident set.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "herd/mcmc/posterior_report.hpp"

namespace herd_test {
std::size_t counted_live_bytes();
std::size_t counted_peak_bytes();
void counted_reset_peak();
}  // namespace herd_test

namespace {

using namespace herd::mcmc;

std::uint64_t mix(std::uint64_t x) {  // splitmix64's finaliser
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/// Weight of state i (the same in every chain, so every chain has the same draws).
std::uint32_t weight_of(std::size_t i) { return 1 + static_cast<std::uint32_t>(mix(i) % 5); }

/// Value of quantity q on state i of chain c: a sum of four uniforms (no buffer behind it).
double value_of(std::size_t q, std::size_t c, std::size_t i) {
  double s = 0;
  for (std::uint64_t k = 0; k < 4; ++k)
    s += static_cast<double>(mix((((q * 16 + c) << 40) + i) * 4 + k) >> 11) * 0x1.0p-53;
  return s - 2.0 + 0.1 * static_cast<double>(q);
}

/// Quantity q's states of chain c, computed as they are read.
class HashStates final : public PosteriorStateSource {
 public:
  HashStates(std::size_t q, std::size_t c) : q_(q), c_(c) {}
  void read(std::span<double> values, std::span<std::uint32_t> weights) override {
    for (std::size_t j = 0; j < values.size(); ++j, ++i_) {
      values[j] = value_of(q_, c_, i_);
      if (!weights.empty()) weights[j] = weight_of(i_);
    }
  }

 private:
  std::size_t q_, c_, i_ = 0;
};

/// The bytes the report held at its peak through operator new (above what was live before),
/// for 3 chains of `states` states of 10 quantities, with the order statistics given or not.
/// On one thread: with two, the peak depends on how the threads' per-quantity buffers happen
/// to overlap in time (up to a thread's fixed part apart between runs under load), which is
/// not what is measured here; a buffer that grows with the states grows on one thread too.
std::size_t report_peak(std::size_t states, bool given) {
  constexpr std::size_t kChains = 3, kQuantities = 10;
  PosteriorReportData d;
  d.title = "memory";
  d.chains = kChains;
  d.states = states;
  for (std::size_t i = 0; i < states; ++i) d.draws += weight_of(i);
  d.sampled = kQuantities;
  d.threads = 1;
  d.start_covariance.assign(kQuantities * kQuantities, 0.0);
  for (std::size_t j = 0; j < kQuantities; ++j) {
    d.start_covariance[j * (kQuantities + 1)] = 1.0;
    d.names.push_back(std::to_string(j + 1));
    DiagnosticSummary s;
    s.mean = 0.1 * static_cast<double>(j);
    s.sd = 0.58;
    s.q5 = -0.9, s.q50 = s.mean, s.q95 = 0.9;
    s.ess_bulk = s.ess_tail = 1000;
    s.rhat = 1.0;
    d.summary.push_back(s);
  }
  if (given)
    for (std::size_t q = 0; q < kQuantities; ++q) {
      std::vector<double> v(kChains * states);
      std::vector<std::uint32_t> w(kChains * states);
      for (std::size_t c = 0; c < kChains; ++c)
        for (std::size_t i = 0; i < states; ++i) {
          v[c * states + i] = value_of(q, c, i);
          w[c * states + i] = weight_of(i);
        }
      d.order_stats.push_back(report_order_stats(v, w, kChains));
    }
  d.open_states = [](std::size_t q, std::size_t c, bool) -> std::unique_ptr<PosteriorStateSource> {
    return std::make_unique<HashStates>(q, c);
  };
  const std::size_t before = herd_test::counted_live_bytes();
  herd_test::counted_reset_peak();
  const std::string html = posterior_report_html(d);
  const std::size_t peak = herd_test::counted_peak_bytes() - before;
  REQUIRE(html.size() > 100000);
  return peak;
}

}  // namespace

TEST_CASE("HTML report from states block by block: memory flat in the chains' length", "[mcmc]") {
  // 3 chains x 100,000 and x 400,000 states (about 3 draws each), 10 quantities, 1 thread.
  // A buffer of 4 bytes per state (the weights) held by the report would add 3.6 MB between
  // the two, a quantity's values 7.2 MB.
  const std::size_t small = 100000, large = 400000, added = 3 * (large - small);
  for (const bool given : {true, false}) {
    INFO("order statistics given " << given);
    const std::size_t a = report_peak(small, given), b = report_peak(large, given);
    INFO("peak " << a << " -> " << b << " bytes");
    // The fixed part (under 6.5 MB): the blocks (8192 states), the autocorrelation's
    // first 65536 draws of each of its two quantities and their centred copy (1.5 MB), the
    // histograms; the panels and the document (about 1.2 MB, and its copies while built).
    CHECK(a < (std::size_t{8} << 20));
    if (given) {
      // Nothing grows with the states: the document's numbers differ in length, nothing else.
      CHECK(b < a + (std::size_t{64} << 10));
    } else {
      // The wanted quantile bins' (value, weight) pairs, one quantity per thread at a time: 21
      // quantiles' bins of 1/2048 of the range, 16 bytes per state in them (0.1-0.3 bytes per
      // added state here); less than 2.
      CHECK(b < a + 2 * added);
    }
  }
}

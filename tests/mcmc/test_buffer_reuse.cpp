// Caller-kept buffers of summarize_all (diagnostics.hpp): one set of large blocks serves
// several calls, handed back to the callback as left (no fresh mapping, no zero fill), with
// the results of fresh buffers. Allocations counted through the operator new that
// test_ess_memory.cpp (the same program) replaces (heap_counter.hpp).
#include <atomic>
#include <cmath>
#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include <catch2/catch.hpp>

#include "herd/mcmc/diagnostics.hpp"
#include "summary_bits.hpp"

namespace herd_test {
void counted_count_news_of(std::size_t bytes);
std::size_t counted_sized_news();
}  // namespace herd_test

namespace {
/// One chain of n draws of an AR(1) with coefficient phi (unit innovations).
std::vector<double> ar1(std::size_t n, double phi, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  std::vector<double> x(n);
  double v = normal(rng) / std::sqrt(1.0 - phi * phi);
  for (std::size_t t = 0; t < n; ++t) x[t] = v = phi * v + normal(rng);
  return x;
}
}  // namespace

TEST_CASE(
    "summarize_all over caller-kept buffers: each thread's buffer allocated once, handed back as left, the same bits",
    "[mcmc]") {
  // 5 weighted quantities of K states on 2 threads. The callback sizes the buffer it is
  // given to K and overwrites it (as herd-sample's compact_values does). With caller-kept
  // buffers of K doubles (as herd-sample's diagnostics leave them for the HTML report), two
  // calls in a row allocate no block of K doubles (counted by size through operator new),
  // every buffer reaches the callback with its K entries (not emptied: a fresh size would be
  // value-initialised), the blocks stay where they were, and the summaries are summarize()'s,
  // bit for bit. summarize_all() without them allocates blocks on every call (freed on
  // return) and hands them over empty.
  constexpr std::size_t kStates = 60000, kQuantities = 5;
  std::vector<std::int64_t> w(kStates);
  for (std::size_t i = 0; i < kStates; ++i) w[i] = static_cast<std::int64_t>(1 + (i * 7) % 4);
  std::vector<std::vector<double>> values;
  for (std::size_t q = 0; q < kQuantities; ++q) values.push_back(ar1(kStates, 0.2 * static_cast<double>(q), 40 + q));
  std::vector<herd::mcmc::DiagnosticSummary> one;
  for (std::size_t q = 0; q < kQuantities; ++q)
    one.push_back(herd::mcmc::summarize(herd::mcmc::DrawsView(values[q], w, 1, kStates)));
  std::vector<std::uint32_t> w32(w.begin(), w.end());
  std::atomic<std::size_t> handed_sized{0}, calls{0};
  const auto view = [&](std::size_t q, std::vector<double>& buffer) {
    ++calls;
    if (buffer.size() == kStates) ++handed_sized;
    buffer.resize(kStates);
    std::copy(values[q].begin(), values[q].end(), buffer.begin());
    return herd::mcmc::DrawsView(buffer, std::span<const std::uint32_t>(w32), 1, kStates);
  };
  const std::size_t block = kStates * sizeof(double);
  const auto bits = herd::mcmc::testing::summary_bits;
  // The caller's blocks (as herd-sample's diagnostics leave them for its HTML report).
  std::vector<std::vector<double>> buffers(2, std::vector<double>(kStates, 0.0));
  const std::vector<const double*> where{buffers[0].data(), buffers[1].data()};
  for (int round = 0; round < 2; ++round) {
    INFO("call " << round);
    calls = 0;
    handed_sized = 0;
    herd_test::counted_count_news_of(block);
    const auto all = herd::mcmc::summarize_all(kQuantities, view, 2, buffers);
    CHECK(herd_test::counted_sized_news() == 0);
    CHECK(calls.load() == kQuantities);
    CHECK(handed_sized.load() == kQuantities);
    REQUIRE(buffers.size() == 2);
    for (std::size_t t = 0; t < buffers.size(); ++t) CHECK(buffers[t].data() == where[t]);
    for (std::size_t q = 0; q < kQuantities; ++q) CHECK(bits(all[q]) == bits(one[q]));
  }
  std::vector<herd::mcmc::DiagnosticSummary> all;
  // One thread: buffer 0 only.
  std::vector<std::vector<double>> single;
  all = herd::mcmc::summarize_all(kQuantities, view, 1, single);
  CHECK(single.size() == 1);
  for (std::size_t q = 0; q < kQuantities; ++q) CHECK(bits(all[q]) == bits(one[q]));
  // Without caller-kept buffers: fresh ones on every call, handed over empty.
  handed_sized = 0;
  herd_test::counted_count_news_of(block);
  all = herd::mcmc::summarize_all(kQuantities, view, 2);
  CHECK(herd_test::counted_sized_news() >= 1);
  CHECK(handed_sized.load() == 0);
  for (std::size_t q = 0; q < kQuantities; ++q) CHECK(bits(all[q]) == bits(one[q]));
  herd_test::counted_count_news_of(0);
  herd::mcmc::release_diagnostics_workspace();
}

// Memory of the ESS's FFT path (mcmc/diagnostics_detail.hpp, piece_lags_stored): past the
// directly summed lags, the lags come from transforms of pieces a few times the lags Geyer's
// sequence asks for, so what the ESS holds is bounded by those lags, not by the draws.
// Counted exactly: the bytes held through operator new (their high-water mark during the
// call) and the workspace's own accounting (Workspace::bytes: its vectors, and the FFT
// buffers that FFTW allocates outside operator new).
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include <catch2/catch.hpp>

#include "diagnostics_detail.hpp"
#include "heap_counter.hpp"
#include "herd/mcmc/diagnostics.hpp"
#include "summary_bits.hpp"

namespace {
namespace d = herd::mcmc::detail;

/// m chains of n draws of an AR(1) with coefficient phi (unit innovations), [m, n].
std::vector<double> ar1(std::size_t m, std::size_t n, double phi, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  std::vector<double> x(m * n);
  for (std::size_t c = 0; c < m; ++c) {
    double v = normal(rng) / std::sqrt(1.0 - phi * phi);
    for (std::size_t t = 0; t < n; ++t) x[c * n + t] = v = phi * v + normal(rng);
  }
  return x;
}

/// The bytes the ESS held at its peak: through operator new, above what was live before the
/// call, plus the FFT buffers (allocated by FFTW, outside operator new) that the workspace
/// holds after it; `fft_used` is set when a piece transform was planned (the workspace is
/// released first, so only this call's transforms count).
template <class Call>
std::size_t held_by(Call&& call, bool& fft_used) {
  herd::mcmc::release_diagnostics_workspace();
  d::Workspace& ws = d::workspace();
  const std::size_t before = herd_test::live_bytes();
  herd_test::reset_peak();
  call(ws);
  const std::size_t heap = herd_test::peak_bytes() - before;
  std::size_t transforms = 0;
  fft_used = false;
  for (const d::RealFft* f = ws.piece_fft.data(); f != ws.piece_fft.data() + ws.piece_fft.size(); ++f) {
    fft_used = fft_used || f->length() > 0;
    transforms += f->length() * sizeof(double) + (f->length() > 0 ? (f->length() / 2 + 1) * 16 : 0);
  }
  transforms += ws.fft.length() * 24;  // a transform of the whole chains (none)
  const std::size_t bytes = heap + transforms;
  herd::mcmc::release_diagnostics_workspace();
  return bytes;
}
}  // namespace

TEST_CASE("the ESS's FFT path holds memory bounded by the lags, flat in the draws", "[mcmc]") {
  // AR(1) 0.999 (autocorrelation time about 2000): Geyer's sequence runs past the directly
  // summed lags to a few thousand lags, so pieces of P = 16384 or 32768 values (64 P bytes:
  // 1-2 MiB; the ESS of the weighted view's series, whose autocorrelations last longer,
  // about twice that). The same bytes at 2^17 and 2^20 draws. A transform of the whole
  // chains held 24 bytes per point of fft_length(2 n): 6 MiB for 2 chains of 2^17 draws, 48
  // MiB for 2^20; a buffer of n doubles would add 1 or 8 MiB.
  constexpr std::size_t kBound = std::size_t{4} << 20;
  for (const std::size_t n : {std::size_t{1} << 17, std::size_t{1} << 20}) {
    INFO("2 chains of " << n << " draws");
    std::vector<double> y = ar1(2, n, 0.999, 7);
    {  // ess_chains_overwrite (stored chains centred in place)
      bool fft = false;
      const std::size_t held =
          held_by([&](d::Workspace& ws) { (void)d::ess_chains_overwrite(y.data(), 2, n, ws); }, fft);
      INFO("held " << held << " bytes");
      CHECK(fft);
      CHECK(held <= kBound);
    }
    {  // ess_indicator_bits (packed indicators, lags past 2048)
      const std::vector<double> x = ar1(2, n, 0.9995, 11);
      const std::size_t wpc = d::indicator_words(n);
      std::vector<std::uint64_t> bits(2 * wpc);
      for (std::size_t c = 0; c < 2; ++c) d::pack_indicator(x.data() + c * n, n, 0.0, bits.data() + c * wpc);
      bool fft = false;
      const std::size_t held =
          held_by([&](d::Workspace& ws) { (void)d::ess_indicator_bits(bits.data(), 2, n, ws); }, fft);
      INFO("held " << held << " bytes");
      CHECK(fft);
      CHECK(held <= kBound);
    }
    {  // ess_series (a weighted view's split chains generated piece by piece)
      // One chain of n states of weights 1..3 (2n draws): split chains of n draws.
      std::vector<std::int64_t> w(n);
      for (std::size_t i = 0; i < n; ++i) w[i] = static_cast<std::int64_t>(1 + i % 3);
      const herd::mcmc::DrawsView v(std::span<const double>(y.data(), n), w, 1, n);
      const d::SplitSeries s(v, d::SplitSeries::Kind::kState);
      bool fft = false;
      const std::size_t held = held_by([&](d::Workspace& ws) { (void)d::ess_series(s, ws); }, fft);
      INFO("held " << held << " bytes");
      CHECK(fft);
      CHECK(held <= kBound);
    }
  }
}

TEST_CASE("out-of-core rank side: within its budget, no memory per state but the z table and indicators", "[mcmc]") {
  // One chain of K = 800,000 states of weights 1..5 (S = 2.4e6 draws), summarized through
  // summarize_all with the caller's values buffer (which takes the z-scores per state). Out
  // of core under a 1 MiB budget, what the call holds at its peak (through operator new,
  // above what was live before it, plus the workspace it keeps: its z table, 1.3 bytes per
  // draw, and the packed indicators, 1/8 per draw, counted in both) is at most the budget,
  // 1.5 bytes per draw and 3 MiB (the radix sort's counts and the reader's blocks, 1 MiB; the
  // ESS's lags and windows). In memory the sort records and draws per state (13 bytes per
  // state, 10.4 MB) fail that bound: so does any buffer per state that comes back.
  constexpr std::size_t kStates = 800000;
  constexpr std::size_t kBudget = std::size_t{1} << 20;
  std::vector<std::uint32_t> w(kStates);  // 32-bit: the view copies none
  for (std::size_t i = 0; i < kStates; ++i) w[i] = static_cast<std::uint32_t>(1 + i % 5);
  const std::vector<double> x = ar1(1, kStates, 0.5, 21);
  const double s = 3.0 * static_cast<double>(kStates);
  const double bound = static_cast<double>(kBudget) + 1.5 * s + static_cast<double>(std::size_t{3} << 20);
  // What summarize_all of `view` holds at its peak under `budget`: through operator new above
  // what was live before the call (the caller's `buffers` as given are not counted), plus the
  // workspace the call keeps.
  const auto peak_of = [](std::size_t budget, const auto& view, std::vector<std::vector<double>>& buffers,
                          herd::mcmc::DiagnosticSummary& out) {
    const std::size_t saved = herd::mcmc::diagnostics_rank_budget();
    herd::mcmc::set_diagnostics_rank_budget(budget);
    herd::mcmc::release_diagnostics_workspace();
    const std::size_t before = herd_test::live_bytes();
    herd_test::reset_peak();
    out = herd::mcmc::summarize_all(1, view, 1, buffers)[0];
    const std::size_t bytes = herd_test::peak_bytes() - before + herd::mcmc::diagnostics_workspace_bytes();
    herd::mcmc::release_diagnostics_workspace();
    herd::mcmc::set_diagnostics_rank_budget(saved);
    return static_cast<double>(bytes);
  };
  const auto held = [&](std::size_t budget, herd::mcmc::DiagnosticSummary& out) {
    std::vector<std::vector<double>> buffers(1);
    buffers[0] = x;
    const auto view = [&](std::size_t /*q*/, std::vector<double>& buffer) {
      if (buffer.size() != kStates) buffer = x;
      return herd::mcmc::DrawsView(buffer, w, 1, kStates);
    };
    return peak_of(budget, view, buffers, out);
  };
  herd::mcmc::DiagnosticSummary ooc, mem;
  const double out_of_core = held(kBudget, ooc);
  const double in_memory = held(std::size_t{1} << 30, mem);
  INFO("out of core " << out_of_core << " bytes, in memory " << in_memory << ", bound " << bound);
  CHECK(out_of_core <= bound);
  CHECK(in_memory > bound);  // the bound is below one set of in-memory rank buffers
  CHECK(std::bit_cast<std::uint64_t>(ooc.ess_bulk) == std::bit_cast<std::uint64_t>(mem.ess_bulk));
  CHECK(std::bit_cast<std::uint64_t>(ooc.rhat_tail) == std::bit_cast<std::uint64_t>(mem.rhat_tail));
  CHECK(std::bit_cast<std::uint64_t>(ooc.mcse_q95) == std::bit_cast<std::uint64_t>(mem.mcse_q95));

  // Streamed (the values read in blocks, the z-scores per state written back out of core,
  // the z table on disk): nothing per state at all but the indicators, within the same
  // bound, now with nothing of the caller's left out of the count: a values buffer (8 bytes
  // per state, 6.4 MB here; counted as the caller's fill inside the call) or z-scores per
  // state, or the in-memory rank buffers, each fail it. The caller's buffers are passed empty
  // and stay so.
  const double tight = bound;
  const auto streamed = [&](herd::mcmc::DiagnosticSummary& out, bool buffer_values) {
    std::vector<std::vector<double>> buffers;
    const auto view = [&](std::size_t /*q*/, std::vector<double>& buffer) {
      if (buffer_values) buffer = x;  // what a caller that held the values would add
      return herd::mcmc::DrawsView(
          [&](std::size_t first, std::span<double> vals) {
            std::copy_n(x.begin() + static_cast<std::ptrdiff_t>(first), vals.size(), vals.begin());
          },
          w, 1, kStates);
    };
    const double bytes = peak_of(kBudget, view, buffers, out);
    CHECK(buffers.size() == 1);
    if (!buffer_values) CHECK(buffers[0].capacity() == 0);
    return bytes;
  };
  herd::mcmc::DiagnosticSummary st, st_buffered;
  const double streamed_bytes = streamed(st, false);
  const double with_values = streamed(st_buffered, true);
  INFO("streamed " << streamed_bytes << " bytes, with a values buffer " << with_values << ", bound " << tight);
  CHECK(streamed_bytes <= tight);
  CHECK(with_values > tight);  // one buffer per state fails the bound
  CHECK(herd::mcmc::testing::summary_bits(st) == herd::mcmc::testing::summary_bits(mem));
  CHECK(herd::mcmc::testing::summary_bits(st_buffered) == herd::mcmc::testing::summary_bits(mem));

  // The weights read in blocks too (DrawsView's constructor of two readers) and the z table
  // on disk: nothing per state but the packed indicators (1/8 byte per draw), so the bound
  // drops the z table's 1.3 bytes per draw and the caller's weights are out of the count
  // too: budget + S / 8 + 3 MiB (3.3 MB less than the bound above, 4.5 MB in all here; 3.97
  // MB measured: the run, the radix sort's counts, the readers' blocks and windows of values
  // and weights). A weights buffer filled inside the call (4 bytes per state, 3.2 MB), or the
  // z table in memory (3.1 MB), fails it.
  const double flat = static_cast<double>(kBudget) + s / 8.0 + static_cast<double>(std::size_t{3} << 20);
  const auto read_weights = [&](herd::mcmc::DiagnosticSummary& out, bool buffer_weights) {
    std::vector<std::vector<double>> buffers;
    std::vector<std::uint32_t> held_weights;
    const auto view = [&](std::size_t /*q*/, std::vector<double>& /*buffer*/) {
      if (buffer_weights) held_weights = w;  // what a caller that held the weights would add
      return herd::mcmc::DrawsView(
          [&](std::size_t first, std::span<double> vals) {
            std::copy_n(x.begin() + static_cast<std::ptrdiff_t>(first), vals.size(), vals.begin());
          },
          [&](std::size_t first, std::span<std::uint32_t> ws) {
            std::copy_n(w.begin() + static_cast<std::ptrdiff_t>(first), ws.size(), ws.begin());
          },
          1, kStates);
    };
    return peak_of(kBudget, view, buffers, out);
  };
  herd::mcmc::DiagnosticSummary rw, rw_buffered;
  const double flat_bytes = read_weights(rw, false);
  const double with_weights = read_weights(rw_buffered, true);
  INFO("weights read " << flat_bytes << " bytes, with a weights buffer " << with_weights << ", bound " << flat);
  CHECK(flat_bytes <= flat);
  CHECK(with_weights > flat);  // a buffer of weights per state fails the bound
  d::ZQuantiles table;         // so does the z table in memory
  table.reset(static_cast<std::size_t>(s));
  CHECK(flat_bytes + static_cast<double>(table.bytes()) > flat);
  CHECK(herd::mcmc::testing::summary_bits(rw) == herd::mcmc::testing::summary_bits(mem));
  CHECK(herd::mcmc::testing::summary_bits(rw_buffered) == herd::mcmc::testing::summary_bits(mem));
}

// The allocation counter by size for this program's other translation unit
// (test_buffer_reuse.cpp), which cannot include heap_counter.hpp (one definition of operator
// new per program).
namespace herd_test {
void counted_count_news_of(std::size_t bytes) { count_news_of(bytes); }
std::size_t counted_sized_news() { return sized_news(); }
}  // namespace herd_test
